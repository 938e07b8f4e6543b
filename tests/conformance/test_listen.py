"""``genapi-conformance listen``: deliveries printed live with their signature verdicts."""

from __future__ import annotations

import io
import json
import re
import threading
import time
from pathlib import Path

import httpx
import pytest

from conformance.observe.receiver import Delivery, Receiver
from conformance.observe.signatures import signature_digest
from conformance.run.cli import main
from conformance.run.commands.listen import MAX_NAME_CHARS, listen, safe_file_name
from conformance.secrets import Secret

SECRET = "whsec_listen-test-secret"
TIMEOUT_S = 10.0


def _post(url: str, body: bytes, delivery: str, attempt: int, *, signed: bytes | None = None):
    t = int(time.time())
    digest = signature_digest(SECRET, t, body if signed is None else signed)
    headers = {
        "Content-Type": "application/json",
        "X-Service-Event": "generation.completed",
        "X-Service-Delivery": delivery,
        "X-Service-Attempt": str(attempt),
        "X-Service-Generation": "gen_1",
        "X-Service-Signature": f"t={t},v1={digest}",
    }
    return httpx.post(url, content=body, headers=headers, timeout=TIMEOUT_S)


def test_listen_prints_each_delivery_with_its_verdict(tmp_path: Path) -> None:
    body = json.dumps({"id": "dlv_1", "type": "generation.completed"}).encode()
    out = io.StringIO()
    with Receiver() as receiver:
        endpoint = receiver.endpoint("listen").respond_with_statuses([500, 200])
        shown: list[int] = []
        thread = threading.Thread(
            target=lambda: shown.append(
                listen(
                    endpoint,
                    out,
                    secret=Secret(SECRET),
                    count=4,
                    duration_s=TIMEOUT_S,
                    save_dir=tmp_path,
                )
            )
        )
        thread.start()
        assert _post(endpoint.url, body, "dlv_1", 1).status_code == 500
        assert _post(endpoint.url, body, "dlv_1", 2).status_code == 200
        assert _post(endpoint.url, body, "dlv_1", 3).status_code == 200
        tampered = body.replace(b"completed", b"failed")
        assert _post(endpoint.url, tampered, "dlv_2", 1, signed=body).status_code == 200
        thread.join(TIMEOUT_S)
        # What was printed was handed over and forgotten: a long listen keeps no records.
        assert endpoint.deliveries == []
    assert shown == [4]
    lines = out.getvalue().splitlines()
    assert len(lines) == 4
    assert "attempt=1" in lines[0] and "replied 500" in lines[0]
    assert lines[0].endswith("signature valid")
    assert "(+" in lines[1] and lines[1].endswith("signature valid")
    assert lines[2].endswith("signature valid, duplicate")
    assert "signature INVALID" in lines[3] and SECRET not in lines[3]
    assert (tmp_path / "0004-dlv_2.body").read_bytes() == tampered


def test_listen_without_deliveries_ends_at_its_duration(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GENAPI_WEBHOOK_SECRET", raising=False)
    started = time.monotonic()
    assert main(["listen", "--count", "1", "--duration", "1"]) == 1
    assert time.monotonic() - started < TIMEOUT_S
    out = capsys.readouterr().out
    assert out.startswith("listening: http://127.0.0.1:")
    assert "signatures are not verified" in out and "0 deliveries received" in out


def test_listen_refuses_bad_scripts(tmp_path: Path) -> None:
    assert main(["listen", "--statuses", "200,abc", "--duration", "1"]) == 2
    (tmp_path / "file").write_text("")
    assert main(["listen", "--save-dir", str(tmp_path / "file"), "--duration", "1"]) == 2
    assert main(["listen", "--delay", "1000", "--duration", "1"]) == 2
    assert main(["listen", "--duration", "0"]) == 2


@pytest.mark.parametrize(
    "hostile",
    [
        "../../escaped",
        "..\\..\\escaped",
        "..",
        ".",
        ".hidden",
        "a/b",
        "/abs",
        "nul\x00byte",
        "line\r\nbreak",
        "\x1b[31mred",
        "é" * 200,
        "",
    ],
)
def test_a_hostile_delivery_id_becomes_one_harmless_file_name(hostile: str) -> None:
    name = safe_file_name(hostile)
    assert name and re.fullmatch(r"[A-Za-z0-9._-]+", name) and not name.startswith(".")
    assert name not in (".", "..") and len(name) <= MAX_NAME_CHARS + 11
    # Two ids that differ only in what was replaced still get different names.
    assert safe_file_name(hostile + "/") != name


def test_a_plain_delivery_id_is_kept_as_it_is() -> None:
    assert safe_file_name("dlv_01J9-x.y") == "dlv_01J9-x.y"


def test_saved_bodies_stay_in_the_save_dir_whatever_the_id(tmp_path: Path) -> None:
    save_dir = tmp_path / "saved"
    save_dir.mkdir()
    hostile = ["../escaped", "..\\escaped", "..", "/tmp/abs", ".profile"]
    out = io.StringIO()
    with Receiver() as receiver:
        endpoint = receiver.endpoint("listen")
        for index, delivery in enumerate(hostile, 1):
            assert _post(endpoint.url, b"{}", delivery, index).status_code == 200
        shown = listen(
            endpoint,
            out,
            secret=Secret(SECRET),
            count=len(hostile),
            duration_s=TIMEOUT_S,
            save_dir=save_dir,
        )
    assert shown == len(hostile)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["saved"]
    saved = sorted(p.name for p in save_dir.iterdir())
    assert len(saved) == len(hostile)
    assert all(re.fullmatch(r"\d{4}-[A-Za-z0-9_-][A-Za-z0-9._-]*\.body", n) for n in saved)


class _Arrived:
    """An endpoint whose deliveries are given (headers no HTTP client would send)."""

    def __init__(self, deliveries: list[Delivery]) -> None:
        self._deliveries = deliveries

    def take(self, timeout: float = 0.0) -> list[Delivery]:
        taken, self._deliveries = self._deliveries, []
        return taken


def test_control_characters_received_are_escaped_in_the_output() -> None:
    forged = "dlv_1\r\n12:00:00 #2 POST event=generation.completed delivery=dlv_9"
    headers = httpx.Headers(
        {
            "X-Service-Event": "generation.completed\x1b[2J\x1b]0;pwned\x07",
            "X-Service-Delivery": forged,
            "X-Service-Generation": "gen\x00\x85\u202eevil",
            "X-Service-Attempt": "1\t\x7f",
            "X-Service-Signature": "t=1\x1b[31m,v1=00",
        },
        encoding="utf-8",
    )
    delivery = Delivery(b"{}", headers, time.monotonic(), "/hooks/x", "POST")
    for secret in (None, Secret(SECRET)):
        out = io.StringIO()
        shown = listen(_Arrived([delivery]), out, secret=secret, count=1, duration_s=TIMEOUT_S)
        assert shown == 1
        text = out.getvalue()
        assert text.count("\n") == 1 and text.endswith("\n")
        line = text[:-1]
        assert all(c.isprintable() and c not in "\u202e" for c in line), line
        assert "dlv_1\\x0d\\x0a12:00:00" in line and "\\x1b[2J" in line and "\\x00" in line
        assert "\\u202e" in line and "\\x09\\x7f" in line
