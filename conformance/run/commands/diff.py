"""``genapi-conformance diff RUN_A RUN_B``: the requirements whose verdict changed.

Each change shows the verdict before and after and RUN_B's reason for its verdict.

Each run is its report folder or its ``results.json``. Exit 0 when no verdict changed,
1 when some did (like ``diff``), 2 when a run cannot be read.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from conformance.catalog import load_catalog
from conformance.run.baseline import BaselineError, changed_verdicts, run_results
from conformance.run.commands import EXIT_FAILED, EXIT_OK
from conformance.run.commands.common import fail, printable, subcommand

__all__ = ["main", "register"]

#: What ``--help`` says of the command (one line in the list, then its own page).
HELP = "the requirements whose verdict changed between two runs"
DESCRIPTION = "Compare two runs' results.json. Exit 0 no change, 1 changes, 2 error."

#: How a verdict missing from one run is shown.
ABSENT = "-"


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("before", type=Path, metavar="RUN_A", help="report folder or its JSON")
    parser.add_argument("after", type=Path, metavar="RUN_B", help="report folder or its JSON")
    parser.add_argument("--json", action="store_true", help="print the changes as JSON")


def main(options: argparse.Namespace) -> int:
    try:
        before, after = run_results(options.before), run_results(options.after)
    except BaselineError as error:
        return fail(error)
    changes = changed_verdicts(
        {i: verdict for i, (verdict, _) in before.items()},
        {i: verdict for i, (verdict, _) in after.items()},
        {i: reason for i, (_, reason) in after.items()},
    )
    if options.json:
        print(json.dumps([vars(change) for change in changes], indent=2))
    else:
        catalog = load_catalog()
        for change in changes:
            requirement = catalog.get(change.id)
            level = requirement.level.value if requirement else "?"
            print(
                f"{change.id:20} {change.before or ABSENT:>12} -> {change.after or ABSENT:<12}"
                f" {level}"
            )
            if change.reason:
                # The reason is the target's words as the run recorded them: one line.
                print(f"    now: {printable(change.reason)}")
        print(f"{len(changes)} requirements changed verdict")
    return EXIT_FAILED if changes else EXIT_OK


#: Adds the subcommand to the CLI (:func:`~conformance.run.commands.common.subcommand`).
register = subcommand("diff", HELP, DESCRIPTION, _arguments, main)
