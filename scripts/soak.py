"""The soak: the suite run N times in a row against the embedded reference, and per check
how often its outcome changed from one run to the next (a flake), with each run's wall
time and the machine's load. A command, not a test: ``bash scripts/soak N [run args]``.

Extra arguments go to every ``genapi-conformance run`` (``--only``, ``--area``, ``-k``,
``--workers``), so a soak of a part is cheap. Every run has a ceiling (``--ceiling``, 1 h):
a run that passes it is killed and counted, never waited for. The summary is printed and
written, with every run's ``results.json``, under the soak's directory.

``--burn N`` soaks under load: N processes spin on the CPU for the whole soak (each
bounded by the soak's own ceiling, and stopped when it ends), as a shared CI runner would.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def _run(index: int, out: Path, extra: list[str], ceiling: float) -> dict[str, Any]:
    report_dir = out / f"run-{index:03d}"
    argv = [sys.executable, "-m", "conformance.run.cli", "run", "-q"]
    argv += ["--report-dir", str(report_dir), *extra]
    env = {k: v for k, v in os.environ.items() if k != "GENAPI_PROFILE"}
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    try:
        done = subprocess.run(  # noqa: S603 (our own interpreter and module)
            argv, capture_output=True, text=True, timeout=ceiling, env=env, check=False
        )
        code: int | None = done.returncode
        tail = done.stderr[-800:]
    except subprocess.TimeoutExpired:
        code, tail = None, f"killed at the ceiling of {ceiling:g} s"
    wall = time.monotonic() - started
    results_path = report_dir / "results.json"
    outcomes: dict[str, str] = {}
    if results_path.is_file():
        results = json.loads(results_path.read_text(encoding="utf-8"))
        outcomes = {check["nodeid"]: check["outcome"] for check in results["checks"]}
    return {
        "run": index,
        "exit": code,
        "wall_seconds": round(wall, 1),
        "load_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "outcomes": outcomes,
        # A run that wrote no results broke (or was killed): its stderr says why.
        "broke": None if outcomes else tail,
    }


#: A CPU burner: spins until its bound (seconds, argv[1]) passes.
_BURNER = (
    "import sys, time\n"
    "end = time.monotonic() + float(sys.argv[1])\n"
    "while time.monotonic() < end:\n"
    "    pass\n"
)


def _burners(count: int, bound: float) -> list[subprocess.Popen[bytes]]:
    return [
        subprocess.Popen([sys.executable, "-c", _BURNER, str(bound)])  # noqa: S603
        for _ in range(count)
    ]


def _flakes(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per check whose outcome was not the same in every run: its changes and outcomes."""
    checks = sorted({nodeid for run in runs for nodeid in run["outcomes"]})
    flaky: dict[str, dict[str, Any]] = {}
    for nodeid in checks:
        seen = [run["outcomes"].get(nodeid, "absent") for run in runs]
        changes = sum(1 for a, b in itertools.pairwise(seen) if a != b)
        if changes:
            flaky[nodeid] = {"changes": changes, "outcomes": dict(Counter(seen))}
    return flaky


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="scripts/soak", description=__doc__)
    parser.add_argument("runs", type=int, help="how many runs in a row (e.g. 20)")
    parser.add_argument("--out", type=Path, help="where the runs go (default reports/soak-TS)")
    parser.add_argument("--ceiling", type=float, default=3600.0, help="seconds one run may take")
    parser.add_argument(
        "--burn", type=int, default=0, metavar="N", help="N processes keep the CPU busy meanwhile"
    )
    args, extra = parser.parse_known_args(argv)
    if args.runs < 1:
        parser.error("give at least one run")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out: Path = args.out or Path("reports") / f"soak-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    runs = []
    burners = _burners(args.burn, args.runs * args.ceiling)
    try:
        for index in range(1, args.runs + 1):
            run = _run(index, out, extra, args.ceiling)
            runs.append(run)
            counts = Counter(run["outcomes"].values())
            print(
                f"run {index}/{args.runs}: exit {run['exit']}, {run['wall_seconds']} s, "
                f"load {run['load_1min'][0]} -> {run['load_1min'][1]}, {dict(counts)}",
                flush=True,
            )
    finally:
        for burner in burners:
            burner.kill()
            burner.wait(timeout=10)
    flaky = _flakes(runs)
    summary = {
        "runs": len(runs),
        "extra_args": extra,
        "burners": args.burn,
        "cores": os.cpu_count(),
        "wall_seconds": [run["wall_seconds"] for run in runs],
        "load_1min": [run["load_1min"] for run in runs],
        "exits": [run["exit"] for run in runs],
        "broken_runs": {run["run"]: run["broke"] for run in runs if run["broke"] is not None},
        "checks": len({nodeid for run in runs for nodeid in run["outcomes"]}),
        "flaky_checks": flaky,
    }
    (out / "soak.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(f"{len(flaky)} of {summary['checks']} checks changed outcome across {len(runs)} runs")
    for nodeid, seen in flaky.items():
        print(f"  {seen['changes']} changes {seen['outcomes']}: {nodeid}")
    for index, why in summary["broken_runs"].items():
        print(f"  run {index} wrote no results: {why}")
    print(f"summary: {out / 'soak.json'}")
    return 1 if flaky or summary["broken_runs"] else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
