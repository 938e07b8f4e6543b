"""Secrets never show themselves, and the redactor masks them in every form they travel."""

from __future__ import annotations

import base64
import json
import logging
import pickle
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.secrets import MASK_PATTERN, Redactor, Secret, mask_for

CANARY = "gk_CANARY0secret0value0123456789"
OTHER = "whsec_CANARYsigning0secret0abcdef"


def test_secret_str_repr_format_hide_the_value() -> None:
    secret = Secret(CANARY)
    shown = [str(secret), repr(secret), f"{secret}", f"{secret!r}", f"{secret:>40}", "%s" % secret]  # noqa: UP031 (the old operator too)
    for text in shown:
        assert CANARY not in text
    assert str(secret) == "***"
    assert secret.reveal() == CANARY


def test_secret_in_containers_and_exceptions_is_hidden() -> None:
    secret = Secret(CANARY)
    assert CANARY not in repr({"key": secret, "list": [secret]})
    with pytest.raises(ValueError) as caught:
        raise ValueError(f"bad key {secret}", secret)
    assert CANARY not in str(caught.value)
    assert CANARY not in repr(caught.value)


def test_secret_equality_is_by_value_and_not_with_plain_strings() -> None:
    assert Secret(CANARY) == Secret(CANARY)
    assert Secret(CANARY) != Secret(OTHER)
    assert Secret(CANARY) != CANARY
    assert len({Secret(CANARY), Secret(CANARY)}) == 1


def test_secret_refuses_pickling_and_non_strings() -> None:
    with pytest.raises(TypeError):
        pickle.dumps(Secret(CANARY))
    with pytest.raises(TypeError):
        Secret(b"bytes")  # type: ignore[arg-type]


def test_secret_in_logging_output_is_hidden(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        logging.getLogger("test").info("using key %s (%r)", Secret(CANARY), Secret(CANARY))
    assert caplog.records
    assert CANARY not in caplog.text


@pytest.fixture
def redactor() -> Redactor:
    return Redactor({"keys.primary.key": Secret(CANARY), "keys.primary.signing_secret": OTHER})


@pytest.mark.parametrize(
    ("form", "label"),
    [
        pytest.param(CANARY, "keys.primary.key", id="plain"),
        pytest.param(f"Bearer {CANARY}", "keys.primary.key", id="bearer-header"),
        pytest.param(quote(CANARY + "+/ ", safe=""), "keys.primary.key", id="url-encoded"),
        pytest.param(OTHER, "keys.primary.signing_secret", id="second-secret"),
    ],
)
def test_redactor_masks_text_forms(redactor: Redactor, form: str, label: str) -> None:
    masked = redactor.text(f"before {form} after")
    assert CANARY not in masked and OTHER not in masked
    assert mask_for(label) in masked
    assert masked.startswith("before ") and masked.endswith(" after")


@pytest.mark.parametrize("prefix", ["", "u", "us", "user:", "Bearer "])
@pytest.mark.parametrize("urlsafe", [False, True], ids=["std", "urlsafe"])
def test_redactor_masks_base64_at_every_alignment(
    redactor: Redactor, prefix: str, urlsafe: bool
) -> None:
    raw = (prefix + CANARY + "?>~").encode()
    encoded = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(raw).decode()
    masked = redactor.text(f"Authorization: Basic {encoded}")
    assert MASK_PATTERN.search(masked)
    # Whatever is left cannot be decoded back to the secret.
    for token in masked.split():
        try:
            decoded = base64.b64decode(token + "==", altchars=b"-_" if urlsafe else None)
        except ValueError:
            continue
        assert CANARY.encode() not in decoded


def test_redactor_masks_bytes_headers_and_json(redactor: Redactor) -> None:
    assert CANARY.encode() not in redactor.bytes(b"\xff\x00" + CANARY.encode() + b"\xfe")
    headers = redactor.headers([("Authorization", f"Bearer {CANARY}"), ("X-Other", "plain")])
    assert headers == [
        ("Authorization", "Bearer [redacted:keys.primary.key]"),
        ("X-Other", "plain"),
    ]
    document = {"nested": [{"value": f"x{CANARY}y"}], CANARY: 1, "n": 3}
    masked = redactor.json(document)
    assert CANARY not in json.dumps(masked)
    assert masked["n"] == 3


def test_redactor_learns_secrets_from_sensitive_json_members(redactor: Redactor) -> None:
    new_key = "gk_NEWLYcreated0key0shown0once"
    masked = redactor.json({"id": "key_1", "key": new_key, "secret": "s3cr3t-value"})
    assert masked["id"] == "key_1"
    assert new_key not in json.dumps(masked)
    assert redactor.knows(new_key)
    assert new_key not in redactor.text(f"later use: Bearer {new_key}")


def test_redactor_masks_secret_shapes_it_was_never_told() -> None:
    redactor = Redactor({}, key_prefix="gk")
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwcmltYXJ5In0.c2lnbmF0dXJlLXZhbHVl"
    text = f"a gk_unknownKey12345 b whsec_unknownSecret99 c {jwt} d key_123"
    masked = redactor.text(text)
    for leaked in ("gk_unknownKey12345", "whsec_unknownSecret99", jwt):
        assert leaked not in masked
    assert "key_123" in masked  # ids are not secrets


def test_redactor_longer_secret_containing_shorter_is_masked_whole() -> None:
    redactor = Redactor({"short": "abcdef123456", "long": "abcdef123456-and-more"})
    assert redactor.text("abcdef123456-and-more") == mask_for("long")


def test_redactor_repr_hides_values(redactor: Redactor) -> None:
    assert CANARY not in repr(redactor)
    assert repr(redactor) == "Redactor(2 secrets)"


def test_redactor_masks_url_encoded_forms_of_special_characters() -> None:
    special = "p@ss w/rd+key=1&x"
    redactor = Redactor({"sessions.primary.password": special})
    for form in (quote(special, safe=""), special.replace(" ", "+").replace("@", "%40")):
        if form == special.replace(" ", "+").replace("@", "%40"):
            form = quote(special, safe="").replace("%20", "+")  # form encoding
        masked = redactor.text(f"password={form}&next=1")
        assert "w%2Frd" not in masked and "ss w/rd" not in masked, masked
        assert masked.endswith("&next=1")


_SECRET_CHARS = st.characters(min_codepoint=33, max_codepoint=126)


@given(
    secret=st.text(_SECRET_CHARS, min_size=12, max_size=40),
    before=st.text(max_size=30),
    after=st.text(max_size=30),
)
def test_redactor_never_lets_a_secret_through(secret: str, before: str, after: str) -> None:
    redactor = Redactor({"keys.any.key": Secret(secret)})
    for form in (secret, quote(secret, safe=""), f"Bearer {secret}"):
        assert secret not in redactor.text(before + form + after)
    raw = (before + secret + after).encode()
    for encoded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
        masked = redactor.bytes(encoded)
        assert MASK_PATTERN.search(masked.decode()), "the base64 form went through unmasked"


def test_short_values_under_sensitive_members_are_masked_but_not_learned() -> None:
    redactor = Redactor({})
    masked = redactor.json({"key": "a", "token": ""})
    assert masked == {"key": "[redacted:learned.key]", "token": ""}
    assert not redactor.knows("a")
    assert redactor.text("a banana") == "a banana"
