"""``genapi-conformance requirements``: browse the catalog and what verifies each entry.

Each requirement with its level, statement and spec quote, the checks that cite it (from
pytest's collection of the checks, none of which runs: :mod:`conformance.run.check_index`;
``--profile`` adds the cases that depend on the target's keys) and the reference faults
that prove those checks catch a violation (from ``python -m reference faults --json``, run as
a process: the suite never imports the reference; left out when it is not installed).

The last line counts the observable MUST requirements of the service that no check
cites: the catalog is fully covered when it reads 0.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from conformance.catalog import Catalog, Level, Party, Requirement, load_catalog
from conformance.run.check_index import CollectError, checks_by_requirement
from conformance.run.commands import EXIT_FAILED, EXIT_OK
from conformance.run.commands.common import fail, subcommand

__all__ = ["faults_by_requirement", "main", "register", "uncovered_musts"]

#: What ``--help`` says of the command (one line in the list, then its own page).
HELP = "list and search the requirements, their checks and faults"
DESCRIPTION = (
    "List the catalog's requirements with the checks that cite them and "
    "the reference faults those checks catch. Filters combine (all must hold)."
)

#: How long listing the reference's faults may take.
FAULTS_TIMEOUT_S = 60.0


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pattern", nargs="?", help="id pattern, e.g. 'DLV-*' or 'RATE-RPM-0?'")
    parser.add_argument("--level", choices=[level.value for level in Level])
    parser.add_argument("--area", action="append", default=[], metavar="AREA")
    parser.add_argument(
        "--search", metavar="TEXT", help="case-insensitive text in statement, quote or notes"
    )
    parser.add_argument("--untested", action="store_true", help="only those no check cites")
    parser.add_argument(
        "--unobservable", action="store_true", help="only those marked observable: false"
    )
    parser.add_argument("--json", action="store_true", help="print JSON (a list of entries)")
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="FILE",
        help="collect with this target profile: the cases that depend on its keys count too",
    )
    parser.add_argument("--no-faults", action="store_true", help="do not list the faults")


def faults_by_requirement() -> dict[str, list[str]] | None:
    """Requirement id → names of the reference faults that violate it; None when the
    reference cannot be asked (not installed)."""
    try:
        listed = subprocess.run(
            [sys.executable, "-m", "reference", "faults", "--json"],
            capture_output=True,
            check=True,
            timeout=FAULTS_TIMEOUT_S,
        )
        rows = json.loads(listed.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    faults: dict[str, list[str]] = {}
    for row in rows:
        faults.setdefault(row["requirement_id"], []).append(row["name"])
    return faults


def _counted(requirement: Requirement) -> bool:
    """Whether the coverage count holds *requirement*: a MUST of the service that a
    black-box check can observe."""
    return (
        requirement.level is Level.MUST
        and requirement.party is Party.SERVICE
        and requirement.observable
    )


def uncovered_musts(catalog: Catalog, checks: Mapping[str, tuple[str, ...]]) -> list[str]:
    """The observable MUST requirements of the service that no check cites."""
    return [r.id for r in catalog if _counted(r) and not checks.get(r.id)]


def _selected(requirement: Requirement, options: argparse.Namespace, cited: bool) -> bool:
    if options.pattern and not fnmatch.fnmatchcase(requirement.id, options.pattern.upper()):
        return False
    if options.level and requirement.level.value != options.level:
        return False
    if options.area and requirement.area not in options.area:
        return False
    if options.untested and (cited or not requirement.observable):
        return False
    if options.unobservable and requirement.observable:
        return False
    if options.search:
        text = " ".join([requirement.statement, *requirement.quotes, requirement.notes or ""])
        return options.search.lower() in text.lower()
    return True


def _entry(
    requirement: Requirement, checks: tuple[str, ...], faults: list[str] | None
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": requirement.id,
        "level": requirement.level.value,
        "area": requirement.area,
        "section": requirement.section,
        "party": requirement.party.value,
        "statement": requirement.statement,
        "quotes": list(requirement.quotes),
        "observable": requirement.observable,
        "checks": list(checks),
    }
    if not requirement.observable:
        entry["unobservable_reason"] = requirement.unobservable_reason
    if faults is not None:
        entry["faults"] = faults
    return entry


def _text(entry: Mapping[str, Any]) -> str:
    lines = [f"{entry['id']}  {entry['level']}  §{entry['section']}  {entry['statement']}"]
    lines += [f"    quote: {quote}" for quote in entry["quotes"]]
    if not entry["observable"]:
        lines.append(f"    not observable: {entry['unobservable_reason']}")
    elif entry["checks"]:
        lines += [f"    check: {check}" for check in entry["checks"]]
    else:
        lines.append("    check: none (untested)")
    if "faults" in entry:
        lines.append("    faults: " + (", ".join(entry["faults"]) or "none"))
    return "\n".join(lines)


def main(options: argparse.Namespace) -> int:
    catalog = load_catalog()
    unknown = [area for area in options.area if area not in catalog.areas]
    if unknown:
        return fail(f"unknown area {', '.join(unknown)}")
    try:
        checks = checks_by_requirement(options.profile)
    except CollectError as error:
        return fail(error, EXIT_FAILED)
    faults = None if options.no_faults else faults_by_requirement()
    entries = [
        _entry(r, checks.get(r.id, ()), None if faults is None else faults.get(r.id, []))
        for r in catalog
        if _selected(r, options, bool(checks.get(r.id)))
    ]
    uncovered = uncovered_musts(catalog, checks)
    if options.json:
        print(json.dumps({"requirements": entries, "uncovered_musts": uncovered}, indent=2))
        return EXIT_OK
    for entry in entries:
        print(_text(entry))
    print(
        f"{len(entries)} of {len(catalog)} requirements shown; "
        f"observable MUST requirements without a check: {len(uncovered)}"
        + (f" ({', '.join(uncovered)})" if uncovered else "")
    )
    return EXIT_OK


#: Adds the subcommand to the CLI (:func:`~conformance.run.commands.common.subcommand`).
register = subcommand("requirements", HELP, DESCRIPTION, _arguments, main)
