"""The suite against a target that misbehaves on purpose (``hostile/app.py``), one mode per
test: every run ends within a bound derived from the profile, with fail or error verdicts
that name the misbehaviour, under 500 MB of memory, with no traceback in the report.

Each run is ``genapi-conformance run --profile`` in a subprocess, as a user runs it, with
one check that sends one request and asks for a MUST (TIER-READ-01: the tier read answers
2xx with a JSON object). Run
through ``bash scripts/test``: the suite's receiver binds and the runs use loopback only.
"""

from __future__ import annotations

import resource
from pathlib import Path
from typing import Final

import pytest
from hostile.app import HostileServer
from suite_run import SuiteRun, run_suite

#: The profile's [timing] request_timeout_seconds: short, so that hanging modes end soon.
REQUEST_TIMEOUT: Final = 3.0
#: The checks run against each mode: one request each.
CHECKS: Final = ("TIER-READ-01",)
#: The bound on a whole run: each check's request may take the timeout twice (waiting for
#: the answer, then for its body), plus the run's start-up and reports.
RUN_CEILING: Final = len(CHECKS) * 2 * REQUEST_TIMEOUT + 45.0
#: The most memory the run may take (its peak resident set).
MAX_RSS_BYTES: Final = 500 * 1024 * 1024

PROFILE: Final = """\
name = "hostile ({mode})"
base_url = "{base_url}"
key_prefix = "gk"

[keys.primary]
key = "gk_hostile0000000000000000000000"
account = "primary"
scopes = ["images:generate", "images:edit", "videos:generate", "audio:generate", "agent:run"]

[timing]
request_timeout_seconds = {timeout}
"""


def _run_against(mode: str, tmp_path: Path) -> tuple[SuiteRun, str, int]:
    """Run the checks against *mode*; the run, its report.html and the children's peak RSS."""
    with HostileServer(mode) as server:
        profile = tmp_path / "profile.toml"
        profile.write_text(
            PROFILE.format(mode=mode, base_url=server.base_url, timeout=REQUEST_TIMEOUT),
            encoding="utf-8",
        )
        run = run_suite(
            tmp_path / "report",
            "--profile",
            str(profile),
            "-q",
            only=CHECKS,
            workers=0,
            timeout=RUN_CEILING,
        )
    # ru_maxrss is in KiB on Linux: the largest child waited for so far (this run's or an
    # earlier test's, so the bound holds for each).
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    html_path = tmp_path / "report" / "report.html"
    html = html_path.read_text(encoding="utf-8") if html_path.is_file() else ""
    return run, html, peak


def _assert_survived(run: SuiteRun, html: str, peak: int, *, naming: str) -> None:
    verdicts = run.verdicts()
    assert set(CHECKS) <= set(verdicts), run.describe()
    bad = {i: verdicts[i] for i in CHECKS if verdicts[i] in ("fail", "error")}
    assert bad, f"a hostile target passed: {verdicts}{run.describe()}"
    assert run.returncode in (1, 3), run.describe()
    reasons = " ".join(str(run.requirement(i)) for i in bad)
    assert naming.lower() in reasons.lower(), f"{naming!r} not named in {reasons}"
    assert html, f"no report.html{run.describe()}"
    assert "Traceback (most recent call last)" not in html
    assert peak < MAX_RSS_BYTES, f"peak RSS {peak / 2**20:.0f} MB"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "naming"),
    [
        ("never-answers", "did not answer within 3 s"),
        ("drip", "drips its answer"),
        ("invalid-json", "json"),
        ("wrong-content-type", "text/html"),
        ("huge-body", "more than the 16777216 bytes"),
        ("endless-chunked", "passed 16777216 bytes"),
        ("server-error", "500"),
        ("rate-limited-for-a-day", "429"),
        ("redirect-loop", "302"),
    ],
)
@pytest.mark.timeout(RUN_CEILING + 60)
def test_the_suite_survives_a_hostile_target(mode: str, naming: str, tmp_path: Path) -> None:
    run, html, peak = _run_against(mode, tmp_path)
    _assert_survived(run, html, peak, naming=naming)
