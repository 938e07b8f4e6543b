"""What talks to the implementation under test: the target profile and its declarations,
secrets, the HTTP client, the adapters for unshown operations, and the set-up the checks
share (``setup``: the submit that must be accepted; ``webhooks``: registered webhooks).
"""
