"""Which IP addresses count as public (spec §4 "Callback URL requirements").

The verdicts come from explicit tables (``fixtures/special_purpose_addresses.yaml``: the
IANA IPv4 and IPv6 special-purpose registries plus ranges outside them that are not
public), never from :mod:`ipaddress`'s ``is_private``/``is_global``, whose verdicts are
incomplete and change between patch releases. Only :mod:`ipaddress`'s parsing and network
membership are used here.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import genapi_spec

__all__ = [
    "AddressTables",
    "Classification",
    "IPAddress",
    "IPNetwork",
    "classify",
    "embedded_ipv4",
    "load_tables",
    "parse_allow_cidrs",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

TABLES_FIXTURE = "special_purpose_addresses.yaml"

Extract = Literal["low32", "bits16_48", "teredo_client"]


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


@dataclass(frozen=True, slots=True)
class _Range:
    network: IPNetwork
    name: str
    rfc: str
    #: True/False as the registry states it; None where the registry says "N/A".
    public: bool | None
    rule: str

    def describe(self) -> str:
        return f"{self.name} ({self.network}, {self.rfc})"


@dataclass(frozen=True, slots=True)
class _Embedding:
    network: ipaddress.IPv6Network
    name: str
    rfc: str
    extract: Extract
    #: The IPv6 address reaches exactly the embedded IPv4 address (IPv4-mapped).
    equivalent: bool
    rule: str


@dataclass(frozen=True, slots=True)
class AddressTables:
    """The parsed tables, longest prefix first so the first match is the most specific."""

    ranges_v4: tuple[_Range, ...]
    ranges_v6: tuple[_Range, ...]
    embeddings: tuple[_Embedding, ...]

    def lookup(self, ip: IPAddress) -> _Range | None:
        ranges = self.ranges_v4 if ip.version == 4 else self.ranges_v6
        for entry in ranges:
            if ip in entry.network:
                return entry
        return None

    def embedding(self, ip: ipaddress.IPv6Address) -> _Embedding | None:
        for entry in self.embeddings:
            if ip in entry.network:
                return entry
        return None


def _by_specificity(ranges: Iterable[_Range]) -> tuple[_Range, ...]:
    return tuple(sorted(ranges, key=lambda entry: -entry.network.prefixlen))


def _parse_tables(data: dict[str, Any]) -> AddressTables:
    registry: list[_Range] = [
        _Range(
            network=ipaddress.ip_network(row["prefix"]),
            name=row["name"],
            rfc=row["rfc"],
            public=row["globally_reachable"],
            rule=row["rule"],
        )
        for row in [*data["ipv4"], *data["ipv6"]]
    ]
    extra: list[_Range] = [
        _Range(
            network=ipaddress.ip_network(row["prefix"]),
            name=f"{row['name']}: {row['reason']}",
            rfc=row["rfc"],
            public=bool(row["public"]),
            rule=row["rule"],
        )
        for row in data["extra"]
    ]
    everything = [*registry, *extra]
    embeddings = []
    for row in data["embeddings"]:
        network = ipaddress.ip_network(row["prefix"])
        if not isinstance(network, ipaddress.IPv6Network):
            raise ValueError(f"embedding prefix {network} is not IPv6")
        embeddings.append(
            _Embedding(
                network=network,
                name=row["name"],
                rfc=row["rfc"],
                extract=row["extract"],
                equivalent=bool(row["equivalent"]),
                rule=row["rule"],
            )
        )
    return AddressTables(
        ranges_v4=_by_specificity(r for r in everything if r.network.version == 4),
        ranges_v6=_by_specificity(r for r in everything if r.network.version == 6),
        embeddings=tuple(sorted(embeddings, key=lambda e: -e.network.prefixlen)),
    )


@cache
def load_tables() -> AddressTables:
    """The tables of ``fixtures/special_purpose_addresses.yaml``, loaded once."""
    data: dict[str, Any] = genapi_spec.load_fixture(TABLES_FIXTURE)
    return _parse_tables(data)


def parse_allow_cidrs(cidrs: Iterable[str]) -> tuple[IPNetwork, ...]:
    """Parse the test-mode allowlist (e.g. ``["127.0.0.1/32"]``); host bits must be zero."""
    return tuple(ipaddress.ip_network(cidr, strict=True) for cidr in cidrs)


def embedded_ipv4(ip: ipaddress.IPv6Address, extract: Extract) -> ipaddress.IPv4Address:
    """The IPv4 address an IPv6 address carries, by the embedding's extraction rule."""
    value = int(ip)
    if extract == "low32":
        return ipaddress.IPv4Address(value & 0xFFFFFFFF)
    if extract == "bits16_48":
        # 6to4 (RFC 3056 §2): 2002:V4ADDR::/48, the IPv4 address in bits 16..47.
        return ipaddress.IPv4Address((value >> 80) & 0xFFFFFFFF)
    if extract == "teredo_client":
        # Teredo (RFC 4380 §4): the client's public address, obfuscated by inverting bits.
        return ipaddress.IPv4Address(~value & 0xFFFFFFFF)
    raise ValueError(f"unknown extraction rule {extract!r}")


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
    tables = load_tables()
    if isinstance(address, ipaddress.IPv6Address):
        embedding = tables.embedding(address)
        entry = tables.lookup(address)
        # A more specific table entry wins over an embedding (::1 is loopback, not the
        # IPv4-compatible form of 0.0.0.1).
        more_specific = entry is not None and (
            embedding is None or entry.network.prefixlen > embedding.network.prefixlen
        )
        if embedding is not None and not more_specific:
            return _classify_embedded(address, embedding, allow_cidrs, tables)
    return _classify_plain(address, tables)


def _classify_plain(address: IPAddress, tables: AddressTables) -> Classification:
    entry = tables.lookup(address)
    if entry is None:
        return Classification(True, f"{address} is a public address", "public")
    if entry.public:
        return Classification(
            True, f"{address} is globally reachable: {entry.describe()}", "public"
        )
    return Classification(
        False, f"{address} is not a public address: {entry.describe()}", entry.rule
    )


def _classify_embedded(
    address: ipaddress.IPv6Address,
    embedding: _Embedding,
    allow_cidrs: Sequence[IPNetwork],
    tables: AddressTables,
) -> Classification:
    inner_ip = embedded_ipv4(address, embedding.extract)
    if embedding.equivalent and _allowlisted(inner_ip, allow_cidrs):
        return Classification(
            True,
            f"{address} is the {embedding.name} form of {inner_ip}, in the test-mode allowlist",
            "allowlist",
        )
    inner = _classify_plain(inner_ip, tables)
    form = f"{address} is the {embedding.name} form ({embedding.rfc}) of {inner_ip}"
    if not inner.public:
        # The embedded address decides first: the reason then names the range that matters.
        return Classification(False, f"{form}; {inner.reason}", embedding.rule)
    if embedding.equivalent:
        return Classification(True, f"{form}, a public address", "public")
    outer = tables.lookup(address)
    if outer is not None and outer.public is False:
        return Classification(
            False, f"{form}; the form itself is not public: {outer.describe()}", embedding.rule
        )
    return Classification(True, f"{form}, a public address", "public")
