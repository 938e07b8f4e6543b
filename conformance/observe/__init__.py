"""What watches the implementation act: the webhook receiver and canaries, the DNS server,
signature verification, delivery chains and event scenarios.
"""
