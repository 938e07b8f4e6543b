"""Helpers of the fault matrix (``test_fault_matrix*.py``): the fault registry, runs of the
suite against the embedded reference (``suite_run.py``), and the judgement "was this fault
caught?".

Everything goes through the command lines users have: ``genapi-conformance faults --json``
for the registry and ``genapi-conformance run --fault NAME --only ID`` for a run, each in a
process of its own (forked from a server that has imported the suite, see
``fork_server.py``). The matrix thereby proves what a user would see, and it never shares a
process (an event loop, pytest's plugin manager, the hypothesis settings) with the test
run that drives it: pytest inside pytest in one process is a different thing from the
suite a user runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import zlib
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from suite_run import TAIL_CHARS, SuiteRun, run_suite

from conformance.run.cli import EXIT_FAILED

__all__ = [
    "FAULT_RUN_TIMEOUT_S",
    "FULL_RUN_TIMEOUT_S",
    "LOOKAHEAD",
    "PARTS",
    "SHARES",
    "FaultRuns",
    "RegisteredFault",
    "SuiteRun",
    "fault_is_caught_test",
    "fault_problem",
    "planned_faults",
    "registry",
    "run_suite",
    "share",
]

#: A run of the checks of one requirement: the reference's start (~1 s), the suite's start
#: and collection (~2 s) and a few checks, some of which wait out delivery deadlines.
FAULT_RUN_TIMEOUT_S = 180.0
#: The whole suite, timing-bound webhook chains included, on a loaded machine.
FULL_RUN_TIMEOUT_S = 840.0
_REGISTRY_TIMEOUT_S = 60.0
#: The faults are hashed into this many buckets; each module of the matrix takes some.
SHARES = 5
#: The buckets of each module: ``test_fault_matrix.py`` (which also holds the full run)
#: and ``test_fault_matrix_part2.py``.
PARTS: tuple[tuple[int, ...], ...] = ((0, 1), (2, 3, 4))
#: How many fault runs one module keeps going at once (see :class:`FaultRuns`): most of a
#: run's time is a wait (for a delivery deadline, a reference's start), so four overlap on
#: two cores without slowing each other much (with three, the cores were a third idle
#: while the matrix's modules ran beside the small ones).
LOOKAHEAD = 4


@dataclass(frozen=True)
class RegisteredFault:
    """One entry of the reference's fault registry, as ``faults --json`` lists it."""

    name: str
    requirement_id: str
    description: str


@cache
def registry() -> tuple[RegisteredFault, ...]:
    """The fault registry, read through ``genapi-conformance faults --json``.

    Read through the CLI rather than by importing ``reference.faults`` (which tests may
    do): the suite's side of the project only ever meets the reference as a process, and
    the matrix stays on that side, on the same path a user has. A test next to the matrix
    pins the listing to the registry itself.
    """
    done = subprocess.run(
        [sys.executable, "-m", "conformance.run.cli", "faults", "--json"],
        capture_output=True,
        text=True,
        timeout=_REGISTRY_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"`genapi-conformance faults --json` exited {done.returncode}: "
            f"{done.stderr[-TAIL_CHARS:]}"
        )
    rows: list[dict[str, str]] = json.loads(done.stdout)
    return tuple(
        RegisteredFault(row["name"], row["requirement_id"], row["description"]) for row in rows
    )


def planned_faults(request: pytest.FixtureRequest) -> list[RegisteredFault]:
    """The faults the tests of ``request``'s module will ask for, in the order they will:
    the session's selected items (after ``-k``, ``--deselect``) of that module.

    Under pytest-xdist with ``--dist loadfile`` (how the project runs) a module's items all
    go to one worker; other distributions would only start some runs ahead needlessly.
    """
    planned: list[RegisteredFault] = []
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if getattr(item, "module", None) is request.module and callspec is not None:
            fault = callspec.params.get("fault")
            if isinstance(fault, RegisteredFault):
                planned.append(fault)
    return planned


def share(
    faults: Sequence[RegisteredFault], buckets: Collection[int], of: int = SHARES
) -> list[RegisteredFault]:
    """The faults of one part of the matrix: those whose name hashes into ``buckets`` of
    ``of`` (a stable hash, so a fault stays in its part when others are added).

    The project runs its tests with ``--dist loadfile``: a test module is the unit
    pytest-xdist hands to a worker, so the matrix is spread over two modules, the one that
    also holds the full run taking the smaller share.
    """
    return [f for f in faults if zlib.crc32(f.name.encode()) % of in buckets]


def _checks_of(entry: dict[str, Any]) -> str:
    return "; ".join(f"{e['check']} -> {e['verdict']}" for e in entry["evidence"])


