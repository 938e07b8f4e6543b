"""Locust's processes for ``genapi-conformance load``: the master, its local workers, and
a worker on its own for a master elsewhere, every one bounded in time.

The master binds to loopback unless told otherwise, waits a bounded time for the workers
it expects, runs the test for the duration, collects the records each worker sends over
Locust's channel (``locustfile.py``) and writes them to a file in a scratch directory of
this machine, read here. A process still running past its bound is killed.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import conformance.load
from conformance.load import RECORDS_WAIT_S, Record

__all__ = [
    "GRACE_S",
    "MAX_DURATION_S",
    "MAX_WORKERS",
    "Collected",
    "Master",
    "plan_digest",
    "run_master",
    "run_worker",
]

#: Bound on ``--duration``.
MAX_DURATION_S = 600.0
#: Bound on the workers of one run, local and remote together.
MAX_WORKERS = 64
#: How long Locust's processes get past their other bounds to stop and exit.
GRACE_S = 30.0
#: Locust's master waits ``--stop-timeout`` (5 s here) plus 60 s for its workers to stop.
_STOP_BOUND_S = 5.0 + 60.0
#: What Locust's master logs when the workers it expects do not all connect in time.
_GAVE_UP = "Gave up waiting for workers to connect"
_LOG_TAIL_CHARS = 2_000


def _locust(*args: str) -> list[str]:
    locustfile = Path(conformance.load.__file__).resolve().parent / "locustfile.py"
    return [sys.executable, "-m", "locust", "-f", str(locustfile), "--loglevel", "WARNING", *args]


def plan_digest(plan: Mapping[str, str]) -> str:
    """A digest of what the users are told to send (roles and request, no secret): the
    master compares each worker's with its own, so a worker started with other options
    is caught rather than judged."""
    text = json.dumps(dict(plan), sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Master:
    """How the master runs: where it listens, which workers it waits for, the load."""

    bind_host: str
    port: int
    local_workers: int
    remote_workers: int
    users: int
    duration: float
    connect_timeout: float

    @property
    def workers(self) -> int:
        """The workers of the run, local and remote."""
        return self.local_workers + self.remote_workers


@dataclass(frozen=True)
class Collected:
    """The records every worker sent, or why there are none to judge."""

    records: list[Record]
    workers: int  # the workers whose records all arrived
    problem: str | None = None  # a harness error: nothing is judged
    workers_missing: str | None = None  # the workers expected never all connected
    #: Per role of key, how many workers sent records of it.
    workers_by_role: dict[str, int] = field(default_factory=dict)


def run_master(master: Master, env: Mapping[str, str]) -> Collected:
    """Run the master and the local workers to the end and collect the records."""
    with tempfile.TemporaryDirectory(prefix="genapi-load-") as scratch:
        out, log = Path(scratch) / "records.json", Path(scratch) / "master.log"
        master_env = {
            **env,
            "GENAPI_LOAD_OUT": str(out),
            "GENAPI_LOAD_DURATION": str(master.duration),
        }
        master_args = _locust(
            "--master",
            "--headless",
            f"--master-bind-host={master.bind_host}",
            f"--master-bind-port={master.port}",
            f"--expect-workers={master.workers}",
            f"--expect-workers-max-wait={int(master.connect_timeout)}",
            f"--users={master.users}",
            f"--spawn-rate={master.users}",
            "--stop-timeout=5",
            "--only-summary",
        )
        bound = master.connect_timeout + master.duration + _STOP_BOUND_S + RECORDS_WAIT_S
        with log.open("w", encoding="utf-8") as log_file:
            commands = [_Command(master_args, master_env, log_file)]
            commands += [
                _Command(_worker_args("127.0.0.1", master.port), dict(env))
                for _ in range(master.local_workers)
            ]
            # Exit statuses are not judged: whether every worker's records came is.
            problem = _run_all(commands, bound + GRACE_S)
        if problem is not None:
            return Collected([], 0, problem=f"Locust {problem}")
        if not out.exists():
            return _no_test(master, log.read_text(encoding="utf-8", errors="replace"))
        return _collected(json.loads(out.read_text(encoding="utf-8")), env)


def run_worker(host: str, port: int, env: Mapping[str, str], connect_timeout: float) -> str | None:
    """Run a worker of a master elsewhere until the master stops it; what went wrong, or
    None. Bounded by the longest run a master can ask for, past the wait to connect."""
    bound = connect_timeout + MAX_DURATION_S + _STOP_BOUND_S + RECORDS_WAIT_S + GRACE_S
    worker = _Command(_worker_args(host, port), dict(env))
    problem = _run_all([worker], bound)
    if problem is None and worker.returncode != 0:
        problem = f"exited with status {worker.returncode} (its log above says why)"
    return problem


def _worker_args(host: str, port: int) -> list[str]:
    return _locust("--worker", f"--master-host={host}", f"--master-port={port}")


@dataclass
class _Command:
    args: list[str]
    env: dict[str, str]
    stderr: IO[str] | None = None
    returncode: int | None = None


def _run_all(commands: Sequence[_Command], bound_s: float) -> str | None:
    """Run the commands together, each to its end within *bound_s*; past it, kill them."""
    deadline = time.monotonic() + bound_s
    processes = [
        subprocess.Popen(  # noqa: S603 (our own interpreter and arguments)
            command.args, env=command.env, stdout=subprocess.DEVNULL, stderr=command.stderr
        )
        for command in commands
    ]
    problem = None
    try:
        for command, process in zip(commands, processes, strict=True):
            try:
                command.returncode = process.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                problem = f"did not finish within {bound_s:.0f} s"
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
    return problem


def _no_test(master: Master, log: str) -> Collected:
    if _GAVE_UP in log:
        return Collected(
            [],
            0,
            workers_missing=f"{master.workers} workers expected, not all connected to the "
            f"master on {master.bind_host}:{master.port} within {master.connect_timeout:g} s",
        )
    return Collected([], 0, problem=f"Locust's master ran no test: {log[-_LOG_TAIL_CHARS:]}")


def _collected(data: dict[str, Any], env: Mapping[str, str]) -> Collected:
    expected = [str(node) for node in data["expected"]]
    workers: dict[str, dict[str, Any]] = data["workers"]
    records = [Record(*row) for row in data["records"]]
    lost = [node for node in expected if not workers.get(node, {}).get("complete")]
    if lost:
        return Collected(
            records,
            len(expected) - len(lost),
            problem=f"the records of {len(lost)} of {len(expected)} workers did not reach "
            f"the master within {RECORDS_WAIT_S:g} s of the stop",
        )
    own = env.get("GENAPI_LOAD_PLAN", "")
    other = [node for node in expected if workers[node].get("plan") != own]
    if other:
        return Collected(
            records,
            len(expected),
            problem=f"{len(other)} workers were started with other roles or another request "
            "than the master (give each worker the master's --key, --other-key, --daily-key "
            "and --path)",
        )
    roles = Counter(role for worker in workers.values() for role in worker.get("roles", []))
    return Collected(records, len(expected), workers_by_role=dict(roles))
