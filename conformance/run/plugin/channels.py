"""The run-wide comparison of a result's two channels (GEN-CONSIST-01): where every
process logs the final events it receives, and how the check that judges them runs last.

Every process of the run (each pytest-xdist worker, or the one process) has its own
receiver; each logs the final events it receives, as they arrive, to its own file in the
run's folder :data:`EVENTS_DIR` (:func:`log_path`). The run-wide check
(``test_every_final_event_agrees_with_the_read`` in :data:`LAST_MODULE`) reads every
file and compares each generation with one read. It is an ordinary check, so its verdict
reaches ``results.json``, the HTML report, JUnit and Allure like any other; what it needs
is to run after every other check, of every worker:

* in one process, :func:`order_last` moves :data:`LAST_MODULE`'s check to the end of the
  collection;
* under pytest-xdist there is no order across workers, so the controller's scheduler
  (:mod:`.schedule`, ``--dist loadfile``, what ``genapi-conformance run`` uses) holds
  :data:`LAST_MODULE` back until every other file's checks have ended on every worker,
  then gives it to one worker.

A verdict made by plugin code at the session's end on the controller was the other way;
it would have needed a result of its own outside pytest's reports (JUnit and Allure know
only checks that ran). With another ``--dist`` mode the check still runs, over what was
logged by then, and says how many generations it compared.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Final

import pytest

from conformance.run.plugin.citations import REQUIREMENTS_KEY
from conformance.run.plugin.state import run_state, scratch_folder, worker_name

__all__ = [
    "EVENTS_DIR",
    "LAST_MODULE",
    "events_dir",
    "is_last",
    "log_path",
    "order_last",
    "reset_events",
]

#: The folder, in the run's report folder, of the processes' final-event logs (removed
#: when the run ends: it holds nothing a report needs).
EVENTS_DIR: Final = ".final-events"
#: The check module that runs after every other: the run-wide check alone (any other
#: check in it would wait for the whole run too).
LAST_MODULE: Final = "test_run_consistency.py"


def events_dir(config: pytest.Config) -> Path:
    """The run's folder of final-event logs (shared by the workers: the report folder)."""
    return run_state(config).report_dir / EVENTS_DIR


def log_path(config: pytest.Config) -> Path:
    """This process's log of the final events its receiver gets (one file per worker)."""
    return events_dir(config) / f"{worker_name(config)}.jsonl"


def reset_events(config: pytest.Config) -> None:
    """Start the run with no logs and remove them at its end (:func:`scratch_folder`)."""
    scratch_folder(config, EVENTS_DIR)


def is_last(nodeid_or_scope: str) -> bool:
    return PurePosixPath(nodeid_or_scope.split("::", 1)[0]).name == LAST_MODULE


def order_last(items: list[pytest.Item]) -> None:
    """Move :data:`LAST_MODULE`'s checks (tests that cite requirements) to the end,
    keeping every other order."""
    last = [i for i in items if REQUIREMENTS_KEY in i.stash and is_last(i.nodeid)]
    if last:
        items[:] = [i for i in items if i not in last] + last
