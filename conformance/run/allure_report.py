"""``genapi-conformance report allure RUN_DIR``: the Allure HTML report of a run.

The suite writes Allure *results* (``RUN_DIR/allure-results/``); the HTML is built by
Allure 3, the npm package ``allure``, which needs Node.js. Used, in this order: an
``allure`` executable given with ``--allure``, one in ``./node_modules/.bin`` (after
``npm install allure@3``), one on ``PATH``; else ``npx --yes allure@3`` (which downloads
the package once). The report goes to ``RUN_DIR/allure-report/`` (or ``--output``).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from conformance.reports import ALLURE_DIR

__all__ = ["ALLURE_REPORT_DIR", "allure_command", "build_allure_report", "register"]

#: Where the HTML goes by default, next to the results.
ALLURE_REPORT_DIR = "allure-report"
#: The longest an Allure build may take.
TIMEOUT_S = 600.0


def register(commands: Any) -> None:
    """Add ``report allure`` to the CLI's subcommands."""
    report = commands.add_parser("report", help="build a report of a finished run")
    kinds = report.add_subparsers(dest="kind", required=True)
    allure = kinds.add_parser(
        "allure",
        help="build the Allure HTML report (Allure 3, the npm package `allure`; needs Node)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    allure.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="a run's report folder")
    allure.add_argument("--output", type=Path, metavar="DIR", help="where the HTML goes")
    allure.add_argument("--allure", type=Path, metavar="EXE", help="the allure executable")
    allure.set_defaults(handler=_handle)


def _handle(options: argparse.Namespace) -> int:
    return build_allure_report(options.run_dir, options.output, options.allure)


def allure_command(explicit: Path | None = None, cwd: Path | None = None) -> list[str] | None:
    """The command that runs Allure 3 here, or None without Node (see the module)."""
    if explicit is not None:
        return [str(explicit)]
    local = (cwd or Path.cwd()) / "node_modules" / ".bin" / "allure"
    if local.is_file():
        return [str(local)]
    on_path = shutil.which("allure")
    if on_path is not None:
        return [on_path]
    npx = shutil.which("npx")
    return None if npx is None else [npx, "--yes", "allure@3"]


def build_allure_report(
    run_dir: Path, output: Path | None = None, allure: Path | None = None
) -> int:
    """Build the HTML; 0 when built, 2 when the folder or Node is missing, else Allure's."""
    results = run_dir / ALLURE_DIR
    if not results.is_dir():
        print(f"genapi-conformance: no {ALLURE_DIR}/ in {run_dir}", file=sys.stderr)
        return 2
    command = allure_command(allure)
    if command is None:
        print(
            "genapi-conformance: the Allure report needs Node.js (npx) and the npm package "
            "allure (Allure 3): install Node, then `npm install allure@3`",
            file=sys.stderr,
        )
        return 2
    target = (output or run_dir / ALLURE_REPORT_DIR).resolve()
    argv = [*command, "generate", str(results.resolve()), "--output", str(target)]
    try:
        done = subprocess.run(argv, check=False, timeout=TIMEOUT_S)  # noqa: S603
    except subprocess.TimeoutExpired:
        print(f"genapi-conformance: allure took over {TIMEOUT_S:.0f} s", file=sys.stderr)
        return 3
    if done.returncode == 0:
        print(f"allure report: {target / 'index.html'}")
    return done.returncode
