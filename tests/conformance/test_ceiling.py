"""The run's ceiling (``[timing] run_ceiling_seconds``, :mod:`conformance.run.plugin.ceiling`):
a check still going when it passes is stopped, the checks after it are not run, and both
are errors (never a pass, never the target's failure), in one process and under xdist."""

from __future__ import annotations

import json
import time

import pytest
from fake_checks import INI, MUST, checks_module
from profiles import profile_text

pytest_plugins = ["pytester"]

#: The ceiling of these runs: short (the second check would wait a minute), long enough
#: for the run to reach that check on a loaded machine.
CEILING_S = 8
CHECKS = checks_module(
    ("test_a_passes", MUST[0], "pass"),
    ("test_b_would_wait_a_minute", MUST[1], "import time; time.sleep(60)"),
    ("test_c_comes_after", MUST[2], "pass"),
)


def _run(pytester: pytest.Pytester, *args: str) -> tuple[dict[str, dict[str, str]], float]:
    pytester.makefile(".ini", pytest=INI)
    pytester.makepyfile(test_checks=CHECKS)
    profile = pytester.path / "target.toml"
    profile.write_text(
        profile_text(
            "gk_ceiling_canary_0123456789",
            "ceiling-token-canary",
            tables=f"[timing]\nrun_ceiling_seconds = {CEILING_S}\n",
        ),
        encoding="utf-8",
    )
    report_dir = pytester.path / "out"
    started = time.monotonic()
    pytester.runpytest_subprocess(
        "--profile", str(profile), "--report-dir", str(report_dir), *args, timeout=120
    )
    took = time.monotonic() - started
    results = json.loads((report_dir / "results.json").read_text(encoding="utf-8"))
    checks = {c["nodeid"].rsplit("::", 1)[1]: c for c in results["checks"]}
    return checks, took


def test_a_check_going_at_the_ceiling_is_stopped_and_the_rest_not_run(
    pytester: pytest.Pytester,
) -> None:
    checks, took = _run(pytester, "-p", "no:xdist")
    assert checks["test_a_passes"]["outcome"] == "passed"
    stopped = checks["test_b_would_wait_a_minute"]
    assert stopped["outcome"] == "error", stopped
    assert (
        f"ceiling of {CEILING_S} s ([timing] run_ceiling_seconds) passed while this check ran"
        in (stopped["message"])
    )
    not_run = checks["test_c_comes_after"]
    assert not_run["outcome"] == "error", not_run
    assert f"not run: the run's ceiling of {CEILING_S} s" in not_run["message"]
    # Far less than the minute the second check would wait (start-up included).
    assert took < 50, f"the run took {took:.0f} s"


def test_the_workers_keep_the_controllers_deadline(pytester: pytest.Pytester) -> None:
    """Under xdist the deadline is the one fixed when the run started (a worker's start-up
    does not move it); how far the worker got by then depends on the machine."""
    checks, took = _run(pytester, "-p", "xdist", "-n", "1")
    assert checks["test_a_passes"]["outcome"] in ("passed", "error")
    for name in ("test_b_would_wait_a_minute", "test_c_comes_after"):
        assert checks[name]["outcome"] == "error", checks[name]
        assert f"the run's ceiling of {CEILING_S} s" in checks[name]["message"]
    assert took < 50, f"the run took {took:.0f} s"
