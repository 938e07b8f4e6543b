"""What the checks judge with: assertion helpers named after spec concepts, the operations of
the API, URL vectors and drawn cases.
"""
