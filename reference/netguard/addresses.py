"""Which IP addresses count as public (spec §4 "Callback URL requirements").

The verdicts come from explicit tables (``fixtures/special_purpose_addresses.yaml``: the
IANA IPv4 and IPv6 special-purpose registries plus ranges outside them that are not
public), never from :mod:`ipaddress`'s ``is_private``/``is_global``, whose verdicts are
incomplete and change between patch releases. Only :mod:`ipaddress`'s parsing and network
membership are used here. The tables are read, typed and ranked once, for the suite and
the reference alike, by :mod:`genapi_spec.address_tables`; this module gives the verdict.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from genapi_spec.address_tables import (
    AddressRange,
    Embedding,
    IPAddress,
    IPNetwork,
    deciding_range,
    embedding_of,
)

__all__ = [
    "Classification",
    "IPAddress",
    "IPNetwork",
    "classify",
    "parse_allow_cidrs",
]


@dataclass(frozen=True, slots=True)
class Classification:
    """The verdict on one address: ``public`` or not, and why (a sentence for a 400 body).

    ``rule`` is the short id of the table entry or embedding rule that decided, matching the
    ``rule`` field of ``fixtures/callback_urls.yaml`` (``"public"`` or ``"allowlist"`` when
    the address is public).
    """

    public: bool
    reason: str
    rule: str


def _describe(entry: AddressRange) -> str:
    """The range as a 400 body names it; a range outside the registries with its reason."""
    name = entry.name if entry.reason is None else f"{entry.name}: {entry.reason}"
    return f"{name} ({entry.network}, {entry.rfc})"


def parse_allow_cidrs(cidrs: Iterable[str]) -> tuple[IPNetwork, ...]:
    """Parse the test-mode allowlist (e.g. ``["127.0.0.1/32"]``); host bits must be zero."""
    return tuple(ipaddress.ip_network(cidr, strict=True) for cidr in cidrs)


def _allowlisted(ip: IPAddress, allow: Sequence[IPNetwork]) -> bool:
    return any(ip.version == network.version and ip in network for network in allow)


def classify(ip: IPAddress | str, allow_cidrs: Sequence[IPNetwork] = ()) -> Classification:
    """Decide whether ``ip`` is a public address a callback may be delivered to.

    ``allow_cidrs`` is the test-mode allowlist: addresses inside it count as public (the
    suite's receiver listens on loopback, where all test traffic stays). An IPv4-mapped
    IPv6 address of an allowlisted IPv4 address is allowlisted too, since a socket
    connecting to it reaches that IPv4 address.
    """
    address: IPAddress = ipaddress.ip_address(ip) if isinstance(ip, str) else ip
    if _allowlisted(address, allow_cidrs):
        return Classification(True, f"{address} is in the test-mode allowlist", "allowlist")
    if isinstance(address, ipaddress.IPv6Address):
        embedding = embedding_of(address)
        entry = deciding_range(address)
        # A more specific table entry wins over an embedding (::1 is loopback, not the
        # IPv4-compatible form of 0.0.0.1).
        more_specific = entry is not None and (
            embedding is None or entry.network.prefixlen > embedding.network.prefixlen
        )
        if embedding is not None and not more_specific:
            return _classify_embedded(address, embedding, allow_cidrs)
    return _classify_plain(address)


def _classify_plain(address: IPAddress) -> Classification:
    entry = deciding_range(address)
    if entry is None:
        return Classification(True, f"{address} is a public address", "public")
    if entry.public:
        return Classification(
            True, f"{address} is globally reachable: {_describe(entry)}", "public"
        )
    return Classification(
        False, f"{address} is not a public address: {_describe(entry)}", entry.rule
    )


def _classify_embedded(
    address: ipaddress.IPv6Address,
    embedding: Embedding,
    allow_cidrs: Sequence[IPNetwork],
) -> Classification:
    inner_ip = embedding.carried(address)
    if embedding.equivalent and _allowlisted(inner_ip, allow_cidrs):
        return Classification(
            True,
            f"{address} is the {embedding.name} form of {inner_ip}, in the test-mode allowlist",
            "allowlist",
        )
    inner = _classify_plain(inner_ip)
    form = f"{address} is the {embedding.name} form ({embedding.rfc}) of {inner_ip}"
    if not inner.public:
        # The embedded address decides first: the reason then names the range that matters.
        return Classification(False, f"{form}; {inner.reason}", embedding.rule)
    if embedding.equivalent:
        return Classification(True, f"{form}, a public address", "public")
    outer = deciding_range(address)
    if outer is not None and outer.public is False:
        return Classification(
            False, f"{form}; the form itself is not public: {_describe(outer)}", embedding.rule
        )
    return Classification(True, f"{form}, a public address", "public")
