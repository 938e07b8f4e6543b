"""What watches the implementation act: the webhook receiver and canaries, the DNS server,
signature verification, delivery chains and event scenarios, the delivery clock of spec §6
(``timing``) and the bounded waits on a generation and its events (``waits``).
"""