def fault_problem(fault: RegisteredFault, run: SuiteRun) -> str | None:
    """Why ``run`` (the checks of the fault's requirement, against the reference with the
    fault) does not show the fault caught; None when it is.

    Caught means the requirement's verdict is ``fail`` for a MUST and ``warn`` for an
    INTERPRETATION (the suite never fails a target for its own assumption), and, for a
    MUST, the run exits 1 as a user's CI would see it.
    """
    rid = fault.requirement_id
    label = f"fault {fault.name} ({rid}: {fault.description})"
    if run.results is None:
        return f"{label}: the run wrote no results.json{run.describe()}"
    entry = run.requirement(rid)
    if entry is None:
        return f"{label}: results.json has no entry for {rid}{run.describe()}"
    verdict = entry["verdict"]
    if not entry["evidence"]:
        return f"{label} has no check citing {rid} (verdict {verdict}: {entry['reason']})"
    expected = "fail" if entry["level"] == "MUST" else "warn"
    if entry.get("party") == "client":
        return (
            f"{label}: {rid} is a client's duty, which only the suite's own client can "
            f"break; a fault of the reference cannot be caught there"
        )
    if verdict != expected:
        return (
            f"{label} not caught: {rid} ({entry['level']}) got {verdict}, expected "
            f"{expected}: {entry['reason']}\n--- checks: {_checks_of(entry)}"
        )
    if expected == "fail" and run.returncode != EXIT_FAILED:
        return (
            f"{label}: {rid} failed but the run exited {run.returncode}, not "
            f"{EXIT_FAILED}{run.describe()}"
        )
    return None


class FaultRuns:
    """The runs of a module's faults, started ahead of the tests that judge them, at most
    ``lookahead`` at a time, in the order the tests will ask for them.

    Why: a fault that suppresses a webhook event makes its check wait out the whole
    delivery deadline (the profile's ``max_generation_seconds`` plus an attempt, ~40 s)
    while the machine idles; running the next fault meanwhile overlaps that wait with
    work. Each run is still its own reference with its one fault, as a user would start
    it, and its own process: a child of a fork server (``fork_server.py``) that imported
    the suite once, which spares each run the two seconds of CPU of those imports.
    Test *i* asks for run *i* after runs before it were collected, so run *i* is already
    going: a test waits at most one run's time.
    """

    def __init__(
        self, base: Path, faults: Sequence[RegisteredFault], lookahead: int = LOOKAHEAD
    ) -> None:
        self._base = base
        self._pool = ThreadPoolExecutor(max_workers=lookahead, thread_name_prefix="fault-run")
        self._lock = threading.Lock()
        self._futures: dict[str, Future[SuiteRun]] = {}
        for fault in faults:
            self._start(fault)

    def _start(self, fault: RegisteredFault) -> Future[SuiteRun]:
        with self._lock:
            future = self._futures.get(fault.name)
            if future is None:
                future = self._pool.submit(
                    run_suite,
                    self._base / fault.name / "report",
                    faults=[fault.name],
                    only=[fault.requirement_id],
                    workers=0,
                    timeout=FAULT_RUN_TIMEOUT_S,
                )
                self._futures[fault.name] = future
            return future

    def result(self, fault: RegisteredFault) -> SuiteRun:
        """The run of ``fault`` (started now if it was not planned), waited for with a
        deadline: the run's own timeout, plus the run ahead of it in the pool."""
        return self._start(fault).result(timeout=2 * FAULT_RUN_TIMEOUT_S)

    def close(self) -> None:
        """Drop the runs not started (a test selection or an interrupt ended early) and
        wait for the ones going: each is bounded by its subprocess timeout."""
        self._pool.shutdown(wait=True, cancel_futures=True)


def fault_is_caught_test(part: Sequence[int]) -> Callable[[RegisteredFault, FaultRuns], None]:
    """The test of one part of the matrix, parametrized with that part's faults; each
    module of the matrix binds it to a name pytest collects (``test_fault_is_caught``).
    The ``fault_runs`` fixture (``conftest.py``) starts the module's runs ahead."""

    @pytest.mark.slow
    @pytest.mark.timeout(2 * FAULT_RUN_TIMEOUT_S + 60)
    @pytest.mark.parametrize("fault", share(registry(), part), ids=lambda f: f.name)
    def test_fault_is_caught(fault: RegisteredFault, fault_runs: FaultRuns) -> None:
        """The reference with this one fault fails (MUST) or warns (INTERPRETATION) the
        requirement the fault names, in a run of only that requirement's checks."""
        problem = fault_problem(fault, fault_runs.result(fault))
        if problem is not None:
            pytest.fail(problem, pytrace=False)

    return test_fault_is_caught
