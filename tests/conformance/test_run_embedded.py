"""``genapi-conformance run`` end to end against the embedded reference implementation.

Starts the real reference (run these through ``bash scripts/test``: a loopback-only
network namespace), as a user would. The first test runs ``python -m conformance.run.cli``
as a plain subprocess, which starts ``python -m reference`` and its workers itself; the
others go through the test process's fork server (``suite_run.py``).
"""

from __future__ import annotations

import socket
import sys
import tomllib
from pathlib import Path

import pytest
from suite_run import SuiteRun, run_command, run_suite

from conformance.run.cli import EXIT_FAILED, EXIT_OK
from conformance.run.launcher import EmbeddedReference


def _run(report_dir: Path, *args: str, plain: bool = False) -> SuiteRun:
    return run_suite(report_dir, *args, timeout=840, plain=plain)


# The full run against the embedded reference (exit 0, the four reports) is
# tests/conformance/test_fault_matrix.py::test_reference_passes_every_check: not repeated here.


@pytest.mark.timeout(900)
def test_run_embedded_reference_with_faults_fails_their_requirements(tmp_path: Path) -> None:
    """Each reference fault of the tier endpoints fails the one requirement it names (a
    plain subprocess: the start every user's run has, workers and reference included)."""
    report_dir = tmp_path / "report"
    done = _run(
        report_dir,
        "--fault",
        "tier-endpoint-wrong-type",
        "--fault",
        "console-tier-differs",
        *("--only", "TIER-FIELD-02", "--only", "CONSOLE-TIER-01", "--only", "TIER-READ-01"),
        plain=True,
    )
    assert done.returncode == EXIT_FAILED, done.stdout + done.stderr
    assert "FAIL  TIER-FIELD-02" in done.stdout
    assert "FAIL  CONSOLE-TIER-01" in done.stdout
    verdicts = done.verdicts()
    assert verdicts == {"TIER-FIELD-02": "fail", "CONSOLE-TIER-01": "fail", "TIER-READ-01": "pass"}


#: The checks that need controllable DNS (conformance/checks/test_url_rebind.py) and the
#: requirements they cite: the embedded run serves DNS, so none of them is skipped.
DNS_REQUIREMENTS = (
    "REDLV-REBIND-01",
    "REDLV-REBIND-02",
    "REDLV-REBIND-03",
    "REDLV-VALIDATE-01",
    "URL-RESOLVE-02",
    "URL-RESOLVE-03",
)


@pytest.mark.timeout(900)
def test_run_embedded_reference_runs_the_dns_checks(tmp_path: Path) -> None:
    """The embedded run serves DNS for the reference: the rebinding checks, run on the
    workers, pass, none skipped. Only the checks of the requirements that need DNS: the
    full run against the reference (the fault matrix's) runs the rest of their areas."""
    report_dir = tmp_path / "report"
    done = _run(report_dir, *(arg for i in DNS_REQUIREMENTS for arg in ("--only", i)))
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    assert done.results is not None, done.describe()
    rebind = [c for c in done.results["checks"] if "test_url_rebind.py" in c["nodeid"]]
    assert len(rebind) >= 10, [c["nodeid"] for c in done.results["checks"]]
    assert {c["outcome"] for c in rebind} == {"passed"}, rebind
    verdicts = done.verdicts()
    assert {i: verdicts[i] for i in DNS_REQUIREMENTS} == dict.fromkeys(DNS_REQUIREMENTS, "pass")


@pytest.mark.timeout(900)
def test_run_embedded_reference_dns_faults_fail_the_rebinding_checks(tmp_path: Path) -> None:
    """A redeliver that skips the address check, and a submit that checks literal hosts but
    not what names resolve to, fail their requirements (the DNS checks can fail)."""
    report_dir = tmp_path / "report"
    done = _run(
        report_dir,
        *("--fault", "redeliver-skips-revalidation"),
        *("--fault", "callback-name-address-unchecked"),
        *("--only", "REDLV-REBIND-01", "--only", "URL-RESOLVE-02"),
    )
    assert done.returncode == EXIT_FAILED, done.stdout + done.stderr
    verdicts = done.verdicts()
    assert verdicts == {"REDLV-REBIND-01": "fail", "URL-RESOLVE-02": "fail"}


@pytest.mark.timeout(900)
def test_plain_pytest_against_a_reference_started_with_dns_server(tmp_path: Path) -> None:
    """The template's recipe: the reference started by hand with ``--dns-server`` writes
    [dns] (no zone_dir); plain pytest with two workers and the checks spread over both
    (``--dist load``) serves that address once and passes the DNS checks."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    reference = EmbeddedReference(dns=False, extra_args=["--dns-server", f"127.0.0.1:{port}"])
    report_dir = tmp_path / "report"
    with reference as profile:
        assert "zone_dir" not in tomllib.loads(profile.read_text(encoding="utf-8"))["dns"]
        done = run_command(
            [
                *(sys.executable, "-m", "pytest", "--pyargs", "conformance.checks"),
                *("--profile", str(profile), "--report-dir", str(report_dir)),
                *("-p", "no:cacheprovider", "-n", "2", "--dist", "load", "-k", "rebind"),
            ],
            report_dir,
            timeout=600,
        )
    assert done.returncode == 0, done.describe()
    assert done.results is not None, done.describe()
    checks = done.results["checks"]
    assert len(checks) >= 10 and {c["outcome"] for c in checks} == {"passed"}, checks
