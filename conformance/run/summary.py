"""The end of ``genapi-conformance run`` on stdout: what a CI log keeps of a run.

Plain lines, never wrapped or cut (a log is read in a browser, not an 80-column
terminal; colour only on a terminal): the verdict, the requirement counts, the check
counts (the same as ``junit.xml``'s suite counts: each check counted once, by its one
verdict), the duration, each failed, errored and warned requirement with its one-line
reason, a line that reruns the failures against the same target, and where
``report.html`` is. ``--quiet`` keeps the verdict, the counts and the report's path;
``-v`` also lists skipped and untested requirements.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.text import Text

from conformance.catalog import Catalog
from conformance.reports import ALLURE_DIR, HTML_NAME, JSON_NAME, JUNIT_NAME, Reproduction
from conformance.run.baseline import BaselineOutcome
from conformance.run.plugin.results import check_overall
from conformance.run.progress import duration_text
from conformance.target.budget import NOT_RUN as BUDGET_NOT_RUN
from conformance.verdicts import SEVERITY, RunVerdicts, Verdict

__all__ = ["RunEnd", "check_counts", "summarise"]

#: The longest reason a summary line shows (report.html has all of it).
MAX_REASON_CHARS = 300

_STYLES = {
    "fail": "bold red",
    "error": "bold magenta",
    "warn": "yellow",
    "pass": "green",
    "skip": "dim",
    "untested": "dim",
    "unobservable": "dim",
}
#: The check counts, in the words JUnit dashboards use.
_CHECK_WORDS = {
    Verdict.PASS: "passed",
    Verdict.FAIL: "failed",
    Verdict.WARN: "warned",
    Verdict.SKIP: "skipped",
    Verdict.ERROR: "errors",
}


@dataclass(frozen=True)
class RunEnd:
    """What the summary reports of a finished run."""

    target: str
    verdicts: RunVerdicts | None
    report_dir: Path
    duration_s: float
    pytest_code: int
    reproduction: Reproduction
    strict: bool = False
    #: The run's failures against ``--baseline``, when it had one.
    baseline: BaselineOutcome | None = None
    #: What the run spent of its ``--budget-requests``/``--budget-credits``, when it had
    #: one ("12 of 25 requests, 4 of 8 credits spent").
    budget: str | None = None


def check_counts(verdicts: RunVerdicts, catalog: Catalog) -> Counter[Verdict]:
    """Checks by their one verdict: what JUnit's and Allure's counts are made of."""
    return Counter(check_overall(check, catalog) for check in verdicts.checks)


def summarise(
    console: Console, end: RunEnd, catalog: Catalog, *, quiet: bool = False, verbose: bool = False
) -> None:
    """Print the run's summary (see the module docstring)."""

    def say(text: str | Text) -> None:
        console.print(text, soft_wrap=True, markup=False, highlight=False)

    verdicts = end.verdicts
    if verdicts is None:
        say(
            Text(
                f"no results: pytest stopped (exit {end.pytest_code}); "
                f"see {end.report_dir / 'pytest-output.txt'}",
                style="bold red",
            )
        )
        return
    counts = verdicts.counts()
    say(_verdict_line(end.target, verdicts, strict=end.strict))
    if end.baseline is not None:
        baseline_lines = end.baseline.lines()
        for text in baseline_lines[:1] if quiet else baseline_lines:
            say(text)
    if not quiet:
        for detail in verdicts.coverage().details():
            say(f"  {detail}")
    say(
        "requirements: "
        + ", ".join(f"{count} {verdict.value}" for verdict, count in counts.items())
    )
    checks = check_counts(verdicts, catalog)
    say(
        f"checks: {sum(checks.values())} run: "
        + ", ".join(f"{checks[v]} {w}" for v, w in _CHECK_WORDS.items())
        + f" (in {duration_text(end.duration_s)})"
    )
    if end.budget is not None:
        not_run = sum(1 for c in verdicts.checks if c.message.startswith(BUDGET_NOT_RUN))
        say(f"budget: {end.budget}; {not_run} checks not run (budget)")
    if not quiet:
        shown = [Verdict.FAIL, Verdict.ERROR, Verdict.WARN]
        if verbose:
            shown += [Verdict.SKIP, Verdict.UNTESTED]
        for verdict in sorted(shown, key=SEVERITY.index):
            for rv in verdicts.with_verdict(verdict):
                line = Text(f"{verdict.value.upper():5} ", style=_STYLES[verdict.value])
                line.append(f"{rv.requirement.id}  {_one_line(rv.reason)}")
                say(line)
        failing = tuple(
            rv.requirement.id
            for rv in verdicts.requirements
            if rv.verdict in (Verdict.FAIL, Verdict.ERROR)
        )
        if failing:
            say(f"rerun the failures: {end.reproduction.rerun(failing)}")
    say(f"report: {end.report_dir / HTML_NAME}")
    if not quiet:
        say(
            f"also in {end.report_dir}: {JSON_NAME}, {JUNIT_NAME}, {ALLURE_DIR}/, pytest-output.txt"
        )


def _one_line(reason: str) -> str:
    """A reason fit for one log line: its first line, at most :data:`MAX_REASON_CHARS`."""
    first = reason.strip().splitlines()[0] if reason.strip() else ""
    if len(first) <= MAX_REASON_CHARS:
        return first
    return first[: MAX_REASON_CHARS - 1] + "…"


def _verdict_line(target: str, verdicts: RunVerdicts, *, strict: bool) -> Text:
    """The verdict in the words of :meth:`~conformance.verdicts.Coverage.line` (the one
    wording every output shares), with the warnings, or --strict's refusal of them."""
    warned = len(verdicts.with_verdict(Verdict.WARN))
    coverage = verdicts.coverage()
    if coverage.failed:
        return Text(coverage.line(target), style="bold red")
    if warned and strict:
        return Text(
            f"not accepted (--strict): {target}: no MUST requirement failed, "
            f"{warned} interpretations warned",
            style="bold red",
        )
    tail = f" ({warned} warnings: interpretations, never failures)" if warned else ""
    style = "bold green" if coverage.conformant else "bold yellow"
    return Text(coverage.line(target) + tail, style=style)
