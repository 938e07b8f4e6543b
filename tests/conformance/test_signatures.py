"""The suite's signature verifier agrees with the OpenSSL-computed vectors, parses the
header strictly, verifies only the literal keying over the raw bytes, and names the
alternative keying behind a mismatch without ever showing a secret."""

from __future__ import annotations

import base64
import hashlib
import hmac
import inspect
import json
from typing import Any

import pytest

import genapi_spec
from conformance import signatures
from conformance.secrets import Secret
from conformance.signatures import (
    ParsedSignature,
    SignatureFormatError,
    parse_signature_header,
    signature_digest,
    verify_signature,
)

VECTORS: list[dict[str, Any]] = genapi_spec.load_fixture("signature_vectors.yaml")["vectors"]


def _body(vector: dict[str, Any]) -> bytes:
    body = str(vector["body"]).encode("utf-8")
    assert hashlib.sha256(body).hexdigest() == vector["body_sha256"], "vector loaded wrongly"
    return body


def _sign(key: bytes, timestamp: int, body: bytes) -> str:
    return hmac.new(key, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


@pytest.fixture(params=VECTORS, ids=[v["name"] for v in VECTORS])
def vector(request: pytest.FixtureRequest) -> dict[str, Any]:
    chosen: dict[str, Any] = request.param
    return chosen


# -- the vectors -----------------------------------------------------------------------


def test_digest_equals_vector(vector: dict[str, Any]) -> None:
    digest = signature_digest(vector["secret"], vector["timestamp"], _body(vector))
    assert digest == vector["expected_digest"]


def test_expected_header_verifies(vector: dict[str, Any]) -> None:
    result = verify_signature(vector["expected_header"], _body(vector), Secret(vector["secret"]))
    assert result.ok, result.message
    assert result.parsed == ParsedSignature(str(vector["timestamp"]), vector["expected_digest"])
    assert result.message == "the signature verifies"


def test_expected_header_parses(vector: dict[str, Any]) -> None:
    parsed = parse_signature_header(vector["expected_header"])
    assert parsed.timestamp == vector["timestamp"]
    assert parsed.digest_hex == vector["expected_digest"]
    assert parsed.lowercase


def test_one_byte_changed_does_not_verify(vector: dict[str, Any]) -> None:
    body = _body(vector) + b" "
    assert not verify_signature(vector["expected_header"], body, vector["secret"]).ok


def test_other_timestamp_does_not_verify(vector: dict[str, Any]) -> None:
    header = f"t={vector['timestamp'] + 1},v1={vector['expected_digest']}"
    assert not verify_signature(header, _body(vector), vector["secret"]).ok


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("pretty-printed", "no-trailing-newline"),
        ("trailing-newline", "no-trailing-newline"),
        ("key-order-swapped", "no-trailing-newline"),
        ("unicode-raw", "unicode-escaped"),
        ("slashes-escaped", "slashes-plain"),
    ],
)
def test_json_equal_bodies_do_not_share_a_signature(first: str, second: str) -> None:
    """Re-serializing (spacing, key order, escaping, newline) changes what verifies."""
    by_name = {v["name"]: v for v in VECTORS}
    one, other = by_name[first], by_name[second]
    assert json.loads(_body(one)) == json.loads(_body(other))
    assert _body(one) != _body(other)
    header = f"t={other['timestamp']},v1={one['expected_digest']}"
    assert not verify_signature(header, _body(other), other["secret"]).ok


def test_standard_webhooks_keying_is_diagnosed_by_name() -> None:
    vector = next(v for v in VECTORS if "alternative_keyings" in v)
    alternative = vector["alternative_keyings"]["standard_webhooks_base64"]
    header = f"t={vector['timestamp']},v1={alternative['digest']}"
    result = verify_signature(
        header, _body(vector), Secret(vector["secret"]), label="the whsec_ secret"
    )
    assert not result.ok
    assert result.explanation is not None
    assert "base64-decoded" in result.explanation
    assert "Standard Webhooks" in result.explanation
    assert "the whsec_ secret" in result.message


# -- strict parsing --------------------------------------------------------------------

DIGEST = "ab" * 32


@pytest.mark.parametrize(
    ("header", "says"),
    [
        pytest.param("", "empty", id="empty"),
        pytest.param(f"t=1, v1={DIGEST}", "whitespace", id="space-after-comma"),
        pytest.param(f"t = 1,v1={DIGEST}", "whitespace", id="space-around-equals"),
        pytest.param(f"v1={DIGEST},t=1", "order v1, t", id="reversed"),
        pytest.param(f"t=1,v1={DIGEST},v1={DIGEST}", "several v1", id="two-v1"),
        pytest.param(f"t=1,v0={DIGEST}", "expected an element v1", id="v0"),
        pytest.param(f"t=1;v1={DIGEST}", "1 comma-separated", id="semicolon"),
        pytest.param(f"ts=1,v1={DIGEST}", "expected an element t", id="ts"),
        pytest.param(f"t=-1,v1={DIGEST}", "decimal digits", id="negative-t"),
        pytest.param(f"t=1.5,v1={DIGEST}", "decimal digits", id="fractional-t"),
        pytest.param(f"t=,v1={DIGEST}", "decimal digits", id="empty-t"),
        pytest.param("t=1,v1=" + "ab" * 31, "62 hex digits", id="short-digest"),
        pytest.param("t=1,v1=" + "ab" * 33, "66 hex digits", id="long-digest"),
        pytest.param("t=1,v1=" + "zz" * 32, "not hexadecimal", id="not-hex"),
        pytest.param(
            "t=1,v1=" + base64.b64encode(b"\xfb" * 32).decode(), "base64", id="base64-digest"
        ),
        pytest.param(f"t=\u0661,v1={DIGEST}", "non-ASCII", id="arabic-digit"),
        pytest.param(f"t=1,v1={DIGEST},", "3 comma-separated", id="trailing-comma"),
        pytest.param("t=1", "1 comma-separated", id="no-v1"),
    ],
)
def test_malformed_header_is_refused_precisely(header: str, says: str) -> None:
    with pytest.raises(SignatureFormatError) as caught:
        parse_signature_header(header)
    assert says in str(caught.value)
    result = verify_signature(header, b"{}", "s3cr3t-value")
    assert not result.ok
    assert result.problem is not None and says in result.problem


