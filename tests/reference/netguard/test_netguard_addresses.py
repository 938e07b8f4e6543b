"""classify(): the special-purpose tables, embedded IPv4, the allowlist (spec §4).

Expected verdicts come from the YAML tables entry by entry, and from a hand-written list
that does not read the tables at all (so a wrong table entry is caught too).
"""

from __future__ import annotations

import ipaddress
import tokenize
from pathlib import Path
from typing import Any

import pytest

import genapi_spec
from genapi_spec import address_tables
from genapi_spec.address_tables import embedding_of
from reference.netguard import classify
from reference.netguard.addresses import parse_allow_cidrs

TABLES: dict[str, Any] = genapi_spec.load_fixture("special_purpose_addresses.yaml")
ENTRIES = [
    *({**row, "public": row["globally_reachable"]} for row in TABLES["ipv4"] + TABLES["ipv6"]),
    *TABLES["extra"],
]
EMBEDDING_PREFIXES = [ipaddress.IPv6Network(row["prefix"]) for row in TABLES["embeddings"]]
NETWORKS = [ipaddress.ip_network(row["prefix"]) for row in ENTRIES]


def samples(network: ipaddress.IPv4Network | ipaddress.IPv6Network) -> list[Any]:
    """First, middle and last address of a network."""
    first, last = int(network.network_address), int(network.broadcast_address)
    kind = type(network.network_address)  # ip_address(1) would be IPv4 even for ::1
    return [kind(n) for n in sorted({first, (first + last) // 2, last})]


def decided_by(entry_network: Any, address: Any) -> bool:
    """True if no more specific entry or embedding rule overrides ``entry_network`` here."""
    for other in [*NETWORKS, *EMBEDDING_PREFIXES]:
        if (
            other.version == address.version
            and other != entry_network
            and other.prefixlen >= entry_network.prefixlen
            and address in other
        ):
            return False
    return entry_network not in EMBEDDING_PREFIXES


CASES = [
    pytest.param(row, address, id=f"{row['prefix']}-{address}")
    for row, network in zip(ENTRIES, NETWORKS, strict=True)
    for address in samples(network)
    if decided_by(network, address)
]


@pytest.mark.parametrize(("row", "address"), CASES)
def test_every_table_entry_decides_its_addresses(row: dict[str, Any], address: Any) -> None:
    verdict = classify(address)
    assert verdict.public is bool(row["public"]), verdict.reason
    if not verdict.public:
        assert verdict.rule == row["rule"]
        assert row["prefix"] in verdict.reason


def test_every_entry_is_exercised_or_is_an_embedding() -> None:
    exercised = {row["prefix"] for row, _ in (case.values for case in CASES)}
    embedding = {str(prefix) for prefix in EMBEDDING_PREFIXES}
    missing = {row["prefix"] for row in ENTRIES} - exercised - embedding
    assert missing == set()


@pytest.mark.parametrize(
    ("address", "public", "rule"),
    [
        ("8.8.8.8", True, "public"),
        ("93.184.216.34", True, "public"),
        ("1.1.1.1", True, "public"),
        ("0.0.0.0", False, "unspecified"),  # noqa: S104 (data)
        ("0.255.255.255", False, "this-network"),
        ("10.0.0.1", False, "private-10/8"),
        ("100.64.0.0", False, "cgnat"),
        ("100.100.100.200", False, "metadata"),
        ("127.0.0.1", False, "loopback"),
        ("169.254.169.254", False, "metadata"),
        ("169.254.169.253", False, "link-local"),
        ("172.31.0.1", False, "private-172.16/12"),
        ("192.0.0.8", False, "ietf-protocol"),
        ("192.0.0.9", True, "public"),
        ("192.0.0.10", True, "public"),
        ("192.0.0.11", False, "ietf-protocol"),
        ("192.0.0.192", False, "ietf-protocol"),  # CPython flipped this one between releases
        ("192.31.196.1", True, "public"),
        ("192.88.99.1", False, "reserved"),
        ("192.168.255.255", False, "private-192.168/16"),
        ("198.19.255.255", False, "benchmarking"),
        ("224.0.0.251", False, "multicast"),
        ("239.255.255.255", False, "multicast"),
        ("240.0.0.0", False, "reserved"),
        ("255.255.255.255", False, "broadcast"),
        ("::", False, "unspecified"),
        ("::1", False, "loopback"),
        ("::2", False, "ipv4-compatible"),
        ("1::", False, "reserved"),
        ("100::1", False, "discard-only"),
        ("100:0:0:1::1", False, "dummy"),
        ("2001:1::1", True, "public"),
        ("2001:1::4", False, "ietf-protocol"),
        ("2001:4:112::1", True, "public"),
        ("2001:db8:ffff::1", False, "documentation"),
        ("2606:4700:4700::1111", True, "public"),
        ("2a00:1450:4001::1", True, "public"),
        ("3fff:fff::1", False, "documentation"),
        ("4000::1", False, "reserved"),
        ("5f00::1", False, "srv6"),
        ("fc00::1", False, "unique-local"),
        ("fd00:ec2::254", False, "metadata"),
        ("fe80::1", False, "link-local"),
        ("febf::1", False, "link-local"),
        ("fec0::1", False, "site-local"),
        ("ff02::1", False, "multicast"),
        ("::ffff:8.8.8.8", True, "public"),
        ("::ffff:100.100.100.200", False, "ipv4-mapped"),  # CPython calls it global
        ("::ffff:127.0.0.1", False, "ipv4-mapped"),
        ("::8.8.8.8", False, "ipv4-compatible"),
        ("::ffff:0:8.8.8.8", False, "siit"),
        ("64:ff9b::8.8.8.8", True, "public"),
        ("64:ff9b::10.1.2.3", False, "nat64"),
        ("64:ff9b:1::8.8.8.8", False, "nat64"),
        ("2002:808:808::1", True, "public"),
        ("2002:c0a8:101::1", False, "6to4"),
        ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", True, "public"),  # client 8.8.8.8
        ("2001:0:4136:e378:8000:63bf:3f57:fefe", False, "teredo"),  # client 192.168.1.1
    ],
)
def test_known_verdicts(address: str, public: bool, rule: str) -> None:
    verdict = classify(address)
    assert (verdict.public, verdict.rule) == (public, rule), verdict.reason


@pytest.mark.parametrize(
    ("address", "extract", "expected"),
    [
        ("::ffff:10.1.2.3", "low32", "10.1.2.3"),
        ("64:ff9b::a9fe:a9fe", "low32", "169.254.169.254"),
        ("2002:c0a8:101:4:5:6:7:8", "bits16_48", "192.168.1.1"),
        ("2001:0:4136:e378:8000:63bf:3f57:fefe", "teredo_client", "192.168.1.1"),
        ("2001:0:4136:e378:8000:63bf:ffff:ffff", "teredo_client", "0.0.0.0"),  # noqa: S104
    ],
)
def test_embedded_ipv4_extraction(address: str, extract: str, expected: str) -> None:
    ip = ipaddress.IPv6Address(address)
    embedding = embedding_of(ip)
    assert embedding is not None and embedding.extract == extract
    assert embedding.carried(ip) == ipaddress.IPv4Address(expected)


def test_allowlist_makes_an_address_and_its_mapped_form_public() -> None:
    allow = parse_allow_cidrs(["127.0.0.1/32", "fd00::/64"])
    for address in ("127.0.0.1", "::ffff:127.0.0.1", "fd00::5"):
        verdict = classify(address, allow)
        assert (verdict.public, verdict.rule) == (True, "allowlist")
    # Only the mapped form is the same destination; NAT64 and 6to4 forms are not.
    for address in ("127.0.0.2", "64:ff9b::127.0.0.1", "2002:7f00:1::1", "fd00:0:0:1::5"):
        assert not classify(address, allow).public


def test_allowlist_refuses_cidrs_with_host_bits() -> None:
    with pytest.raises(ValueError, match="host bits"):
        parse_allow_cidrs(["127.0.0.1/8"])


def test_the_package_never_asks_ipaddress_for_a_verdict() -> None:
    """ipaddress's is_private/is_global verdicts are incomplete and change between Python
    versions; the package decides from the IANA special-purpose tables instead (read
    through ``genapi_spec.address_tables``, which must not ask either)."""
    forbidden = {
        "is_private",
        "is_global",
        "is_loopback",
        "is_link_local",
        "is_reserved",
        "is_multicast",
        "is_unspecified",
        "is_site_local",
    }
    package = Path(classify.__code__.co_filename).parent
    used: list[str] = []
    for source in [*sorted(package.glob("*.py")), Path(address_tables.__file__)]:
        with tokenize.open(source) as handle:
            for token in tokenize.generate_tokens(handle.readline):
                if token.type == tokenize.NAME and token.string in forbidden:
                    used.append(f"{source.name}:{token.start[0]} {token.string}")
    assert used == []
