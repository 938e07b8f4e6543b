"""Attestations: a signed run verifies offline; every kind of tampering is refused, saying why.

The run folder is made by the real plugin (pytester, one passing and one failing fake
check), so the Statement is built from what a run really writes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_checks import INI, MUST, checks_module

from conformance.attestation import (
    PAYLOAD_TYPE,
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    SUBJECTS,
    AttestationError,
    load_public_key,
    pae,
    verify,
)
from conformance.provenance import catalog_sha256
from conformance.run.cli import main

pytest_plugins = ["pytester"]

CHECKS = checks_module(
    ("test_passes", MUST[0], "pass"),
    ("test_fails", MUST[1], 'assert 500 == 200, "expected 200, saw 500"'),
)


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A run folder, a key pair, and the run's envelope (never modified: tests copy)."""
    base = tmp_path_factory.mktemp("attest")
    checks = base / "checks"
    checks.mkdir()
    (checks / "pytest.ini").write_text(INI)
    (checks / "test_fake.py").write_text(CHECKS)
    run_dir = base / "run"
    pytest_argv = ["-p", "no:xdist", "-p", "no:cacheprovider", "-q", "--report-dir", str(run_dir)]
    done = subprocess.run(  # noqa: S603 (our own interpreter and arguments)
        [
            sys.executable,
            "-m",
            "pytest",
            *pytest_argv,
            "-c",
            str(checks / "pytest.ini"),
            str(checks),
        ],
        cwd=checks,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (run_dir / "results.json").is_file(), done.stdout + done.stderr
    prefix = base / "signer"
    assert main(["keygen", "--out", str(prefix)]) == 0
    assert main(["attest", str(run_dir), "--key", f"{prefix}.key"]) == 0
    return {
        "run": run_dir,
        "key": Path(f"{prefix}.key"),
        "pub": Path(f"{prefix}.pub"),
        "envelope": run_dir / "attestation.dsse.json",
    }


def _copy_run(signed: dict[str, Path], tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    for name in (*SUBJECTS, signed["envelope"].name):
        (run / name).write_bytes((signed["run"] / name).read_bytes())
    return run


def _statement(envelope_path: Path) -> dict[str, Any]:
    envelope = json.loads(envelope_path.read_text())
    statement: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))
    return statement


def _verify_cli(envelope: Path, pub: Path, run: Path | None, capsys: Any) -> tuple[int, str]:
    argv = ["verify-attestation", str(envelope), "--pubkey", str(pub)]
    code = main([*argv, "--run", str(run)] if run else argv)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_pae_is_dsse_v1_encoding() -> None:
    assert pae("application/example", b"hello") == b"DSSEv1 19 application/example 5 hello"
    # Lengths are in bytes, not characters.
    assert pae("t", "é".encode()) == b"DSSEv1 1 t 2 " + "é".encode()


def _distribution_sha256_from(cwd: Path) -> str:
    code = "from conformance.provenance import distribution_sha256; print(distribution_sha256())"
    done = subprocess.run(  # noqa: S603 (our own interpreter and arguments)
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_statement_binds_reports_verdicts_and_provenance(signed: dict[str, Path]) -> None:
    statement = _statement(signed["envelope"])
    results = json.loads((signed["run"] / "results.json").read_text())
    assert statement["_type"] == STATEMENT_TYPE
    assert statement["predicateType"] == PREDICATE_TYPE
    assert {s["name"]: s["digest"]["sha256"] for s in statement["subject"]} == {
        name: hashlib.sha256((signed["run"] / name).read_bytes()).hexdigest() for name in SUBJECTS
    }
    predicate = statement["predicate"]
    assert predicate["suite"]["distribution_sha256"] == results["suite_sha256"]
    # The run's digest is that of the suite its process imported: computed again the way
    # the run's process would find the suite (from the run's working directory, where a
    # checkout on the test process's path does not shadow the installed package).
    assert results["suite_sha256"] == _distribution_sha256_from(signed["run"].parent / "checks")
    assert predicate["catalog_sha256"] == catalog_sha256()
    assert predicate["target"]["profile_sha256"] == results["profile"]["sha256"]
    assert predicate["spec_version"] == results["spec_version"]
    assert (predicate["started_at"], predicate["finished_at"]) == (
        results["started_at"],
        results["finished_at"],
    )
    assert predicate["verdicts"][MUST[0]] == "pass"
    assert predicate["verdicts"][MUST[1]] == "fail"
    assert predicate["baseline"] is None
    envelope = json.loads(signed["envelope"].read_text())
    assert envelope["payloadType"] == PAYLOAD_TYPE


def test_a_good_attestation_verifies_with_its_run(signed: dict[str, Path], capsys: Any) -> None:
    code, out = _verify_cli(signed["envelope"], signed["pub"], signed["run"], capsys)
    assert code == 0, out
    assert "verified: signed by keyid" in out
    assert "every attested file matches" in out


def test_a_tampered_verdict_in_the_envelope_fails(
    signed: dict[str, Path], tmp_path: Path, capsys: Any
) -> None:
    envelope = json.loads(signed["envelope"].read_text())
    statement = _statement(signed["envelope"])
    statement["predicate"]["verdicts"][MUST[1]] = "pass"
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(envelope))
    code, out = _verify_cli(forged, signed["pub"], None, capsys)
    assert code == 1
    assert "no signature verifies with this public key" in out
    assert "altered after signing" in out


