"""The vector fixtures are well-formed, complete and safe; signatures recompute.

Covers fixtures/special_purpose_addresses.yaml, fixtures/callback_urls.yaml and
fixtures/signature_vectors.yaml as data (the reference's behaviour on them is tested in
tests/reference/netguard/). The address tables rank each non-public range (MUST or
INTERPRETATION, and why); here the ranking is held to its own definition, to the
catalog's levels and to the URL vectors. Signature digests were recorded with openssl;
here they are recomputed with Python's hmac, and with openssl again when it is installed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import re
import shutil
import subprocess
from collections import Counter
from typing import Any

import pytest

import genapi_spec
from conformance.catalog import ID_PATTERN, load_catalog
from conformance.judge.strategies import literal_address
from genapi_spec.address_tables import (
    AddressRange,
    Ranking,
    address_ranges,
    deciding_range,
    embedding_of,
    embeddings,
)

ADDRESSES: dict[str, Any] = genapi_spec.load_fixture("special_purpose_addresses.yaml")
URLS: dict[str, Any] = genapi_spec.load_fixture("callback_urls.yaml")
SIGNATURES: dict[str, Any] = genapi_spec.load_fixture("signature_vectors.yaml")
VECTORS: list[dict[str, Any]] = URLS["vectors"]

#: Rules the validator itself decides (before any address is judged).
URL_RULES = {
    "syntax",
    "length",
    "characters",
    "backslash",
    "scheme",
    "host-missing",
    "port",
    "zone-id",
    "host-syntax",
    "invalid-ip",
    "unresolvable",
}
PLACEHOLDERS = ("{receiver}", "{receiver_authority}", "{receiver_port}")


def expand(vector: dict[str, Any], receiver: str = "http://127.0.0.1:8765") -> str:
    authority = receiver.split("://", 1)[1]
    port = authority.rsplit(":", 1)[1]
    text = vector.get("url", vector.get("url_template", ""))
    text = (
        text.replace("{receiver}", receiver)
        .replace("{receiver_authority}", authority)
        .replace("{receiver_port}", port)
    )
    if "url_template" in vector:
        text = text.replace("{pad}", "a" * (vector["length"] - len(text) + len("{pad}")))
    return str(text)


# ---- special_purpose_addresses.yaml ----------------------------------------------------


def test_address_tables_parse_and_sit_in_the_right_family() -> None:
    for family, version in (("ipv4", 4), ("ipv6", 6)):
        prefixes = [row["prefix"] for row in ADDRESSES[family]]
        assert len(prefixes) == len(set(prefixes)), f"duplicate prefix in {family}"
        for row in ADDRESSES[family]:
            network = ipaddress.ip_network(row["prefix"], strict=True)
            assert network.version == version, row
            assert row["globally_reachable"] in (True, False, None), row
            assert row["name"] and row["rfc"].startswith("RFC") and row["rule"], row
            assert isinstance(row["since"], int) and 1981 <= row["since"] <= 2025, row
    for row in ADDRESSES["extra"]:
        ipaddress.ip_network(row["prefix"], strict=True)
        assert row["public"] is False and row["reason"] and row["rule"], row
        assert "since" not in row, row  # not a registry entry
    for row in ADDRESSES["embeddings"]:
        assert ipaddress.ip_network(row["prefix"], strict=True).version == 6
        assert row["extract"] in ("low32", "bits16_48", "teredo_client"), row
        assert isinstance(row["equivalent"], bool)
        assert ID_PATTERN.match(row["requirement"]), row


# ---- the ranking: which requirement each non-public range breaks, and how firmly ----------

RANKED = [entry for entry in address_ranges() if entry.requirement is not None]
#: The rules of the categories spec §4 names: loopback, private ranges, link-local and
#: the cloud metadata address.
NAMED_RULES = {
    "loopback", "private-10/8", "private-172.16/12", "private-192.168/16", "unique-local",
    "link-local", "metadata",
}  # fmt: skip
#: The year from which a registry entry counts as recent.
RECENT_SINCE = 2020


def _decided_by(entry: AddressRange) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """Addresses across *entry* (its ends and 62 between) that no more specific entry takes."""
    network = entry.network
    first, last = int(network.network_address), int(network.broadcast_address)
    make = ipaddress.IPv4Address if network.version == 4 else ipaddress.IPv6Address
    numbers = {first, last, *range(first, last + 1, max(1, (last - first) // 62))}
    return [make(n) for n in sorted(numbers) if deciding_range(make(n)) == entry]


def test_a_range_names_a_requirement_exactly_when_it_is_ranked() -> None:
    for entry in address_ranges():
        assert (entry.requirement is None) is (entry.ranking is None), entry
        if entry.requirement is not None:
            assert entry.public is False, entry  # a public range breaks nothing
            assert ID_PATTERN.match(entry.requirement), entry


@pytest.mark.parametrize("entry", RANKED, ids=lambda e: e.slug)
def test_ranking_agrees_with_the_catalog_level(entry: AddressRange) -> None:
    """The table decides the side; the catalog entry the range names is on that side."""
    assert entry.ranking is not None and entry.requirement is not None
    assert load_catalog()[entry.requirement].level.value == entry.ranking.level, entry


@pytest.mark.parametrize("entry", RANKED, ids=lambda e: e.slug)
def test_ranking_keeps_its_definition(entry: AddressRange) -> None:
    """named: a category the spec names. established: a registry entry made before 2020
    that Python's ipaddress (this interpreter's) calls not global, everywhere in the range.
    recent: made in 2020 or later. disputed: older, and called global by some classifier.
    unregistered and deprecated: outside the registries."""
    ranking = entry.ranking
    assert (ranking is Ranking.NAMED) is (entry.rule in NAMED_RULES), entry
    if ranking in (Ranking.ESTABLISHED, Ranking.RECENT, Ranking.DISPUTED):
        assert entry.since is not None, entry
        assert (entry.since >= RECENT_SINCE) is (ranking is Ranking.RECENT), entry
    if ranking is Ranking.ESTABLISHED:
        called_global = [str(a) for a in _decided_by(entry) if a.is_global]
        assert called_global == [], f"{entry.slug}: ipaddress calls these global"
    if ranking in (Ranking.UNREGISTERED, Ranking.DEPRECATED):
        assert entry.since is None, entry


def test_the_disputed_ranking_is_what_the_issue_reported() -> None:
    """The ranges an implementation relying on Python's ipaddress may accept are warnings."""
    by_prefix = {str(entry.network): entry for entry in address_ranges()}
    for prefix, rfc, year in (
        ("100:0:0:1::/64", "RFC 9780", 2025),
        ("3fff::/20", "RFC 9637", 2024),
        ("5f00::/16", "RFC 9602", 2024),
    ):
        entry = by_prefix[prefix]
        assert (entry.ranking, entry.requirement) == (Ranking.RECENT, "URL-IANA-04")
        assert rfc in entry.judged() and str(year) in entry.judged()
    for prefix in ("10.0.0.0/8", "127.0.0.0/8", "169.254.169.254/32", "fe80::/10"):
        assert by_prefix[prefix].ranking is Ranking.NAMED, prefix


