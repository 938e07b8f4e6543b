"""What runs the checks: the pytest plugin and its fixtures, the launcher of the embedded
reference, the command line.
"""
