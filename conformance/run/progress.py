"""Progress of a run on stderr, while pytest's own output goes to a file.

On a terminal: a live bar (rich), redrawn as checks finish. Anywhere else (a CI log): one
plain line every :data:`INTERVAL_S` seconds, never redrawn, never wrapped: checks done of
the total, the tally so far, the checks still running for long (the delivery timing
chains, which hold a check for minutes) and an estimate of the time left. ``--quiet``
shows nothing; ``-v`` adds a line for each check that does not pass, as it finishes.

The tally counts checks by their one verdict (what JUnit and Allure show), read from the
teardown report of each check (:func:`~conformance.run.plugin.results.reported_verdict`).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import pytest
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from conformance.run.plugin.results import reported_verdict

__all__ = ["INTERVAL_S", "RunProgress", "duration_text"]

#: Seconds between two progress lines in a log.
INTERVAL_S = 10.0
#: A check running longer than this is named in a progress line (at most _MAX_NAMED).
_LONG_RUNNING_S = 20.0
_MAX_NAMED = 3
#: Tally order and words.
_WORDS = {"fail": "failed", "error": "errors", "warn": "warned", "skip": "skipped"}


def duration_text(seconds: float) -> str:
    """``42s``, ``6m05s``, ``1h02m``."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


class RunProgress:
    """A pytest plugin (the controller's side) that shows how far the run is."""

    def __init__(
        self,
        stream: TextIO,
        *,
        live: bool,
        quiet: bool = False,
        verbose: bool = False,
        interval: float = INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.quiet, self.verbose, self.interval, self.clock = quiet, verbose, interval, clock
        self.total: int | None = None
        self.done = 0
        self.tally: Counter[str] = Counter()
        self.running: dict[str, float] = {}
        self.started = clock()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        self._bar: Progress | None = None
        if live and not quiet:
            self._bar = Progress(
                TextColumn("checks"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[tally]}"),
                TimeElapsedColumn(),
                console=Console(file=stream, highlight=False),
                auto_refresh=False,  # refreshed per report: no thread writing during a check
                transient=True,
            )
            self._task = self._bar.add_task("checks", total=None, tally="")

    # pytest hooks

    def pytest_sessionstart(self) -> None:
        self.started = self.clock()
        if self._bar is not None:
            self._bar.start()
        elif not self.quiet:
            self._ticker = threading.Thread(target=self._tick, name="progress", daemon=True)
            self._ticker.start()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if session.items:  # under xdist the controller collects nothing: see below
            self._set_total(len(session.items))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        self._set_total(len(ids))

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        with self._lock:
            self.running[nodeid] = self.clock()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        verdict = reported_verdict(report) or ("error" if report.failed else None)
        with self._lock:
            self.done += 1
            self.running.pop(report.nodeid, None)
            if verdict is not None:
                self.tally[verdict] += 1
        if self.verbose and verdict in _WORDS:
            self._say(f"{verdict.upper():5} {report.nodeid}")
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, tally=self._tally_text())
            self._bar.refresh()

    def pytest_sessionfinish(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=self.interval + 1.0)
        if self._bar is not None:
            self._bar.stop()

    # what is shown

    def line(self) -> str:
        """One progress line: done/total, tally, long-running checks, time left."""
        now = self.clock()
        with self._lock:
            done, total = self.done, self.total
            tally = self._tally_text()
            running = sorted(self.running.items(), key=lambda item: item[1])
        elapsed = now - self.started
        parts = [f"[{duration_text(elapsed):>6}] checks {done}/{total if total else '?'}"]
        if tally:
            parts.append(tally)
        long_running = [(n, now - t) for n, t in running if now - t >= _LONG_RUNNING_S]
        if long_running:
            named = ", ".join(f"{n} ({duration_text(s)})" for n, s in long_running[:_MAX_NAMED])
            more = len(long_running) - _MAX_NAMED
            parts.append(f"running long: {named}" + (f" and {more} more" if more > 0 else ""))
        if total and 0 < done < total:
            parts.append(f"ETA {duration_text(elapsed / done * (total - done))}")
        return "; ".join(parts)

    def _tally_text(self) -> str:
        return ", ".join(f"{self.tally[v]} {w}" for v, w in _WORDS.items() if self.tally[v])

    def _set_total(self, total: int) -> None:
        with self._lock:
            self.total = total
        if self._bar is not None:
            self._bar.update(self._task, total=total)
            self._bar.refresh()

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            self._say(self.line())

    def _say(self, text: str) -> None:
        if self._bar is not None:
            self._bar.console.print(text, markup=False, highlight=False, soft_wrap=True)
            return
        with self._lock:
            self.stream.write(text + "\n")
            self.stream.flush()
