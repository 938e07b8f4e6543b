"""The run's ceiling: no run goes on past ``[timing] run_ceiling_seconds`` of the profile.

Every request of a check has a timeout and every wait a deadline, so a check ends; the
ceiling bounds the sum, whatever the target does (a target that makes every check wait
out its longest deadline could otherwise keep a run going for hours). The deadline is
fixed once, when the run starts (the controller's clock, handed to the xdist workers), and
each process enforces it around the checks it runs:

* a check that starts after the deadline is not run: its set-up raises
  :class:`RunCeilingPassed`, an error (the harness's, never the target's failure, never a
  pass), so its requirements are reported as not judged;
* a check still going at the deadline is stopped by a ``SIGALRM`` that raises the same
  exception in it, an error too.

:class:`RunCeilingPassed` derives from :class:`BaseException`: a check that catches
``Exception`` to judge a broken answer must not swallow it. Where ``SIGALRM`` cannot be
armed (not the main thread, or no such signal) the check runs to its own deadlines.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Generator
from types import FrameType

import pytest

from conformance.run.plugin.state import run_state

__all__ = ["RunCeilingPassed"]


class RunCeilingPassed(BaseException):
    """The run's ceiling (``[timing] run_ceiling_seconds``) passed."""


def _words(config: pytest.Config) -> str:
    state = run_state(config)
    seconds = state.profile.timing.run_ceiling_seconds if state.profile is not None else 0
    return f"the run's ceiling of {seconds:g} s ([timing] run_ceiling_seconds)"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    deadline = run_state(item.config).deadline
    if deadline is not None and time.time() >= deadline:
        raise RunCeilingPassed(f"not run: {_words(item.config)} had passed")


def _can_alarm() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    deadline = run_state(item.config).deadline
    if deadline is None or not _can_alarm():
        return (yield)
    words = _words(item.config)

    def stop(signum: int, frame: FrameType | None) -> None:
        raise RunCeilingPassed(f"stopped: {words} passed while this check ran")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, max(deadline - time.time(), 0.001))
    try:
        return (yield)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
