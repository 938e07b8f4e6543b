"""The address tables of ``fixtures/special_purpose_addresses.yaml``, typed and ranked.

Spec §4 says a callback host "must resolve to a public address" and names loopback,
private ranges and link-local addresses (with the cloud metadata address) as rejected.
The tables hold every range that is not public, each with the catalog requirement a
callback host in it breaks and its *ranking*: whether that requirement is a MUST (a
category the spec names, or a long-established range every common classifier agrees is
not global) or only an INTERPRETATION (a recent registry entry, or one that widely used
classifiers still call global). The ranking column decides; the catalog's level of the
requirement agrees with it (a test keeps them in step).

Only :mod:`ipaddress`'s parsing and network membership are used here, never its
``is_private``/``is_global`` verdicts.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Any, Final

from . import load_fixture

__all__ = [
    "TABLES_FIXTURE",
    "AddressRange",
    "Embedding",
    "IPAddress",
    "IPNetwork",
    "Ranking",
    "address_ranges",
    "deciding_range",
    "embedding_of",
    "embeddings",
]

TABLES_FIXTURE: Final = "special_purpose_addresses.yaml"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class Ranking(StrEnum):
    """Why a non-public range's requirement is a MUST or only an INTERPRETATION."""

    #: A category the spec names: loopback, private ranges, link-local, the metadata address.
    NAMED = "named"
    #: A registry entry made before 2020 that every common classifier calls not global.
    ESTABLISHED = "established"
    #: A registry entry made in 2020 or later; common classifiers still call it global.
    RECENT = "recent"
    #: An older entry that a widely used classifier calls global.
    DISPUTED = "disputed"
    #: Outside the special-purpose registries (multicast).
    UNREGISTERED = "unregistered"
    #: A deprecated range (6to4 relay anycast, IPv6 site-local).
    DEPRECATED = "deprecated"

    @property
    def level(self) -> str:
        """The catalog level this ranking gives: ``MUST`` or ``INTERPRETATION``."""
        return "MUST" if self in (Ranking.NAMED, Ranking.ESTABLISHED) else "INTERPRETATION"

    @property
    def reason(self) -> str:
        """One phrase for a failure message: why the suite holds the range this firmly."""
        return _REASONS[self]


_REASONS: Final = {
    Ranking.NAMED: "a category the spec names",
    Ranking.ESTABLISHED: (
        "a registry entry made before 2020 that every common classifier calls not global"
    ),
    Ranking.RECENT: (
        "a registry entry made in 2020 or later that widely used classifiers (Python's "
        "ipaddress 3.11 to 3.13) still call global"
    ),
    Ranking.DISPUTED: (
        "a registry entry that a widely used classifier (Python's ipaddress before its "
        "2024 correction) calls global"
    ),
    Ranking.UNREGISTERED: "outside the special-purpose registries; the spec does not name it",
    Ranking.DEPRECATED: "a deprecated range the spec does not name",
}


@dataclass(frozen=True)
class AddressRange:
    """One range of the tables: a registry entry (``ipv4``, ``ipv6``) or an ``extra`` one."""

    network: IPNetwork
    name: str
    rfc: str
    rule: str
    #: True/False as the registry states it; None where the registry says "N/A".
    public: bool | None
    #: The year of the registry entry; None for a range outside the registries.
    since: int | None = None
    #: The catalog id a callback host in this range breaks; None: the suite draws no
    #: host from it (public, an embedding form, or space no catalog statement covers).
    requirement: str | None = None
    ranking: Ranking | None = None
    #: Why a range outside the registries (``extra``) is not public; None for an entry.
    reason: str | None = None

    @property
    def slug(self) -> str:
        """A readable test id: ``private-10/8-10.0.0.0/8``."""
        return f"{self.rule}-{self.network}"

    def describe(self) -> str:
        """``Dummy IPv6 Prefix 100:0:0:1::/64 (RFC 9780, registry entry of 2025)``."""
        origin = f", registry entry of {self.since}" if self.since else ""
        return f"{self.name} {self.network} ({self.rfc}{origin})"

    def judged(self) -> str:
        """The range with its requirement and ranking, for a failure message."""
        if self.requirement is None or self.ranking is None:
            return self.describe()
        return (
            f"{self.describe()}: {self.requirement}, {self.ranking.level} "
            f"({self.ranking.value}: {self.ranking.reason})"
        )


@dataclass(frozen=True)
class Embedding:
    """An IPv6 prefix that carries an IPv4 address (IPv4-mapped, NAT64, 6to4 ...)."""

    network: ipaddress.IPv6Network
    name: str
    rfc: str
    rule: str
    #: Where the IPv4 address sits: ``low32`` (the last 32 bits), ``bits16_48`` (6to4,
    #: RFC 3056 §2) or ``teredo_client`` (the last 32 bits inverted, RFC 4380 §4).
    extract: str
    #: A connection to the IPv6 address reaches the embedded IPv4 address itself.
    equivalent: bool
    requirement: str

    def carried(self, address: ipaddress.IPv6Address) -> ipaddress.IPv4Address:
        """The IPv4 address *address* (inside this prefix) carries."""
        value = int(address)
        if self.extract == "bits16_48":
            return ipaddress.IPv4Address((value >> 80) & 0xFFFFFFFF)
        if self.extract == "teredo_client":
            return ipaddress.IPv4Address(~value & 0xFFFFFFFF)
        return ipaddress.IPv4Address(value & 0xFFFFFFFF)


def _range(row: dict[str, Any], public: bool | None) -> AddressRange:
    ranking = row.get("ranking")
    return AddressRange(
        network=ipaddress.ip_network(row["prefix"]),
        name=row["name"],
        rfc=row["rfc"],
        rule=row["rule"],
        public=public,
        since=row.get("since"),
        requirement=row.get("requirement"),
        ranking=None if ranking is None else Ranking(ranking),
        reason=row.get("reason"),
    )


@cache
def address_ranges() -> tuple[AddressRange, ...]:
    """Every range of the tables (IPv4, IPv6, then the extra non-public ones), in file order."""
    data = load_fixture(TABLES_FIXTURE)
    found = [_range(row, row["globally_reachable"]) for row in [*data["ipv4"], *data["ipv6"]]]
    found += [_range(row, bool(row["public"])) for row in data["extra"]]
    return tuple(found)


@cache
def embeddings() -> tuple[Embedding, ...]:
    """The IPv6 forms that embed an IPv4 address, in file order."""
    data = load_fixture(TABLES_FIXTURE)
    return tuple(
        Embedding(
            network=ipaddress.IPv6Network(row["prefix"]),
            name=row["name"],
            rfc=row["rfc"],
            rule=row["rule"],
            extract=row["extract"],
            equivalent=bool(row["equivalent"]),
            requirement=row["requirement"],
        )
        for row in data["embeddings"]
    )


def deciding_range(address: IPAddress) -> AddressRange | None:
    """The most specific range that contains *address* (None: no range does, so public).

    Embeddings are not consulted: an IPv6 form of an IPv4 address is judged through the
    address it carries.
    """
    best: AddressRange | None = None
    for entry in address_ranges():
        if entry.network.version == address.version and address in entry.network:
            if best is None or entry.network.prefixlen > best.network.prefixlen:
                best = entry
    return best


def embedding_of(address: ipaddress.IPv6Address) -> Embedding | None:
    """The most specific embedding prefix that contains *address* (None: none does)."""
    found = [e for e in embeddings() if address in e.network]
    return max(found, key=lambda e: e.network.prefixlen, default=None)
