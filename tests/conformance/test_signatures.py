"""The suite's signature verifier agrees with the OpenSSL-computed vectors, parses the
header strictly, verifies only the declared keying (utf8 by default) over the raw bytes,
diagnoses the other keying by name with the profile setting that declares it, and names
the alternative behind a mismatch without ever showing a secret."""

from __future__ import annotations

import base64
import hashlib
import hmac
import inspect
import json
from typing import Any

import httpx
import pytest

import genapi_spec
from conformance.observe import signatures
from conformance.observe.receiver import Delivery
from conformance.observe.signatures import (
    ParsedSignature,
    SignatureFormatError,
    hmac_key,
    parse_signature_header,
    resigning,
    signature_digest,
    verify_delivery,
    verify_signature,
)
from conformance.secrets import Secret
from conformance.target.wire import WireProfile

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
    assert result.keying_found == "base64-after-prefix"
    assert "the whsec_ secret" in result.message
    assert "signed with the base64-decoded secret" in result.message
    assert "Standard Webhooks" in result.message
    assert (
        'the profile declares utf8: set [wire] secret_keying = "base64-after-prefix" if '
        "that is the deployment's choice" in result.message
    )


# -- the declared keying -----------------------------------------------------------------

BASE64 = WireProfile(secret_keying="base64-after-prefix")
KEYED_VECTORS = [v for v in VECTORS if "alternative_keyings" in v]


@pytest.mark.parametrize("vector", KEYED_VECTORS, ids=[v["name"] for v in KEYED_VECTORS])
def test_base64_keying_gives_the_vectors_key(vector: dict[str, Any]) -> None:
    """The OpenSSL-computed key of the Standard Webhooks keying is hmac_key's."""
    alternative = vector["alternative_keyings"]["standard_webhooks_base64"]
    key = hmac_key(Secret(vector["secret"]), "base64-after-prefix")
    assert key is not None and key.hex() == alternative["key_hex"]
    digest = signature_digest(
        vector["secret"], vector["timestamp"], _body(vector), "base64-after-prefix"
    )
    assert digest == alternative["digest"]


@pytest.mark.parametrize("vector", KEYED_VECTORS, ids=[v["name"] for v in KEYED_VECTORS])
def test_declared_base64_keying_decides(vector: dict[str, Any]) -> None:
    """Declared base64-after-prefix: its digest verifies, the utf8 one is diagnosed."""
    alternative = vector["alternative_keyings"]["standard_webhooks_base64"]
    base64_header = f"t={vector['timestamp']},v1={alternative['digest']}"
    passed = verify_signature(base64_header, _body(vector), Secret(vector["secret"]), wire=BASE64)
    assert passed.ok, passed.message
    literal = verify_signature(
        vector["expected_header"], _body(vector), Secret(vector["secret"]), wire=BASE64
    )
    assert not literal.ok
    assert literal.keying_found == "utf8"
    assert "signed with the secret string's UTF-8 bytes (its prefix included)" in literal.message
    assert 'the profile declares base64-after-prefix: set [wire] secret_keying = "utf8"' in (
        literal.message
    )


def test_per_key_secret_keyed_after_its_prefix() -> None:
    """A per-key secret with another prefix: base64-after-prefix decodes what follows it."""
    vector = next(v for v in VECTORS if v["secret"].startswith("k3y_"))
    rest = vector["secret"].removeprefix("k3y_")
    key = base64.b64decode(rest + "=" * (-len(rest) % 4))
    header = f"t={vector['timestamp']},v1={_sign(key, vector['timestamp'], _body(vector))}"
    assert verify_signature(header, _body(vector), vector["secret"], wire=BASE64).ok
    diagnosed = verify_signature(header, _body(vector), vector["secret"], label="the key's")
    assert diagnosed.keying_found == "base64-after-prefix"
    assert "the key's keyed as declared (utf8)" in diagnosed.message
    assert "signed with the base64-decoded secret" in diagnosed.message


def test_unprefixed_secret_is_decoded_whole() -> None:
    secret = "c2VjcmV0LWtleS1mb3ItdGVzdHMtb25seQ"
    assert hmac_key(secret, "base64-after-prefix") == b"secret-key-for-tests-only"
    assert hmac_key(secret, "utf8") == secret.encode()


def test_secret_that_is_not_base64_cannot_be_keyed_so() -> None:
    """Declared base64-after-prefix on a secret that is not base64: said plainly, and the
    utf8 signature it carries is diagnosed."""
    vector = next(v for v in VECTORS if not v["secret"].isascii())
    assert hmac_key(vector["secret"], "base64-after-prefix") is None
    with pytest.raises(ValueError, match="not base64"):
        signature_digest(vector["secret"], 1, b"{}", "base64-after-prefix")
    result = verify_signature(
        vector["expected_header"], _body(vector), vector["secret"], wire=BASE64
    )
    assert not result.ok
    assert result.problem is not None and "cannot key the HMAC" in result.problem
    assert result.keying_found == "utf8"