def test_embeddings_rank_the_mapped_form_only_as_a_must() -> None:
    """IPv4-mapped reaches the IPv4 address itself; the other forms need a translator."""
    catalog = load_catalog()
    for embedding in embeddings():
        level = catalog[embedding.requirement].level.value
        assert (level == "MUST") is embedding.equivalent, embedding


def test_address_tables_hold_every_range_the_spec_and_facts_name() -> None:
    listed = {
        row["prefix"]
        for part in ("ipv4", "ipv6", "extra")
        for row in ADDRESSES[part]
        if row.get("globally_reachable", row.get("public")) is False
    }
    required = {
        "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
        "172.16.0.0/12", "192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4", "192.88.99.0/24",
        "169.254.169.254/32", "::/128", "::1/128", "fc00::/7", "fe80::/10", "fec0::/10",
        "ff00::/8", "fd00:ec2::254/128", "64:ff9b:1::/48",
    }  # fmt: skip
    assert required <= listed
    embedded = {row["prefix"] for row in ADDRESSES["embeddings"]}
    assert embedded == {
        "::ffff:0:0/96", "::/96", "::ffff:0:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48",
        "2002::/16", "2001::/32",
    }  # fmt: skip


# ---- callback_urls.yaml ---------------------------------------------------------------


def test_at_least_100_url_vectors_with_the_documented_fields() -> None:
    assert len(VECTORS) >= 100
    for vector in VECTORS:
        assert ("url" in vector) != ("url_template" in vector), vector
        if "url_template" in vector:
            assert vector["url_template"].count("{pad}") == 1
            assert isinstance(vector["length"], int)
        assert vector["verdict"] in ("accept", "reject"), vector
        assert isinstance(vector["rule"], str) and vector["rule"], vector
        assert isinstance(vector["why"], str) and vector["why"], vector
        if "requirement" in vector:
            assert ID_PATTERN.match(vector["requirement"]), vector
            assert vector["requirement"] in load_catalog(), vector
        assert set(vector.get("requires", [])) <= {"loopback-receiver", "names"}, vector
        if vector["verdict"] == "accept":
            assert isinstance(vector["deliverable"], bool), vector
            assert vector["rule"] in ("public", "allowlist"), vector
        else:
            assert "deliverable" not in vector, vector