def test_a_tampered_verdict_in_results_json_fails_naming_it(
    signed: dict[str, Path], tmp_path: Path, capsys: Any
) -> None:
    run = _copy_run(signed, tmp_path)
    results = run / "results.json"
    results.write_text(results.read_text().replace('"verdict": "fail"', '"verdict": "pass"'))
    code, out = _verify_cli(run / signed["envelope"].name, signed["pub"], run, capsys)
    assert code == 1
    assert "results.json: sha256" in out
    assert f"verdict of {MUST[1]} is 'pass', attested 'fail'" in out


def test_a_tampered_file_fails(signed: dict[str, Path], tmp_path: Path, capsys: Any) -> None:
    run = _copy_run(signed, tmp_path)
    with (run / "report.html").open("a") as stream:
        stream.write("<!-- edited -->")
    code, out = _verify_cli(run / signed["envelope"].name, signed["pub"], run, capsys)
    assert code == 1
    assert "is not the attested run" in out
    assert "report.html: sha256" in out
    (run / "junit.xml").unlink()
    with pytest.raises(AttestationError, match=r"junit\.xml: missing"):
        verify(run / signed["envelope"].name, load_public_key(signed["pub"]), run)


def test_a_wrong_key_fails(signed: dict[str, Path], tmp_path: Path, capsys: Any) -> None:
    other = tmp_path / "other"
    assert main(["keygen", "--out", str(other)]) == 0
    code, out = _verify_cli(signed["envelope"], Path(f"{other}.pub"), None, capsys)
    assert code == 1
    assert "no signature verifies with this public key" in out
    assert "the key is not the signer's" in out


def test_a_truncated_envelope_fails(signed: dict[str, Path], tmp_path: Path, capsys: Any) -> None:
    data = signed["envelope"].read_bytes()
    truncated = tmp_path / "truncated.json"
    truncated.write_bytes(data[: len(data) // 2])
    code, out = _verify_cli(truncated, signed["pub"], None, capsys)
    assert code == 1
    assert "not a DSSE envelope: not valid JSON" in out
    assert "truncated" in out


def test_a_private_key_is_not_a_public_key(signed: dict[str, Path], capsys: Any) -> None:
    code, out = _verify_cli(signed["envelope"], signed["key"], None, capsys)
    assert code == 2
    assert "not a PEM key" in out or "not an Ed25519 public key" in out


def test_keygen_keeps_the_private_key_private_and_refuses_to_overwrite(
    tmp_path: Path, capsys: Any
) -> None:
    prefix = tmp_path / "k"
    assert main(["keygen", "--out", str(prefix)]) == 0
    assert (Path(f"{prefix}.key").stat().st_mode & 0o777) == 0o600
    assert main(["keygen", "--out", str(prefix)]) == 2
    assert "exists" in capsys.readouterr().err


def test_attest_refuses_a_folder_that_is_not_a_run(tmp_path: Path, capsys: Any) -> None:
    prefix = tmp_path / "k"
    assert main(["keygen", "--out", str(prefix)]) == 0
    assert main(["attest", str(tmp_path), "--key", f"{prefix}.key"]) == 2
    assert "results.json" in capsys.readouterr().err


def test_verify_works_from_the_installed_command(signed: dict[str, Path]) -> None:
    files = [str(signed["envelope"]), "--pubkey", str(signed["pub"]), "--run", str(signed["run"])]
    done = subprocess.run(  # noqa: S603 (our own interpreter and arguments)
        [sys.executable, "-m", "conformance.run.cli", "verify-attestation", *files],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "verified" in done.stdout
