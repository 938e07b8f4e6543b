"""The public webhook verification helper and ``genapi-conformance verify-signature``."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from conformance.observe.signatures import signature_digest
from conformance.run.cli import main
from conformance.webhooks import DeliveryDeduper, delivery_id_of, verify_webhook

SECRET = "whsec_" + base64.b64encode(b"0123456789abcdef0123456789abcdef").decode()
NOW = 1_760_000_000
BODY = json.dumps(
    {"id": "dlv_1", "type": "generation.completed", "data": {"prompt": "café"}}
).encode()


def _headers(body: bytes = BODY, t: int = NOW, secret: str = SECRET, **kw: str) -> dict[str, str]:
    digest = signature_digest(secret, t, body, kw.pop("keying", "utf8"))  # type: ignore[arg-type]
    return {"x-service-signature": f"t={t},v1={digest}", "X-Service-Delivery": "dlv_1", **kw}


def test_a_signed_delivery_is_valid_and_its_duplicate_is_marked() -> None:
    seen = DeliveryDeduper()
    first = verify_webhook(BODY, _headers(), SECRET, now=NOW + 3, seen=seen)
    again = verify_webhook(BODY, _headers(t=NOW + 2), SECRET, now=NOW + 3, seen=seen)
    assert first.valid and not first.duplicate and first.delivery_id == "dlv_1"
    assert again.valid and again.duplicate


def test_a_tampered_body_is_invalid_and_not_noted_as_seen() -> None:
    seen = DeliveryDeduper()
    tampered = BODY.replace(b"completed", b"failed")
    result = verify_webhook(tampered, _headers(), SECRET, now=NOW, seen=seen)
    assert not result.valid and result.reason and "does not verify" in result.reason
    # The genuine delivery, arriving after the forged copy, is not taken for a duplicate.
    assert not verify_webhook(BODY, _headers(), SECRET, now=NOW, seen=seen).duplicate


def test_a_wrong_secret_is_invalid_without_showing_either_secret() -> None:
    other = "whsec_" + "A" * 43
    result = verify_webhook(BODY, _headers(secret=other), SECRET, now=NOW)
    assert not result.valid and result.reason
    assert SECRET not in result.reason and other not in result.reason
    named = verify_webhook(BODY, _headers(secret=other), SECRET, now=NOW, others={"key 2": other})
    assert named.reason and "key 2" in named.reason


def test_a_reserialised_body_is_named() -> None:
    signed = json.dumps(json.loads(BODY), separators=(",", ":")).encode()
    result = verify_webhook(BODY, _headers(body=signed), SECRET, now=NOW)
    assert not result.valid and result.reason and "re-serialized" in result.reason


def test_the_other_keying_is_named_and_the_declared_one_decides() -> None:
    headers = _headers(keying="base64-after-prefix")
    result = verify_webhook(BODY, headers, SECRET, now=NOW)
    assert not result.valid and result.reason and "base64-after-prefix" in result.reason
    assert verify_webhook(BODY, headers, SECRET, now=NOW, keying="base64-after-prefix").valid


def test_stale_and_millisecond_timestamps() -> None:
    stale = verify_webhook(BODY, _headers(), SECRET, now=NOW + 301)
    assert not stale.valid and stale.reason and stale.reason.startswith("stale timestamp")
    assert verify_webhook(BODY, _headers(), SECRET, now=NOW + 301, tolerance_s=None).valid
    millis = verify_webhook(BODY, _headers(t=NOW * 1000), SECRET, now=NOW)
    assert not millis.valid and millis.reason and "milliseconds" in millis.reason


def test_each_failure_reason_says_precisely_what_is_wrong() -> None:
    headers = _headers()
    missing = verify_webhook(BODY, {"X-Service-Delivery": "dlv_1"}, SECRET, now=NOW)
    assert missing.reason == "missing header: the delivery has no X-Service-Signature header"
    branded = verify_webhook(BODY, {"X-Acme-Signature": headers["x-service-signature"]}, SECRET)
    assert branded.reason and "no X-Service-Signature" in branded.reason
    assert "X-Acme-Signature: pass brand='Acme'" in branded.reason
    text_t = verify_webhook(BODY, {"X-Service-Signature": "t=soon,v1=" + "0" * 64}, SECRET)
    assert text_t.reason and "t is 'soon', expected a unix timestamp" in text_t.reason
    stale = verify_webhook(BODY, headers, SECRET, now=NOW + 400)
    assert stale.reason == (
        "stale timestamp: t is 400 s old, 100 s beyond the 300 s tolerance "
        "(a replay, or a delivery checked late)"
    )
    future = verify_webhook(BODY, headers, SECRET, now=NOW - 360, tolerance_s=60)
    assert future.reason and future.reason.startswith(
        "timestamp in the future: t is 360 s ahead, 300 s beyond the 60 s tolerance"
    )
    tampered = verify_webhook(BODY + b"\n", headers, SECRET, now=NOW)
    assert tampered.reason and tampered.reason.startswith("the signature does not verify")


def test_a_millisecond_t_is_a_warning_even_when_the_signature_is_valid() -> None:
    millis = _headers(t=NOW * 1000)
    valid = verify_webhook(BODY, millis, SECRET, now=NOW, tolerance_s=None)
    assert valid.valid and valid.reason is None
    assert valid.warnings == (
        f"t={NOW * 1000} looks like milliseconds; the spec's t is unix seconds",
    )
    assert verify_webhook(BODY, _headers(), SECRET, now=NOW).warnings == ()


def test_delivery_id_of_reads_the_branded_header_in_any_case() -> None:
    assert delivery_id_of({"x-service-delivery": "dlv_1"}) == "dlv_1"
    assert delivery_id_of({"X-Acme-Delivery": " dlv_2 "}, brand="Acme") == "dlv_2"
    assert delivery_id_of({"X-Acme-Delivery": "dlv_2"}) is None
    assert delivery_id_of({"X-Service-Delivery": " "}) is None
    seen = DeliveryDeduper()
    assert not seen.seen_delivery({"X-Acme-Delivery": "dlv_3"}, brand="Acme")
    assert seen.seen_delivery({"x-acme-delivery": "dlv_3"}, brand="Acme")
    # Without an id, a delivery is never taken for a duplicate.
    assert not seen.seen_delivery({}) and not seen.seen_delivery({})


def test_the_deduper_is_bounded() -> None:
    seen = DeliveryDeduper(capacity=2)
    assert [seen.seen_before(i) for i in ("a", "b", "a", "c", "b")] == [
        False,
        False,
        True,
        False,
        False,  # forgotten: "b" was the oldest once "c" came
    ]


def test_the_command_says_valid_or_why_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    body = tmp_path / "body.json"
    body.write_bytes(BODY)
    monkeypatch.setenv("GENAPI_WEBHOOK_SECRET", SECRET)
    signature = _headers()["x-service-signature"]
    assert main(["verify-signature", str(body), "--signature", signature]) == 0
    assert capsys.readouterr().out.startswith("valid")
    header = f"X-Acme-Signature: {signature}"
    args = ["verify-signature", str(body), "--header", header, "--brand", "Acme"]
    assert main([*args, "--tolerance", "300", "--now", str(NOW + 10)]) == 0
    assert main([*args, "--tolerance", "300", "--now", str(NOW + 1000)]) == 1
    assert "stale timestamp" in capsys.readouterr().out
    body.write_bytes(BODY + b" ")
    assert main(args) == 1
    out = capsys.readouterr().out
    assert out.startswith("invalid:") and SECRET not in out


def test_the_command_wants_a_secret_and_well_formed_headers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = tmp_path / "body.json"
    body.write_bytes(BODY)
    monkeypatch.delenv("GENAPI_WEBHOOK_SECRET", raising=False)
    assert main(["verify-signature", str(body), "--signature", "t=1,v1=00"]) == 2
    secret = tmp_path / "secret"
    secret.write_text(SECRET + "\n")
    assert main(["verify-signature", str(body), "--secret-file", str(secret), "--header", "x"]) == 2
    signature = _headers()["x-service-signature"]
    assert (
        main(
            ["verify-signature", str(body), "--secret-file", str(secret), "--signature", signature]
        )
        == 0
    )


def test_the_command_reads_the_secret_of_a_profile_key_role(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    body = tmp_path / "body.json"
    body.write_bytes(BODY)
    profile = tmp_path / "target.toml"
    profile.write_text(
        'name = "t"\nbase_url = "http://127.0.0.1:9"\nkey_prefix = "gk"\nadapter = "none"\n'
        '[keys.primary]\nkey = "gk_bareKEY0123456789abcdef"\naccount = "primary"\n'
        'scopes = ["images:generate"]\nsigning_secret_env = "TEST_SIGNING_SECRET"\n'
    )
    monkeypatch.setenv("TEST_SIGNING_SECRET", SECRET)
    signature = _headers()["x-service-signature"]
    args = ["verify-signature", str(body), "--signature", signature, "--profile", str(profile)]
    assert main([*args, "--key-role", "primary"]) == 0
    assert capsys.readouterr().out.startswith("valid")
    assert main([*args, "--key-role", "foreign"]) == 2
    assert "--key-role foreign:" in capsys.readouterr().err
    assert main(["verify-signature", str(body), "--signature", signature, "--key-role", "x"]) == 2


def _profile(tmp_path: Path, key_table: str) -> Path:
    profile = tmp_path / "target.toml"
    profile.write_text(
        'name = "t"\nbase_url = "http://127.0.0.1:9"\nkey_prefix = "gk"\nadapter = "none"\n'
        '[keys.primary]\nkey = "gk_bareKEY0123456789abcdef"\naccount = "primary"\n'
        'scopes = ["images:generate"]\n' + key_table
    )
    return profile


def _secret_problems(tmp_path: Path) -> list[tuple[list[str], dict[str, str], str]]:
    """(secret options, environment, what the message names) for each unusable input."""
    unreadable = tmp_path / "unreadable"
    unreadable.mkdir()
    empty = tmp_path / "empty"
    empty.write_text("\n")
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe\x00")
    profile = _profile(tmp_path, "")
    return [
        (["--secret-file", str(tmp_path / "missing")], {}, "--secret-file"),
        (["--secret-file", str(unreadable)], {}, "--secret-file"),
        (["--secret-file", str(empty)], {}, "--secret-file"),
        (["--secret-file", str(binary)], {}, "--secret-file"),
        (["--profile", str(profile)], {}, "--key-role ROLE"),
        (["--key-role", "primary"], {}, "--profile FILE"),
        (["--profile", str(profile), "--key-role", "primary"], {}, "signing_secret"),
        (["--profile", str(profile), "--key-role", "nope"], {}, "--key-role nope"),
        (["--profile", str(tmp_path / "none.toml"), "--key-role", "primary"], {}, "--profile"),
        (["--profile", str(binary), "--key-role", "primary"], {}, "--profile"),
        ([], {"GENAPI_WEBHOOK_SECRET": ""}, "$GENAPI_WEBHOOK_SECRET is empty"),
        ([], {"GENAPI_WEBHOOK_SECRET": "  "}, "$GENAPI_WEBHOOK_SECRET is empty"),
        (["--secret-env", "UNSET_SECRET_VAR"], {}, "$UNSET_SECRET_VAR is not set"),
    ]


@pytest.mark.parametrize("command", ["verify-signature", "listen"])
def test_unusable_secret_input_is_one_line_naming_the_option_and_exit_2(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    body = tmp_path / "body.json"
    body.write_bytes(BODY)
    signature = _headers()["x-service-signature"]
    head = (
        ["verify-signature", str(body), "--signature", signature]
        if command == "verify-signature"
        else ["listen", "--duration", "1", "--count", "1"]
    )
    for options, env, named in _secret_problems(tmp_path):
        monkeypatch.delenv("GENAPI_WEBHOOK_SECRET", raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        assert main([*head, *options]) == 2, options
        captured = capsys.readouterr()
        assert captured.out == "" and "Traceback" not in captured.err
        lines = captured.err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("genapi-conformance: "), lines
        assert named in lines[0], (options, lines)
