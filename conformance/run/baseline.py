"""Known failures (``run --baseline FILE``) and the verdicts that changed between two runs.

A baseline lists the requirements a target is known to fail, each with why::

    # baseline.toml
    [[known]]
    id = "DLV-TIMEOUT-01"
    reason = "the proxy in front of staging holds replies; ticket OPS-42"

or in YAML, the same entries as a list (``- {id: ..., reason: ...}``) or under ``known:``.

Judged against a run's verdicts (:func:`judge_baseline`): a failure the baseline lists is
*known* and does not fail the run; a failure it does not list is *new* and does; an entry
whose requirement now passes is *stale* and fails the run too, so that the list is pruned
as fixes land and cannot rot. An entry whose requirement was not judged this time
(skipped, untested, outside the selection) is neither: it stays. An entry excuses only
its own requirement's failure: never another requirement's, never a harness error (a
listed requirement whose checks also errored is not known; :func:`judge_run`). With
``--strict`` a warning is a failure, so a baseline may list interpretations too.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from conformance.catalog import Catalog
from conformance.verdicts import Outcome, RunVerdicts

__all__ = [
    "Baseline",
    "BaselineError",
    "BaselineOutcome",
    "VerdictChange",
    "changed_verdicts",
    "judge_baseline",
    "judge_run",
    "load_baseline",
    "record_baseline",
    "run_results",
    "run_verdicts",
]


class BaselineError(ValueError):
    """The baseline file cannot be read or names what the catalog does not know."""


@dataclass(frozen=True)
class Baseline:
    """Known failures: requirement id → why it fails; where the list came from."""

    path: Path
    known: Mapping[str, str]
    sha256: str = ""


def _entries(document: Any) -> list[Any]:
    if isinstance(document, dict):
        document = document.get("known", None)
    if not isinstance(document, list):
        raise BaselineError("expected a list of {id, reason} entries (or under 'known')")
    return document


def load_baseline(path: Path, catalog: Catalog) -> Baseline:
    """Read a TOML (``.toml``) or YAML baseline; every entry names a catalog id once and
    says why."""
    try:
        text = path.read_text(encoding="utf-8")
        document = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
    except (OSError, tomllib.TOMLDecodeError, yaml.YAMLError) as error:
        raise BaselineError(f"{path}: {error}") from error
    known: dict[str, str] = {}
    try:
        entries = _entries(document)
    except BaselineError as error:
        raise BaselineError(f"{path}: {error}") from None
    for index, entry in enumerate(entries, 1):
        where = f"{path}: entry {index}"
        if not isinstance(entry, dict) or set(entry) != {"id", "reason"}:
            raise BaselineError(f"{where}: expected exactly the keys id and reason")
        requirement_id, reason = entry["id"], entry["reason"]
        if not isinstance(reason, str) or not reason.strip():
            raise BaselineError(f"{where}: a known failure says why (reason)")
        if requirement_id not in catalog:
            raise BaselineError(f"{where}: {requirement_id!r} is not a catalog id")
        if requirement_id in known:
            raise BaselineError(f"{where}: {requirement_id} is listed twice")
        known[requirement_id] = reason.strip()
    return Baseline(path, known, hashlib.sha256(text.encode("utf-8")).hexdigest())


@dataclass(frozen=True)
class BaselineOutcome:
    """A run's failures sorted against a baseline (ids in catalog order).

    ``errored``: listed requirements that failed and whose checks also hit a harness
    error; a failure hides the error in the requirement's verdict (fail is worse than
    error), so the entry must not excuse it: they count as not known.
    """

    baseline: Baseline
    known: tuple[str, ...]
    new: tuple[str, ...]
    stale: tuple[str, ...]
    errored: tuple[str, ...] = ()

    @property
    def excuses_failures(self) -> bool:
        """Every failure of the run is a listed one, and none hides a harness error."""
        return not self.new and not self.errored

    @property
    def accepted(self) -> bool:
        """No failure outside the baseline, no harness error behind a listed one and no
        entry gone stale."""
        return self.excuses_failures and not self.stale

    def lines(self) -> list[str]:
        """The summary's words for it."""
        head = "accepted" if self.accepted else "not accepted"
        lines = [
            f"baseline {self.baseline.path}: {head}: {len(self.known)} known failures, "
            f"{len(self.new)} new, {len(self.stale)} stale"
        ]
        lines += [f"  new failure (not in the baseline): {i}" for i in self.new]
        lines += [
            f"  harness error behind a listed failure (never excused): {i}" for i in self.errored
        ]
        lines += [
            f"  stale entry (now passes, remove it from the baseline): {i}" for i in self.stale
        ]
        lines += [f"  known failure: {i} ({self.baseline.known[i]})" for i in self.known]
        return lines


