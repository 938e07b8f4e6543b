"""Runs of the suite as a user starts them: a process of its own, its exit code, its output
and the ``results.json`` it wrote.

A run is a child of this test process's fork server (``fork_server.shared``), and so are
the reference it starts and its pytest-xdist workers: each of those would otherwise spend
about two seconds of CPU importing what the server imported once. ``plain=True`` runs it
as a plain ``python -m`` subprocess instead, for the tests that prove that path.

The run works in the report directory's parent (nothing lands in the checkout), and
``GENAPI_PROFILE`` is dropped from its environment, so a run without ``--profile`` always
starts the embedded reference.

The runs cache their compiled modules (pytest's assertion-rewritten ones included) in one
folder outside the checkout, :data:`PYCACHE`, even where the environment says not to
write bytecode: the fault matrix starts hundreds of runs of the same code, and compiling
and rewriting it anew in each cost about two seconds of CPU per run.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fork_server

from conformance.run.launcher import REFERENCE_COMMAND_ENV
from conformance.run.plugin import WORKER_PYTHON_ENV

__all__ = [
    "PYCACHE",
    "TAIL_CHARS",
    "SuiteRun",
    "run_command",
    "run_env",
    "run_suite",
]

#: How much of a run's output a failure message quotes.
TAIL_CHARS = 2000
#: Where the runs keep their compiled modules (``PYTHONPYCACHEPREFIX``); a stale entry is
#: recompiled, as Python checks each against its source.
PYCACHE = Path(tempfile.gettempdir()) / "genapi-conformance-runs-pycache"
#: Dropped from a run's environment: the profile (see above), and the switch that would
#: stop it caching compiled modules.
_DROPPED = frozenset({"GENAPI_PROFILE", "PYTHONDONTWRITEBYTECODE"})


@dataclass(frozen=True)
class SuiteRun:
    """One run of the suite: its exit code, output and ``results.json`` (None if absent)."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    report_dir: Path
    results: dict[str, Any] | None

    def requirement(self, requirement_id: str) -> dict[str, Any] | None:
        """The entry of ``requirement_id`` in ``results.json`` (None when absent)."""
        if self.results is None:
            return None
        for entry in self.results["requirements"]:
            if entry["id"] == requirement_id:
                found: dict[str, Any] = entry
                return found
        return None

    def verdicts(self) -> dict[str, str]:
        """Requirement id -> verdict, from ``results.json`` (a run without one failed)."""
        assert self.results is not None, f"no results.json{self.describe()}"
        return {entry["id"]: entry["verdict"] for entry in self.results["requirements"]}

    def describe(self) -> str:
        """The command and the ends of its output, for a failure message."""
        return (
            f"\n--- command: {' '.join(self.argv[1:])} (exit {self.returncode})"
            f"\n--- stdout (end):\n{self.stdout[-TAIL_CHARS:]}"
            f"\n--- stderr (end):\n{self.stderr[-TAIL_CHARS:]}"
        )


def run_env() -> dict[str, str]:
    """The environment of a run (see the module's docstring)."""
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def run_command(
    argv: Sequence[str], report_dir: Path, *, timeout: float, plain: bool = False
) -> SuiteRun:
    """Run *argv* (``[python, "-m", MODULE, ...]``, a run of the suite that writes its
    reports to *report_dir*) as a child of this process's fork server, the reference it starts
    and its workers too; with *plain*, as a subprocess of its own."""
    env = run_env()
    report_dir.parent.mkdir(parents=True, exist_ok=True)
    if plain:
        done = subprocess.run(  # noqa: S603 (our own interpreter and module)
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=report_dir.parent,
            env=env,
            check=False,
        )
        returncode, stdout, stderr = done.returncode, done.stdout, done.stderr
    else:
        assert argv[1] == "-m", f"a fork server runs modules only: {argv}"
        server = fork_server.shared(env, suite=True)
        env[REFERENCE_COMMAND_ENV] = shlex.join(server.command("reference"))
        env[WORKER_PYTHON_ENV] = shlex.join(server.python())
        out, err = (report_dir.parent / f"{report_dir.name}.{n}.txt" for n in ("stdout", "stderr"))
        returncode = server.run(
            argv[2],
            argv[3:],
            cwd=report_dir.parent,
            env=env,
            stdout=out,
            stderr=err,
            timeout=timeout,
        )
        stdout, stderr = (path.read_text(encoding="utf-8", errors="replace") for path in (out, err))
    results_path = report_dir / "results.json"
    results: dict[str, Any] | None = None
    if results_path.is_file():
        results = json.loads(results_path.read_text(encoding="utf-8"))
    return SuiteRun(tuple(argv), returncode, stdout, stderr, report_dir, results)


def run_suite(
    report_dir: Path,
    *args: str,
    faults: Sequence[str] = (),
    only: Sequence[str] = (),
    workers: int | None = None,
    timeout: float,
    plain: bool = False,
) -> SuiteRun:
    """``genapi-conformance run`` in a process of its own (:func:`run_command`), with *args*
    (against the embedded reference unless they give a ``--profile``); ``workers=None``
    keeps the CLI's default, as users run it."""
    argv = [sys.executable, "-m", "conformance.run.cli", "run", "--report-dir", str(report_dir)]
    argv += args
    for name in faults:
        argv += ["--fault", name]
    for requirement_id in only:
        argv += ["--only", requirement_id]
    if workers is not None:
        argv += ["--workers", str(workers)]
    return run_command(argv, report_dir, timeout=timeout, plain=plain)
