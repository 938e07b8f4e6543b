"""The run's ceiling: no run goes on past ``[timing] run_ceiling_seconds`` of the profile.

Every request of a check has a timeout and every wait a deadline, so a check ends; the
ceiling bounds the sum, whatever the target does (a target that makes every check wait
out its longest deadline could otherwise keep a run going for hours). The deadline is
fixed once, when the run starts (the controller's clock, handed to the xdist workers), and
each process enforces it around the checks it runs:

* a check that starts after the deadline is not run: its set-up raises
  :class:`RunCeilingPassed`, an error (the harness's, never the target's failure, never a
  pass), so its requirements are reported as not judged;
* a check still going at the deadline, in any phase (its fixtures' set-up, the check,
  their teardown), is stopped by a ``SIGALRM`` that raises the same exception there, an
  error too. One timer, armed around each phase; a teardown that starts past the deadline
  still gets :data:`TEARDOWN_GRACE_S` to release what the set-up took (servers, files).

:class:`RunCeilingPassed` derives from :class:`BaseException`: a check that catches
``Exception`` to judge a broken answer must not swallow it. Where ``SIGALRM`` cannot be
armed (not the main thread, or no such signal) the check runs to its own deadlines.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Generator, Iterator
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


def _can_alarm() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


#: How long a teardown may take once the deadline has passed: enough to stop a receiver
#: or remove a folder, bounded so that a teardown that hangs cannot hold the run.
TEARDOWN_GRACE_S = 10.0


@contextlib.contextmanager
def _armed(item: pytest.Item, phase: str, *, at_least: float = 0.001) -> Iterator[None]:
    """Raise :class:`RunCeilingPassed` in this phase of *item* if it is still going at the
    run's deadline (or *at_least* seconds from now, whichever is later)."""
    deadline = run_state(item.config).deadline
    if deadline is None or not _can_alarm():
        yield
        return
    words = _words(item.config)

    def stop(signum: int, frame: FrameType | None) -> None:
        raise RunCeilingPassed(f"stopped: {words} passed while this check ran ({phase})")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, max(deadline - time.time(), at_least))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    deadline = run_state(item.config).deadline
    if deadline is not None and time.time() >= deadline:
        raise RunCeilingPassed(f"not run: {_words(item.config)} had passed")
    with _armed(item, "its set-up"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    with _armed(item, "the check"):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    with _armed(item, "its teardown", at_least=TEARDOWN_GRACE_S):
        return (yield)
