"""The run-wide comparison of a result's two channels (GEN-CONSIST-01): where every
process logs the final events it receives, and how the check that judges them runs last.

Every process of the run (each pytest-xdist worker, or the one process) has its own
receiver; each logs the final events it receives, as they arrive, to its own file in the
run's folder :data:`EVENTS_DIR` (:func:`log_path`). The run-wide check
(``test_every_final_event_agrees_with_the_read`` in :data:`LAST_MODULE`) reads every
file and compares each generation with one read. It is an ordinary check, so its verdict
reaches ``results.json``, the HTML report, JUnit and Allure like any other; what it needs
is to run after every other check, of every worker:

* in one process, :func:`order_last` moves :data:`LAST_MODULE`'s checks to the end of the
  collection (the run-wide check is the module's last);
* under pytest-xdist there is no order across workers, so the controller schedules with
  :func:`last_file_scheduling` (``--dist loadfile``, what ``genapi-conformance run``
  uses): it holds :data:`LAST_MODULE` back until every other file's checks have ended on
  every worker, shutting the other workers down, then gives it to one worker. A worker
  runs a check only once it knows the next one (or that none follows), which is why the
  others are shut down rather than waited for while they hold their last check.

A verdict made by plugin code at the session's end on the controller was the other way;
it would have needed a result of its own outside pytest's reports (JUnit and Allure know
only checks that ran). With another ``--dist`` mode the check still runs, over what was
logged by then, and says how many generations it compared.
"""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path, PurePosixPath
from typing import Any, Final

import pytest

from conformance.run.plugin.citations import REQUIREMENTS_KEY
from conformance.run.plugin.state import run_state

__all__ = [
    "EVENTS_DIR",
    "LAST_MODULE",
    "events_dir",
    "last_file_scheduling",
    "log_path",
    "order_last",
    "reset_events",
    "scheduler",
]

#: The folder, in the run's report folder, of the processes' final-event logs (removed
#: when the run ends: it holds nothing a report needs).
EVENTS_DIR: Final = ".final-events"
#: The check module that runs after every other (it holds the run-wide check).
LAST_MODULE: Final = "test_generation_state.py"


def events_dir(config: pytest.Config) -> Path:
    """The run's folder of final-event logs (shared by the workers: the report folder)."""
    return run_state(config).report_dir / EVENTS_DIR


def log_path(config: pytest.Config) -> Path:
    """This process's log of the final events its receiver gets (one file per worker)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return events_dir(config) / f"{worker}.jsonl"


def reset_events(config: pytest.Config) -> None:
    """Start the run with no logs (a reused report folder keeps an earlier run's) and
    remove them at its end; only the controller (or the one process) does this."""
    if run_state(config).is_worker:
        return
    folder = events_dir(config)
    shutil.rmtree(folder, ignore_errors=True)
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


def _is_last(nodeid_or_scope: str) -> bool:
    return PurePosixPath(nodeid_or_scope.split("::", 1)[0]).name == LAST_MODULE


def order_last(items: list[pytest.Item]) -> None:
    """Move :data:`LAST_MODULE`'s checks (tests that cite requirements) to the end,
    keeping every other order."""
    last = [i for i in items if REQUIREMENTS_KEY in i.stash and _is_last(i.nodeid)]
    if last:
        items[:] = [i for i in items if i not in last] + last


@functools.cache
def last_file_scheduling() -> type[Any]:
    """The ``--dist loadfile`` scheduling that runs :data:`LAST_MODULE` last, made on
    first use: pytest-xdist is imported only by a controller that schedules (imported
    with this plugin, it would be too early for pytest to rewrite its asserts)."""
    from xdist.scheduler import LoadFileScheduling  # type: ignore[import-untyped]

    class LastFileScheduling(LoadFileScheduling):  # type: ignore[misc]
        """``--dist loadfile`` that runs :data:`LAST_MODULE` after every other file.

        While other files remain it is kept at the end of the queue; once it is all that
        remains, one worker (the *keeper*) is kept for it and every other worker is shut
        down as soon as it holds at most its last check (so it runs that one and ends);
        when no other worker has a check left, the keeper gets the file.
        """

        def __init__(self, config: pytest.Config, log: Any = None) -> None:
            super().__init__(config, log)
            self._keeper: Any = None

        def _held(self) -> str | None:
            return next((scope for scope in self.workqueue if _is_last(scope)), None)

        def _assign_work_unit(self, node: Any) -> None:
            held = self._held()
            if held is None:
                super()._assign_work_unit(node)
                return
            self.workqueue.move_to_end(held)
            if len(self.workqueue) > 1:
                super()._assign_work_unit(node)
                return
            keeper = self._keeper
            if keeper is None or keeper not in self.assigned_work or keeper.shutting_down:
                self._keeper = node
            for other in self.nodes:
                pending = self._pending_of(self.assigned_work.get(other, {}))
                if other is not self._keeper and not other.shutting_down and pending <= 1:
                    other.shutdown()
            self._release()

        def _reschedule(self, node: Any) -> None:
            super()._reschedule(node)
            self._release()

        def _release(self) -> None:
            """Give the held file to the keeper once no other worker has a check left."""
            keeper = self._keeper
            if self._held() is None or len(self.workqueue) > 1 or keeper is None:
                return
            if keeper not in self.assigned_work or keeper.shutting_down:
                return
            others = [n for n in self.nodes if n is not keeper]
            if any(self._pending_of(self.assigned_work.get(n, {})) for n in others):
                return
            super()._assign_work_unit(keeper)

    return LastFileScheduling


def scheduler(config: pytest.Config, log: Any) -> Any:
    """The controller's scheduler for ``--dist loadfile`` (None: xdist's own)."""
    if config.getvalue("dist") != "loadfile":
        return None
    return last_file_scheduling()(config, log)
