"""Hypothesis properties of the address rules and the policy: data only, never a connect.

Random addresses are only classified or validated (the resolver is never reached for a
literal); nothing is sent anywhere.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import anyio
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import genapi_spec
from reference.netguard import CallbackPolicy, CallbackRejected, HostNotResolved, classify
from reference.netguard.urls import parse_ipv4_host

TABLES: dict[str, Any] = genapi_spec.load_fixture("special_purpose_addresses.yaml")
ROWS = [
    *({**row, "public": row["globally_reachable"]} for row in TABLES["ipv4"] + TABLES["ipv6"]),
    *TABLES["extra"],
]
ALL_NETWORKS = [ipaddress.ip_network(row["prefix"]) for row in ROWS]
#: Embedding prefix -> its extraction rule (two NAT64 prefixes share the rule id "nat64").
EMBEDDINGS = {ipaddress.IPv6Network(row["prefix"]): row["extract"] for row in TABLES["embeddings"]}
NON_PUBLIC = [
    network
    for row, network in zip(ROWS, ALL_NETWORKS, strict=True)
    if row["public"] is False and network not in EMBEDDINGS
]
PUBLIC_EXCEPTIONS = [
    network for row, network in zip(ROWS, ALL_NETWORKS, strict=True) if row["public"] is True
]
PRIVATE_V4 = [network for network in NON_PUBLIC if network.version == 4]


class NoDns:
    async def resolve(self, host: str) -> list[Any]:
        raise HostNotResolved(host, "this test resolves nothing")


def validate(url: str) -> Any:
    """Run the policy synchronously (Hypothesis drives sync tests)."""

    async def run() -> Any:
        with anyio.fail_after(5):
            return await CallbackPolicy(NoDns()).validate(url)

    return anyio.run(run)


def literal(address: Any) -> str:
    return f"[{address}]" if address.version == 6 else str(address)


@st.composite
def inside(draw: st.DrawFn, networks: list[Any]) -> Any:
    network = draw(st.sampled_from(networks))
    offset = draw(st.integers(0, network.num_addresses - 1))
    return network.network_address + offset


@given(inside(NON_PUBLIC))
def test_addresses_in_non_public_ranges_are_rejected(address: Any) -> None:
    # The few globally reachable blocks nested inside (192.0.0.9/32 ...) are excepted.
    assume(not any(address in network for network in PUBLIC_EXCEPTIONS))
    assume(not (address.version == 6 and any(address in e for e in EMBEDDINGS)))
    assert not classify(address).public
    with pytest.raises(CallbackRejected):
        validate(f"http://{literal(address)}:9/")


# Octet by octet, first octet outside 0, 10, 127 and 224-255, so few draws are filtered.
PUBLIC_LOOKING_V4 = st.builds(
    lambda a, b, c, d: ipaddress.IPv4Address(f"{a}.{b}.{c}.{d}"),
    st.integers(1, 223).filter(lambda octet: octet not in (10, 127)),
    st.integers(0, 255),
    st.integers(0, 255),
    st.integers(0, 255),
)


@given(PUBLIC_LOOKING_V4)
def test_ipv4_addresses_outside_every_table_are_public(address: ipaddress.IPv4Address) -> None:
    assume(not any(address in network for network in ALL_NETWORKS))
    assert classify(address).public
    target = validate(f"http://{address}/hook")
    assert target.address == str(address)


@given(st.integers(2**125, 2**126 - 1).map(ipaddress.IPv6Address))
def test_global_unicast_ipv6_outside_every_table_is_public(address: ipaddress.IPv6Address) -> None:
    # 2000::/3 is the IPv6 global unicast space.
    assume(not any(address in network for network in ALL_NETWORKS if network.version == 6))
    assert classify(address).public
    assert validate(f"http://[{address}]/hook").address == str(address)


def embed(
    prefix: ipaddress.IPv6Network, v4: ipaddress.IPv4Address, noise: int
) -> ipaddress.IPv6Address:
    """The IPv6 address in ``prefix`` carrying ``v4`` (``noise`` fills the free bits)."""
    value, base = int(v4), int(prefix.network_address)
    extract = EMBEDDINGS[prefix]
    if extract == "bits16_48":  # 6to4: 2002:V4ADDR:subnet:interface
        return ipaddress.IPv6Address(base | (value << 80) | (noise & (2**80 - 1)))
    if extract == "teredo_client":  # server address, flags, port: anything
        free = (noise & (2**64 - 1)) << 32
        return ipaddress.IPv6Address(base | free | (~value & 0xFFFFFFFF))
    # low32: the bits between the prefix and the IPv4 address are free (zero for /96).
    free_bits = 96 - prefix.prefixlen
    return ipaddress.IPv6Address(base | ((noise & (2**free_bits - 1)) << 32) | value)


@given(
    inside(PRIVATE_V4),
    st.sampled_from(sorted(EMBEDDINGS)),
    st.integers(0, 2**80 - 1),
)
def test_embedded_forms_of_non_public_ipv4_are_rejected(
    v4: ipaddress.IPv4Address, prefix: ipaddress.IPv6Network, noise: int
) -> None:
    assume(not any(v4 in network for network in PUBLIC_EXCEPTIONS))
    address = embed(prefix, v4, noise)
    verdict = classify(address)
    assert not verdict.public, verdict.reason
    with pytest.raises(CallbackRejected):
        validate(f"http://[{address}]:9/")


@given(PUBLIC_LOOKING_V4, st.sampled_from(sorted(EMBEDDINGS)), st.integers(0, 2**80 - 1))
def test_embedded_forms_of_public_ipv4_follow_the_form(
    v4: ipaddress.IPv4Address, prefix: ipaddress.IPv6Network, noise: int
) -> None:
    """A public IPv4 inside a form is public unless the form itself is not public."""
    assume(not any(v4 in network for network in ALL_NETWORKS))
    address = embed(prefix, v4, noise)
    form_is_public = str(prefix) in ("::ffff:0:0/96", "64:ff9b::/96", "2002::/16", "2001::/32")
    assert classify(address).public is form_is_public


@given(st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address), st.data())
def test_every_ipv4_spelling_reads_back_as_the_same_address(
    address: ipaddress.IPv4Address, data: st.DataObject
) -> None:
    """Decimal, hex, octal and short forms (inet_aton, WHATWG) all name one address."""
    value = int(address)
    parts = data.draw(st.sampled_from([1, 2, 3, 4]))
    widths = {1: [32], 2: [8, 24], 3: [8, 8, 16], 4: [8, 8, 8, 8]}[parts]
    numbers, shift = [], 32
    for width in widths:
        shift -= width
        numbers.append((value >> shift) & (2**width - 1))
    spelled = []
    for number in numbers:
        radix = data.draw(st.sampled_from(["dec", "hex", "oct"]))
        if radix == "hex":
            spelled.append(hex(number))
        elif radix == "oct" and number:
            spelled.append("0" + format(number, "o"))
        else:
            spelled.append(str(number))
    assert parse_ipv4_host(".".join(spelled)) == address