def test_address_vectors_name_the_requirement_of_their_range() -> None:
    """A vector decided by its address names what the address tables say of that address,
    so a vector is ranked exactly as its range (one decision, in the tables)."""
    for vector in VECTORS:
        if "requirement" not in vector or vector["verdict"] != "reject":
            continue
        if vector["rule"] in URL_RULES:
            continue  # decided by the URL's form, not by an address
        address = literal_address(_host_of(vector))
        if address is None:
            # A Unicode host that only IDNA mapping turns into an address: URL-FORM-06.
            assert not _host_of(vector).isascii() and vector["requirement"] == "URL-FORM-06"
            continue
        entry = deciding_range(address)
        expected = entry.requirement if entry is not None else None
        embedding = embedding_of(address) if isinstance(address, ipaddress.IPv6Address) else None
        if expected is None and embedding is not None:
            expected = embedding.requirement
        if expected == "URL-LOOP-01" and _host_of(vector) != str(address):
            expected = "URL-LOOP-03"  # a numeric spelling of loopback other than the quad
        assert vector["requirement"] == expected, vector


def test_vector_urls_are_unique() -> None:
    counts = Counter(expand(vector) for vector in VECTORS)
    assert [url for url, n in counts.items() if n > 1] == []


def test_reject_rules_are_known() -> None:
    table_rules = {
        row["rule"] for part in ("ipv4", "ipv6", "extra", "embeddings") for row in ADDRESSES[part]
    }
    unknown = {v["rule"] for v in VECTORS if v["verdict"] == "reject"} - URL_RULES - table_rules
    assert unknown == set()


def _host_of(vector: dict[str, Any]) -> str:
    match = re.match(r"^[a-zA-Z]+://(?:[^@/]*@)?(\[[^\]]*\]|[^:/?#]*)", expand(vector))
    return match.group(1).lower() if match else ""


def test_names_table_and_requires_agree() -> None:
    names = URLS["names"]
    for addresses in names.values():
        for address in addresses:
            ipaddress.ip_address(address)
    for vector in VECTORS:
        uses_names = _host_of(vector).rstrip(".").endswith(".vectors.genapi.test")
        assert uses_names == ("names" in vector.get("requires", [])), vector


def test_reject_vectors_aim_at_the_discard_port() -> None:
    """A vulnerable IUT would really dial a reject vector: each aims at the discard port."""
    for vector in VECTORS:
        if vector["verdict"] != "reject" or vector["rule"] == "port":
            continue
        raw = vector.get("url", vector.get("url_template", ""))
        authority = re.match(r"^[a-zA-Z]+://([^/?#]*)", raw)
        if authority is None:
            continue
        host_port = authority.group(1).rsplit("@", 1)[-1]
        port = re.search(r"(?:\]|^[^\[]*?):([^:]*)$", host_port)
        if port is not None and port.group(1) not in ("", "{receiver_port}"):
            assert port.group(1) == "9", vector


def test_deliverable_vectors_reach_only_the_receiver() -> None:
    """Accepted vectors either target the receiver or are marked never to be contacted."""
    names = URLS["names"]
    for vector in VECTORS:
        if vector["verdict"] != "accept":
            continue
        raw = vector.get("url", vector.get("url_template", ""))
        host = _host_of(vector).rstrip(".")
        if not vector["deliverable"]:
            assert not any(p in raw for p in PLACEHOLDERS), vector
            continue
        if "loopback-receiver" in vector.get("requires", []):
            # A spelling of 127.0.0.1 (or a name for it) at the receiver's port.
            assert "{receiver_port}" in raw, vector
            assert host not in names or names[host] == ["127.0.0.1"], vector
        else:
            elsewhere = expand(vector, receiver="http://receiver.placeholder.test:8765")
            assert _host_of({"url": elsewhere}) == "receiver.placeholder.test", vector


