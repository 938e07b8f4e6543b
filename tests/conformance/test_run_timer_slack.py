"""A delivery client whose timers fire up to 1 s late meets "Per-attempt timeout 10 s".

The reference started with ``--timer-slack 1`` ends each timed-out attempt 10.0 to 11.0 s
after it starts, as aiohttp's ``ClientTimeout(total=10)`` does. The suite must give it no
MUST failure: at worst a warning with the measured value against the bands. (That every
timing fault still fails is the fault matrix's business.) Run through ``bash scripts/test``:
it starts the reference.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from suite_run import run_suite

from conformance.run.cli import EXIT_OK
from conformance.run.launcher import EmbeddedReference

TIMED = ("DLV-TIMEOUT-01", "DLV-TIMEOUT-02", "DLV-BACKOFF-01", "DLV-BACKOFF-02", "DLV-BACKOFF-03")


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_late_timers_get_no_must_failure(tmp_path: Path) -> None:
    with EmbeddedReference(extra_args=["--timer-slack", "1"], dns=False) as profile:
        done = run_suite(tmp_path / "report", "--profile", str(profile), only=TIMED, timeout=360)
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    assert done.results is not None, done.describe()
    results = done.results
    verdicts = {k: v for k, v in done.verdicts().items() if k in TIMED}
    assert set(verdicts.values()) <= {"pass", "warn"}, verdicts
    assert verdicts["DLV-TIMEOUT-01"] in ("pass", "warn")
    (timeout,) = [r for r in results["requirements"] if r["id"] == "DLV-TIMEOUT-01"]
    measured = [m for e in timeout["evidence"] for m in e["measurements"]]
    assert measured, "the report shows the measured value against the bands"
    assert 10.0 <= measured[0]["value"] <= 13.6  # 2nd to 3rd attempt: 10-11 s, then 2 s
