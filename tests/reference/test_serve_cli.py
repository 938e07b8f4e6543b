"""``python -m reference``: fault listing, start-up checks, provisioning, restarts."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from running_reference import (
    ReferenceFactory,
    RunningReference,
    bearer,
    submit_image,
    wait_for_delivery,
    wait_for_status,
)

from conformance.target.profile import load_profile
from reference.__main__ import _parser
from reference.faults import FAULTS
from reference.provision import ACCOUNTS


def test_faults_command_lists_every_fault_with_its_id() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "reference", "faults"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    for fault in FAULTS.values():
        line = next(x for x in result.stdout.splitlines() if x.split()[0] == fault.name)
        assert fault.requirement_id in line


def test_unknown_fault_refuses_to_start(tmp_path: Path) -> None:
    result = subprocess.run(  # noqa: S603
        [sys.executable, "-m", "reference", "serve", "--port", "0",
         "--db", str(tmp_path / "db"), "--fault", "no-such-fault"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "no-such-fault" in result.stderr
    assert "listening on" not in result.stdout


def test_provisioned_profile_is_valid_for_the_suite(reference_factory: ReferenceFactory) -> None:
    service = reference_factory()
    profile = load_profile(service.directory / "profile.toml", env={})
    assert profile.base_url == service.base_url
    roles = set(service.profile["keys"])
    assert {"primary", "revoked", "foreign", "low-limit", "restricted-models"} <= roles
    assert {r for r in roles if r.startswith("without-")} == {
        "without-images-generate", "without-images-edit", "without-videos-generate",
        "without-audio-generate", "without-agent-run",
    }  # fmt: skip
    assert service.profile["keys"]["revoked"]["revoked"] is True
    assert (service.directory / "profile.toml").stat().st_mode & 0o077 == 0
    # The console paths are the reference's own: the suite ships them as a preset.
    assert service.profile["adapter"] == {"preset": "reference"}
    assert profile.adapter.preset == "reference" and profile.adapter.declared


def test_test_mode_logs_a_warning(reference_factory: ReferenceFactory) -> None:
    service = reference_factory()
    assert "WARNING: TEST MODE" in service.stderr_text()


def test_reprovisioning_replaces_keys_without_duplicates(
    reference_factory: ReferenceFactory, tmp_path: Path
) -> None:
    first = reference_factory(directory=tmp_path / "state")
    old_key = first.key("primary")
    first.stop()
    second = reference_factory(directory=tmp_path / "state")
    client = second.client()
    assert client.get("/v1/account/tier", headers=bearer(old_key)).status_code == 401
    assert client.get("/v1/account/tier", headers=bearer(second.key("primary"))).status_code == 200
    with sqlite3.connect(second.db_path) as db:
        accounts = db.execute("SELECT COUNT(*) FROM accounts").fetchone()[0]
        active = db.execute(
            "SELECT COUNT(*) FROM api_keys WHERE revoked_at IS NULL GROUP BY account_id"
        ).fetchall()
    assert accounts == len(ACCOUNTS)
    assert max(n for (n,) in active) <= 6
    # Signing secrets derive from the stored master secret: stable across restarts.
    assert (
        first.profile["keys"]["primary"]["signing_secret"]
        != (second.profile["keys"]["primary"]["signing_secret"])
    )  # a new key, so a new secret
    detail = client.get(
        f"/api/keys/{first.key_id('foreign')}", headers=bearer(second.session("second"))
    )
    assert detail.json()["signing_secret"] == first.profile["keys"]["foreign"]["signing_secret"]


def test_sessions_survive_a_restart(reference_factory: ReferenceFactory, tmp_path: Path) -> None:
    first = reference_factory(directory=tmp_path / "state")
    token = first.session("primary")
    first.stop()
    second = reference_factory(directory=tmp_path / "state")
    assert second.client().get("/api/keys", headers=bearer(token)).status_code == 200


def test_graceful_stop_keeps_queued_work(
    reference_factory: ReferenceFactory, tmp_path: Path
) -> None:
    first = reference_factory(directory=tmp_path / "state", args=["--latency-ms", "3000"])
    client = first.client()
    key = first.key("primary")
    ids = [
        client.post("/v1/images/generate", headers=bearer(key), json={"prompt": f"g{n}"}).json()[
            "id"
        ]
        for n in range(5)
    ]
    assert first.stop() in (0, -15)
    second = reference_factory(directory=tmp_path / "state", provision=False)
    client = second.client()
    for generation_id in ids:
        assert wait_for_status(client, key, generation_id)["status"] == "completed"


def test_delivery_timeout_flag_bounds_each_attempt_and_warns(
    reference_factory: ReferenceFactory,
) -> None:
    # A listening socket nobody accepts on: the kernel completes the handshake, the
    # request is sent, no answer ever comes, so only the attempt timeout ends it.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        service = reference_factory(args=["--delivery-timeout", "0.5", "--latency-ms", "0"])
        assert "WARNING: delivery timeout is 0.5 s, not the spec's 10 s" in service.stderr_text()
        client, key = service.client(), service.key("primary")
        generation_id = submit_image(
            client, key, {"prompt": "timeout", "callback_url": f"http://127.0.0.1:{port}/hook"}
        )
        # Within 8 s, well under the spec's 10 s: the flag took effect.
        record = wait_for_delivery(
            client, key, generation_id, lambda r: bool(r["attempts"]), timeout_s=8.0, interval_s=0.1
        )
    first = record["attempts"][0]
    assert first["status"] == 0
    assert first["error"] == "no response within 0.5 s"
    assert 400 <= first["ms"] < 5000  # 0.5 s with scheduling tolerance


def test_default_delivery_timeout_is_the_specs_without_warning(
    reference_server: RunningReference,
) -> None:
    assert _parser().parse_args(["serve"]).delivery_timeout == 10.0
    assert "delivery timeout" not in reference_server.stderr_text()


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_delivery_timeout_must_be_a_positive_number(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        _parser().parse_args(["serve", "--delivery-timeout", value])
    assert stopped.value.code == 2
    assert "--delivery-timeout" in capsys.readouterr().err