def test_url_vectors_cover_the_facts() -> None:
    rejected = {v["rule"] for v in VECTORS if v["verdict"] == "reject"}
    assert {
        "scheme", "length", "unresolvable", "loopback", "private-10/8", "private-172.16/12",
        "private-192.168/16", "link-local", "metadata", "unique-local", "unspecified",
        "this-network", "cgnat", "reserved", "multicast", "site-local", "ipv4-mapped",
        "ipv4-compatible", "siit", "nat64", "6to4", "teredo", "zone-id", "backslash",
        "characters", "host-missing",
    } <= rejected  # fmt: skip
    urls = {v.get("url") for v in VECTORS}
    assert {
        "http://169.254.169.254:9/latest/meta-data/",
        "http://[::ffff:169.254.169.254]:9/",
        "http://[fd00:ec2::254]:9/",
        "http://127.0.0.2:9\\@127.0.0.1:9/",
        "http://public@10.0.0.1:9/",
        "http://0.0.0.0:9/",
        "http://[::]:9/",
        "http://167772161:9/",
    } <= urls
    lengths = {(v["verdict"], len(expand(v))) for v in VECTORS if "url_template" in v}
    assert {("accept", 2048), ("reject", 2049)} <= lengths


def test_template_expansion_is_exact_for_any_receiver() -> None:
    for receiver in ("http://127.0.0.1:1", "https://hooks.tunnel.example:44321"):
        for vector in VECTORS:
            if "url_template" in vector:
                assert len(expand(vector, receiver)) == vector["length"]


# ---- signature_vectors.yaml -------------------------------------------------------------

SIGNATURE_VECTORS: list[dict[str, Any]] = SIGNATURES["vectors"]


def test_at_least_8_signature_vectors_of_every_kind() -> None:
    assert len(SIGNATURE_VECTORS) >= 8
    bodies = [vector["body"] for vector in SIGNATURE_VECTORS]
    assert any(vector["secret"].startswith("whsec_") for vector in SIGNATURE_VECTORS)
    assert any(body.endswith("\n") for body in bodies)
    assert any(not body.isascii() for body in bodies)
    assert any("\\/" in body for body in bodies)
    assert any("\t" in body or "\r\n" in body for body in bodies)
    assert len({vector["name"] for vector in SIGNATURE_VECTORS}) == len(SIGNATURE_VECTORS)


@pytest.mark.parametrize("vector", SIGNATURE_VECTORS, ids=[v["name"] for v in SIGNATURE_VECTORS])
def test_signature_vector_recomputes_with_python_hmac(vector: dict[str, Any]) -> None:
    body = vector["body"].encode("utf-8")
    assert hashlib.sha256(body).hexdigest() == vector["body_sha256"], "body not loaded exactly"
    signed = f"{vector['timestamp']}.".encode() + body
    digest = hmac.new(vector["secret"].encode("utf-8"), signed, hashlib.sha256).hexdigest()
    assert digest == vector["expected_digest"]
    assert vector["expected_header"] == f"t={vector['timestamp']},v1={digest}"


def test_alternative_keying_is_the_base64_decoded_secret() -> None:
    (vector,) = [v for v in SIGNATURE_VECTORS if "alternative_keyings" in v]
    alternative = vector["alternative_keyings"]["standard_webhooks_base64"]
    key = base64.b64decode(vector["secret"].removeprefix("whsec_"))
    assert key.hex() == alternative["key_hex"]
    signed = f"{vector['timestamp']}.{vector['body']}".encode()
    assert hmac.new(key, signed, hashlib.sha256).hexdigest() == alternative["digest"]
    assert alternative["digest"] != vector["expected_digest"]


@pytest.mark.skipif(
    shutil.which("openssl") is None or shutil.which("printf") is None,
    reason="openssl or printf not installed",
)
@pytest.mark.parametrize("vector", SIGNATURE_VECTORS, ids=[v["name"] for v in SIGNATURE_VECTORS])
def test_signature_vector_recomputes_with_openssl(vector: dict[str, Any]) -> None:
    """Re-run the recorded recipe: printf "<t>.<body_printf>" | openssl dgst -hmac."""
    printf, openssl = shutil.which("printf"), shutil.which("openssl")
    assert printf is not None and openssl is not None
    message = subprocess.run(  # noqa: S603 (fixed binaries, arguments from our fixture)
        [printf, f"{vector['timestamp']}.{vector['body_printf']}"],
        capture_output=True,
        check=True,
        timeout=10,
    ).stdout
    assert message == f"{vector['timestamp']}.{vector['body']}".encode()
    digest = subprocess.run(  # noqa: S603
        [openssl, "dgst", "-sha256", "-hmac", vector["secret"]],
        input=message,
        capture_output=True,
        check=True,
        timeout=10,
    ).stdout.decode()
    assert digest.split()[-1] == vector["expected_digest"]
