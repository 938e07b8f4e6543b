"""The public surface of reference.netguard is small and pinned: a test asserts it."""

from __future__ import annotations

import reference.netguard as netguard


def test_public_names_are_exactly_these() -> None:
    assert set(netguard.__all__) == {
        "MAX_URL_LENGTH",
        "PINNED_ADDRESS_EXTENSION",
        "CallbackPolicy",
        "CallbackRejected",
        "Classification",
        "DnsServerResolver",
        "EgressRefused",
        "GuardedTransport",
        "HostNotResolved",
        "HostsFileResolver",
        "IPAddress",
        "Resolver",
        "SystemResolver",
        "ValidatedTarget",
        "classify",
        "make_delivery_client",
    }
    assert len(netguard.__all__) == len(set(netguard.__all__))
    for name in netguard.__all__:
        assert getattr(netguard, name) is not None


def test_the_pinned_address_extension_name_is_the_documented_one() -> None:
    """Other parts of the reference pass this literal; it must not drift."""
    assert netguard.PINNED_ADDRESS_EXTENSION == "genapi.pinned_address"
    assert netguard.MAX_URL_LENGTH == 2048