def test_other_keying_is_tried_before_other_alternatives() -> None:
    """A digest of the other keying over a re-serialized body is still named."""
    body = json.dumps(json.loads(BODY)).encode()
    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    result = verify_signature(f"t={T},v1={_sign(key, T, body)}", BODY, SECRET)
    assert result.keying_found is None
    assert result.explanation is not None
    assert "base64-decoded" in result.explanation and "re-serialized" in result.explanation


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


ACME = WireProfile(header_brand="Acme")


def test_header_is_named_with_the_declared_brand_word() -> None:
    assert "no X-Acme-Signature header" in verify_signature(None, b"{}", "s", wire=ACME).message
    malformed = verify_signature("t=1", b"{}", "s", wire=ACME)
    assert malformed.message.startswith("malformed X-Acme-Signature: ")
    with pytest.raises(SignatureFormatError, match="no X-Acme-Signature header"):
        parse_signature_header(None, ACME)


def _delivery(headers: dict[str, str], wire: WireProfile) -> Delivery:
    return Delivery(
        raw_body=BODY,
        headers=httpx.Headers(headers),
        arrived_at=0.0,
        path="/hooks/x",
        method="POST",
        wire=wire,
    )


def test_verify_delivery_reads_the_declared_header_and_keying() -> None:
    """A delivery is verified by its wire: the X-Acme-Signature header, the Acme keying."""
    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    header = f"t={T},v1={_sign(key, T, BODY)}"
    acme_base64 = WireProfile(header_brand="Acme", secret_keying="base64-after-prefix")
    assert verify_delivery(_delivery({"X-Acme-Signature": header}, acme_base64), SECRET).ok
    neutral = verify_delivery(_delivery({"X-Service-Signature": header}, acme_base64), SECRET)
    assert "no X-Acme-Signature header" in neutral.message
    literal = verify_delivery(_delivery({"x-acme-signature": header}, ACME), SECRET)
    assert literal.keying_found == "base64-after-prefix"


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
    header = f"t={T},v1={_sign(key, T, BODY)}"
    result = verify_signature(header, BODY, secret)
    assert not result.ok
    assert result.keying_found == "base64-after-prefix"
    assert "signed with the base64-decoded secret" in result.message
    assert verify_signature(header, BODY, secret, wire=BASE64).ok


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
    """A digest that only an alternative keying reproduces is still a failure, whichever
    keying is declared."""
    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    header = f"t={T},v1={_sign(key, T, BODY)}"
    assert not verify_signature(header, BODY, SECRET).ok
    literal = f"t={T},v1={_sign(SECRET.encode(), T, BODY)}"
    assert not verify_signature(literal, BODY, SECRET, wire=BASE64).ok
    unprefixed = f"t={T},v1={_sign(SECRET.removeprefix('whsec_').encode(), T, BODY)}"
    assert not verify_signature(unprefixed, BODY, SECRET, wire=BASE64).ok


def test_messages_never_show_a_secret() -> None:
    other = "k3y_9999888877776666555544443333"
    decoded = base64.b64decode(SECRET.removeprefix("whsec_"))
    for key in (SECRET.encode(), other.encode(), b"unrelated", decoded):
        for body in (BODY, BODY + b"x"):
            header = f"t={T},v1={_sign(key, T, body)}"
            for wire in (WireProfile(), BASE64):
                result = verify_signature(
                    header, BODY, Secret(SECRET), wire=wire, others={"other": Secret(other)}
                )
                for value in (SECRET, SECRET.removeprefix("whsec_"), other, decoded.decode()):
                    assert value not in result.message
                    assert value not in repr(result)


def test_comparison_is_constant_time() -> None:
    """The digests are compared with hmac.compare_digest, never with == (spec §6 Sig. 3)."""
    source = inspect.getsource(signatures.verify_signature)
    assert "hmac.compare_digest" in source
    assert "==" not in source.split('"""')[-1].replace("!=", "")


def test_resigning_is_afresh_when_t_moves_with_the_arrivals() -> None:
    signed_at = parse_signature_header(f"t=1000,v1={'a' * 64}")
    three_later = parse_signature_header(f"t=1003,v1={'a' * 64}")
    assert resigning((50.0, signed_at), (53.4, three_later), tolerance_s=0.2).afresh
    stale = resigning((50.0, signed_at), (53.4, signed_at), tolerance_s=0.2)
    assert (stale.afresh, stale.moved, stale.slack) == (False, 0, 1.2)
    assert stale.gap == pytest.approx(3.4)
