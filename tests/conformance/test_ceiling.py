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


#: The second check's fixture hangs in its set-up, or in its teardown (the check passes).
FIXTURE_HANGS = """
import time

import pytest

@pytest.fixture
def hangs_in_setup():
    time.sleep(60)
    yield

@pytest.fixture
def hangs_in_teardown():
    yield
    time.sleep(60)
"""


def _fixture_hangs(phase: str) -> str:
    return (
        FIXTURE_HANGS
        + checks_module(("test_a_passes", MUST[0], "pass"))
        + f'\n@pytest.mark.requirement("{MUST[1]}")\n'
        + f"def test_b_fixture_hangs(hangs_in_{phase}):\n    pass\n"
        + checks_module(("test_c_comes_after", MUST[2], "pass"))
    )


def _run(
    pytester: pytest.Pytester, *args: str, module: str = CHECKS
) -> tuple[dict[str, dict[str, str]], float]:
    pytester.makefile(".ini", pytest=INI)
    pytester.makepyfile(test_checks=module)
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


@pytest.mark.timeout(180)
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


@pytest.mark.timeout(180)
def test_the_workers_keep_the_controllers_deadline(pytester: pytest.Pytester) -> None:
    """Under xdist the deadline is the one fixed when the run started (a worker's start-up
    does not move it); how far the worker got by then depends on the machine."""
    checks, took = _run(pytester, "-p", "xdist", "-n", "1")
    assert checks["test_a_passes"]["outcome"] in ("passed", "error")
    for name in ("test_b_would_wait_a_minute", "test_c_comes_after"):
        assert checks[name]["outcome"] == "error", checks[name]
        assert f"the run's ceiling of {CEILING_S} s" in checks[name]["message"]
    assert took < 50, f"the run took {took:.0f} s"


@pytest.mark.timeout(180)
@pytest.mark.parametrize("phase", ["setup", "teardown"])
def test_a_fixture_going_at_the_ceiling_is_stopped_too(
    pytester: pytest.Pytester, phase: str
) -> None:
    """The ceiling bounds every phase of a check: a fixture that hangs in its set-up or
    its teardown is stopped there, with the ceiling's verdict (an error, never a pass)."""
    checks, took = _run(pytester, "-p", "no:xdist", module=_fixture_hangs(phase))
    assert checks["test_a_passes"]["outcome"] == "passed"
    stopped = checks["test_b_fixture_hangs"]
    assert stopped["outcome"] == "error", stopped
    where = "its set-up" if phase == "setup" else "its teardown"
    assert (
        f"ceiling of {CEILING_S} s ([timing] run_ceiling_seconds) passed while this check "
        f"ran ({where})" in stopped["message"]
    )
    not_run = checks["test_c_comes_after"]
    assert not_run["outcome"] == "error", not_run
    assert f"not run: the run's ceiling of {CEILING_S} s" in not_run["message"]
    assert took < 50, f"the run took {took:.0f} s"
