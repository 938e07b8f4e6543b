"""The X-Service-Signature construction (spec §6 "Signature")."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import pytest

import genapi_spec
from reference.webhooks.signing import parse_signature_header, signature_digest, signature_header


def test_digest_is_hmac_sha256_of_timestamp_dot_raw_body() -> None:
    body = b'{"id":"evt_1","event":"generation.completed"}'
    expected = hmac.new(b"whsec_abc", b"1700000000." + body, hashlib.sha256).hexdigest()
    assert signature_digest("whsec_abc", 1700000000, body) == expected


def test_key_is_literal_secret_including_prefix() -> None:
    """The whsec_ prefix is part of the key (not stripped, not base64-decoded)."""
    body = b"{}"
    with_prefix = signature_digest("whsec_abc", 1, body)
    assert with_prefix != hmac.new(b"abc", b"1." + body, hashlib.sha256).hexdigest()


def test_header_form_and_parse_round_trip() -> None:
    header = signature_header("s3cret", 1785585600, b"{}")
    assert header.startswith("t=1785585600,v1=")
    timestamp, digests = parse_signature_header(header)
    assert timestamp == 1785585600
    assert digests == [signature_digest("s3cret", 1785585600, b"{}")]
    assert len(digests[0]) == 64 and digests[0] == digests[0].lower()


def test_reserialized_body_gives_another_digest() -> None:
    assert signature_digest("k", 1, b'{"a":1}') != signature_digest("k", 1, b'{"a": 1}')


@pytest.mark.parametrize("value", ["", "t=1", "v1=ab", "t=x,v1=ab", "garbage"])
def test_parse_rejects_malformed_headers(value: str) -> None:
    with pytest.raises(ValueError):
        parse_signature_header(value)


VECTORS: list[dict[str, Any]] = genapi_spec.load_fixture("signature_vectors.yaml")["vectors"]


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_signature_vectors(vector: dict[str, Any]) -> None:
    """The reference signs exactly as the independently computed vectors say."""
    body = vector["body"].encode("utf-8")
    assert hashlib.sha256(body).hexdigest() == vector["body_sha256"]  # loaded byte for byte
    assert (
        signature_digest(vector["secret"], vector["timestamp"], body) == vector["expected_digest"]
    )
    assert (
        signature_header(vector["secret"], vector["timestamp"], body) == vector["expected_header"]
    )