def judge_baseline(
    baseline: Baseline,
    verdicts: Mapping[str, str],
    *,
    strict: bool = False,
    errored: Iterable[str] = (),
) -> BaselineOutcome:
    """Sort *verdicts* (requirement id → verdict value) against *baseline*: only a failing
    requirement that the baseline names is known. *errored*: requirements one of whose
    checks hit a harness error; a listed one is never known."""
    failing = {"fail", "warn"} if strict else {"fail"}
    failed = [i for i, verdict in verdicts.items() if verdict in failing]
    broken = set(errored)
    listed = [i for i in failed if i in baseline.known]
    return BaselineOutcome(
        baseline,
        known=tuple(i for i in listed if i not in broken),
        new=tuple(i for i in failed if i not in baseline.known),
        stale=tuple(i for i in verdicts if i in baseline.known and verdicts[i] == "pass"),
        errored=tuple(i for i in listed if i in broken),
    )


def judge_run(baseline: Baseline, run: RunVerdicts, *, strict: bool = False) -> BaselineOutcome:
    """:func:`judge_baseline` on a finished run's verdicts and its checks' harness errors."""
    return judge_baseline(
        baseline,
        {rv.requirement.id: rv.verdict.value for rv in run.requirements},
        strict=strict,
        errored=[
            rv.requirement.id
            for rv in run.requirements
            if any(check.outcome is Outcome.ERROR for check in rv.checks)
        ],
    )


def record_baseline(results_path: Path, outcome: BaselineOutcome) -> None:
    """Add the outcome to the run's ``results.json`` (under ``baseline``; an attestation of
    the run carries it): the file's name and digest, its entries and how they sorted."""
    document = json.loads(results_path.read_text(encoding="utf-8"))
    document["baseline"] = {
        "file": outcome.baseline.path.name,
        "sha256": outcome.baseline.sha256,
        "known_failures": dict(outcome.baseline.known),
        "accepted": outcome.accepted,
        "known": list(outcome.known),
        "new": list(outcome.new),
        "stale": list(outcome.stale),
        "errored": list(outcome.errored),
    }
    text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
    results_path.write_text(text, encoding="utf-8")


def run_results(run: Path) -> dict[str, tuple[str, str | None]]:
    """Requirement id → (verdict, reason) of a finished run: its folder or its
    ``results.json``."""
    path = run / "results.json" if run.is_dir() else run
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        return {
            entry["id"]: (entry["verdict"], entry.get("reason") or None)
            for entry in document["requirements"]
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise BaselineError(f"{path}: not a run's results.json ({error})") from error


def run_verdicts(run: Path) -> dict[str, str]:
    """Requirement id → verdict of a finished run: its folder or its ``results.json``."""
    return {i: verdict for i, (verdict, _) in run_results(run).items()}


@dataclass(frozen=True)
class VerdictChange:
    """One requirement whose verdict differs; None where a run did not have it.
    ``reason``: the later run's reason for its verdict, when it gives one."""

    id: str
    before: str | None
    after: str | None
    reason: str | None = None


def changed_verdicts(
    before: Mapping[str, str],
    after: Mapping[str, str],
    reasons: Mapping[str, str | None] | None = None,
) -> list[VerdictChange]:
    """The requirements whose verdict differs between two runs, in *before*'s order and
    then *after*'s new ids; each with its reason in *after* (*reasons*, by id)."""
    ids: Iterable[str] = [*before, *(i for i in after if i not in before)]
    return [
        VerdictChange(i, before.get(i), after.get(i), (reasons or {}).get(i))
        for i in ids
        if before.get(i) != after.get(i)
    ]