def test_missing_header_is_named() -> None:
    result = verify_signature(None, b"{}", "s3cr3t-value")
    assert not result.ok
    assert "no X-Service-Signature header" in result.message


def test_uppercase_hex_verifies_and_is_flagged() -> None:
    vector = VECTORS[0]
    header = f"t={vector['timestamp']},v1={vector['expected_digest'].upper()}"
    result = verify_signature(header, _body(vector), vector["secret"])
    assert result.ok
    assert result.parsed is not None and not result.parsed.lowercase


# -- diagnosis of wrong keyings ----------------------------------------------------------

SECRET = "whsec_c2VjcmV0LWtleS1mb3ItdGVzdHMtb25seQ=="
BODY = b'{"id":"evt_1","event":"generation.completed","data":{"note":"caf\\u00e9"}}'
T = 1767225600


@pytest.mark.parametrize(
    ("key", "body", "names"),
    [
        pytest.param(
            SECRET.removeprefix("whsec_").encode(),
            BODY,
            "without its whsec_ prefix",
            id="no-prefix",
        ),
        pytest.param(
            SECRET.encode(),
            json.dumps(json.loads(BODY)).encode(),
            "re-serialized JSON body (json.dumps defaults)",
            id="reserialized",
        ),
        pytest.param(
            SECRET.encode(),
            json.dumps(json.loads(BODY), ensure_ascii=False, separators=(",", ":")).encode(),
            "non-ASCII unescaped",
            id="unescaped",
        ),
        pytest.param(
            SECRET.encode(), BODY + b"\n", "the body with a trailing newline", id="newline"
        ),
    ],
)
def test_alternative_is_named(key: bytes, body: bytes, names: str) -> None:
    header = f"t={T},v1={_sign(key, T, body)}"
    result = verify_signature(header, BODY, Secret(SECRET), label="the whsec_ secret")
    assert not result.ok
    assert result.explanation is not None and names in result.explanation, result.message


@pytest.mark.parametrize(
    ("secret", "encode"),
    [
        pytest.param("whsec_" + "A-_z" * 8, base64.urlsafe_b64decode, id="whsec-urlsafe"),
        pytest.param("c2VjcmV0LWtleS1mb3ItdGVzdHM", base64.b64decode, id="unprefixed-unpadded"),
    ],
)
def test_base64_keying_is_named_in_either_alphabet(secret: str, encode: Any) -> None:
    rest = secret.removeprefix("whsec_")
    key = encode(rest + "=" * (-len(rest) % 4))
    result = verify_signature(f"t={T},v1={_sign(key, T, BODY)}", BODY, secret)
    assert not result.ok
    assert result.explanation is not None and "base64-decoded" in result.explanation


def test_body_without_timestamp_is_named() -> None:
    digest = hmac.new(SECRET.encode(), BODY, hashlib.sha256).hexdigest()
    result = verify_signature(f"t={T},v1={digest}", BODY, SECRET)
    assert result.explanation is not None
    assert "without the timestamp" in result.explanation


def test_another_keys_secret_is_named() -> None:
    other = "k3y_0000111122223333444455556666"
    header = f"t={T},v1={_sign(other.encode(), T, BODY)}"
    result = verify_signature(
        header,
        BODY,
        Secret(SECRET),
        label="the per-key secret of role 'primary'",
        others={"the per-key secret of role 'foreign'": Secret(other)},
    )
    assert not result.ok
    assert result.explanation == "a signature with the per-key secret of role 'foreign'"


def test_unexplained_mismatch_has_no_explanation() -> None:
    header = f"t={T},v1={_sign(b'something else entirely', T, BODY)}"
    result = verify_signature(header, BODY, SECRET)
    assert not result.ok
    assert result.explanation is None
    assert result.message.startswith("the signature does not verify with the webhook secret")


def test_alternatives_never_pass() -> None:
    """A digest that only an alternative keying reproduces is still a failure."""
    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    header = f"t={T},v1={_sign(key, T, BODY)}"
    assert not verify_signature(header, BODY, SECRET).ok


def test_messages_never_show_a_secret() -> None:
    other = "k3y_9999888877776666555544443333"
    for key in (SECRET.encode(), other.encode(), b"unrelated"):
        header = f"t={T},v1={_sign(key, T, BODY + b'x')}"
        result = verify_signature(header, BODY, Secret(SECRET), others={"other": Secret(other)})
        for value in (SECRET, SECRET.removeprefix("whsec_"), other):
            assert value not in result.message
            assert value not in repr(result)


def test_comparison_is_constant_time() -> None:
    """The digests are compared with hmac.compare_digest, never with == (spec §6 Sig. 3)."""
    source = inspect.getsource(signatures.verify_signature)
    assert "hmac.compare_digest" in source
    assert "==" not in source.split('"""')[-1].replace("!=", "")
