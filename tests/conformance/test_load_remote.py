"""``genapi-conformance load`` with workers started on their own (``--master-host``), as on
other machines: the master waits for them, their records reach it over Locust's channel,
and a master whose workers never come, or a worker told other roles, is an error rather
than a verdict. Every process is a subprocess, as users run them, against one reference
served from two processes. The high-limit tier (6,000 requests a minute) is driven only
where it cannot depend on the machine's speed: the check of the workers' roles.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.run.launcher import EmbeddedReference

CLI = (sys.executable, "-m", "conformance.run.cli", "load")


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workdir = tmp_path_factory.mktemp("reference")
    reference = EmbeddedReference(workdir=workdir, extra_args=["--workers", "2"], test_clock=False)
    with reference as path:
        yield str(path)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _worker(profile: str, port: int, *roles: str) -> subprocess.Popen[str]:
    return subprocess.Popen(  # noqa: S603 (our own interpreter and arguments)
        [*CLI, "--master-host", "127.0.0.1", "--master-port", str(port), "--profile", profile,
         "--connect-timeout", "60", *roles],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def _master(
    profile: str, port: int, report_dir: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 (our own interpreter and arguments)
        [*CLI, "--profile", profile, "--master-port", str(port), "--report-dir",
         str(report_dir), *extra],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip


def _ended(worker: subprocess.Popen[str]) -> tuple[int, str]:
    out, _ = worker.communicate(timeout=120)
    return worker.returncode, out


#: The low-limit key (20 a minute: reached whatever the machine's speed) and the daily key.
ROLES = ("--key", "low-limit", "--daily-key", "low-daily")


@pytest.mark.timeout(280)
def test_records_of_workers_started_on_their_own_reach_the_master(
    profile: str, tmp_path: Path
) -> None:
    port = _free_port()
    workers = [_worker(profile, port, *ROLES) for _ in range(2)]
    try:
        master = _master(profile, port, tmp_path, "--workers", "0", "--expect-workers", "2",
                         "--users", "8", "--duration", "6", *ROLES)  # fmt: skip
    finally:
        ended = [_ended(worker) for worker in workers]
    assert master.returncode == 0, master.stdout + master.stderr
    assert [code for code, _ in ended] == [0, 0], ended
    assert "requests from 2 workers" in master.stdout, master.stdout
    results = json.loads((tmp_path / "results.json").read_text())
    verdicts = {r["id"]: r["verdict"] for r in results["requirements"]}
    judged = ("RATE-RPM-02", "RATE-HDR-01", "RATE-HDR-03", "RATE-HDR-04", "RATE-RPM-03")
    assert {verdicts[i] for i in judged} == {"pass"}, master.stdout
    assert verdicts["RATE-RPD-01"] == "pass", master.stdout
    assert " requests from 2 workers, " in master.stdout, master.stdout  # the daily key's


@pytest.mark.timeout(280)
def test_a_master_whose_workers_never_come_is_a_usage_error(profile: str, tmp_path: Path) -> None:
    lonely = ("--workers", "0", "--expect-workers", "1", "--connect-timeout", "2")
    master = _master(profile, _free_port(), tmp_path, *lonely, "--key", "high-limit")
    assert master.returncode == 2, master.stdout + master.stderr
    assert "1 workers expected, not all connected to the master on 127.0.0.1:" in master.stderr


@pytest.mark.timeout(280)
def test_a_worker_told_other_roles_than_the_master_is_a_harness_error(
    profile: str, tmp_path: Path
) -> None:
    port = _free_port()
    worker = _worker(profile, port, "--key", "high-limit-second")
    try:
        master = _master(profile, port, tmp_path, "--workers", "1", "--expect-workers", "1",
                         "--key", "high-limit", "--duration", "2")  # fmt: skip
    finally:
        _ended(worker)
    assert master.returncode == 3, master.stdout + master.stderr
    assert "1 workers were started with other roles or another request" in master.stderr


def test_a_worker_needs_its_own_profile() -> None:
    done = subprocess.run(  # noqa: S603 (our own interpreter and arguments)
        [*CLI, "--master-host", "127.0.0.1"], capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "reads its keys from its own --profile" in done.stderr
