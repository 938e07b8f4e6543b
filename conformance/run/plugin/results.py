"""A check's result: its phases, the rules a failure broke, its findings and evidence.

pytest reports each phase (setup, call, teardown); the plugin turns them into one
:class:`~conformance.verdicts.CheckResult`: redacted, with the exchanges the check
recorded, the rules its failure broke and the warnings and measurements it recorded. It
travels to the controller under pytest-xdist as an attribute of the teardown report.
A failure that breaks only interpretations shows as ``WARN``, not ``FAILED``.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass

import httpx
import pytest

from conformance import findings
from conformance.catalog import Catalog
from conformance.evidence import Exchange
from conformance.run.plugin.citations import REQUIREMENTS_KEY
from conformance.run.plugin.redaction import longrepr_text, redact_report
from conformance.run.plugin.state import run_state, worker_name
from conformance.secrets import Redactor
from conformance.target.budget import BudgetSpent
from conformance.target.client import EXCHANGES_KEY
from conformance.target.profile import CapabilityMissing
from conformance.verdicts import (
    CheckResult,
    Outcome,
    Verdict,
    aggregate,
    check_judgement,
    check_verdict,
    trim_exchanges,
)

__all__ = [
    "CHECK_ATTR",
    "CHECK_RESULT_KEY",
    "IDS_ATTR",
    "VERDICT_PROPERTY",
    "WARNING_PROPERTY",
    "check_overall",
    "is_warning",
    "reported_verdict",
    "warning_text",
]


@dataclass(frozen=True)
class _Phase:
    """What one phase (setup, call, teardown) of a check gave."""

    when: str
    outcome: Outcome
    message: str
    longrepr: str
    duration: float
    #: Wall clock (unix seconds) at the phase's start and end, as pytest reports them.
    start: float
    stop: float


#: The phases of a check so far.
_PHASES_KEY = pytest.StashKey[list[_Phase]]()
#: The rules a check's failure broke (set when its call fails).
_BROKEN_KEY = pytest.StashKey[tuple[str, ...]]()
#: The per-test verdict data, complete after teardown.
CHECK_RESULT_KEY = pytest.StashKey[CheckResult]()

CHECK_ATTR = "genapi_check"  # report attribute that carries a CheckResult (as a dict)
IDS_ATTR = "genapi_requirements"  # report attribute: the ids a check's report is about
_WARN_ATTR = "genapi_warn"  # report attribute: this failure only breaks interpretations
#: Properties of a check's teardown report (JUnit writes them on the test case): the
#: check's one verdict, and what a warned check warns of.
VERDICT_PROPERTY = "verdict"
WARNING_PROPERTY = "warning"

#: Exceptions that mean "the implementation did not do what the check asserts"; any other
#: exception in a check is the harness breaking (a verdict of error, not fail).
_FAILURES: tuple[type[BaseException], ...] = (
    AssertionError,
    TimeoutError,
    pytest.fail.Exception,
)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    ids = item.stash.get(REQUIREMENTS_KEY, ())
    if not ids:
        return report
    setattr(report, IDS_ATTR, list(ids))
    redactor = run_state(item.config).redactor
    excinfo = call.excinfo
    if excinfo is not None and excinfo.errisinstance((CapabilityMissing, BudgetSpent)):
        # A capability the profile lacks (profile.key("low-limit") without that key), or
        # the run's request budget spent: not the implementation's fault, so a skip with
        # the fix (or "not run: budget") as its reason; the requirement stays unchecked.
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {excinfo.value}")
    redact_report(report, redactor)

    outcome, message = _phase_outcome(report, call)
    phases = item.stash.setdefault(_PHASES_KEY, [])
    phases.append(
        _Phase(
            report.when,
            outcome,
            message,
            longrepr_text(report),
            report.duration,
            report.start,
            report.stop,
        )
    )
    if report.when == "call" and outcome is Outcome.FAILED:
        broken = _broken(excinfo, ids)
        item.stash[_BROKEN_KEY] = broken
        catalog = run_state(item.config).catalog
        if all(check_verdict(Outcome.FAILED, catalog[i]) is Verdict.WARN for i in broken):
            setattr(report, _WARN_ATTR, True)
    if report.when == "teardown":
        result = _check_result(item, ids, phases, redactor)
        item.stash[CHECK_RESULT_KEY] = result
        setattr(report, CHECK_ATTR, result.to_dict())
        catalog = run_state(item.config).catalog
        verdict = check_overall(result, catalog)
        report.user_properties.append((VERDICT_PROPERTY, verdict.value))
        if verdict is Verdict.WARN:
            report.user_properties.append((WARNING_PROPERTY, warning_text(result, catalog)))
    return report


def _broken(
    excinfo: pytest.ExceptionInfo[BaseException] | None, ids: tuple[str, ...]
) -> tuple[str, ...]:
    """The rules a failure broke: those a :class:`~conformance.findings.RuleBroken` names
    (one of the cited ids each, checked where it was raised), else every cited one."""
    if excinfo is not None and isinstance(excinfo.value, findings.RuleBroken):
        named = tuple(i for i in excinfo.value.ids if i in ids)
        if named:
            return named
    return ids


def _phase_outcome(report: pytest.TestReport, call: pytest.CallInfo[None]) -> tuple[Outcome, str]:
    if report.passed:
        return Outcome.PASSED, ""
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
        if hasattr(report, "wasxfail"):
            reason = f"expected to fail: {report.wasxfail}"
        return Outcome.SKIPPED, reason.removeprefix("Skipped: ")
    excinfo = call.excinfo
    if excinfo is not None and excinfo.errisinstance(httpx.TransportError):
        # Not the suite breaking, and not a verdict either: which rule the unanswered
        # request would have judged is not known here.
        where = "" if report.when == "call" else f" ({report.when})"
        detail = excinfo.exconly()
        return Outcome.ERROR, f"no answer from the target{where}, nothing judged: {detail}"
    if report.when != "call":
        detail = excinfo.exconly() if excinfo is not None else longrepr_text(report)
        return Outcome.ERROR, f"{report.when} failed (harness): {detail}"
    if excinfo is None or excinfo.errisinstance(_FAILURES):
        detail = excinfo.exconly() if excinfo is not None else longrepr_text(report)
        return Outcome.FAILED, detail
    return Outcome.ERROR, f"the check broke (harness): {excinfo.exconly()}"


def _check_result(
    item: pytest.Item,
    ids: tuple[str, ...],
    phases: Sequence[_Phase],
    redactor: Redactor,
) -> CheckResult:
    """One outcome from the phases: a setup error or skip decides; else the call does;
    a teardown error turns a pass or a skip into an error (the harness broke)."""
    by_when = {phase.when: phase for phase in phases}
    decisive = by_when.get("setup") or _Phase(
        "setup", Outcome.ERROR, "setup did not run", "", 0, 0, 0
    )
    if decisive.outcome is Outcome.PASSED and "call" in by_when:
        decisive = by_when["call"]
    outcome, message, longrepr = decisive.outcome, decisive.message, decisive.longrepr
    teardown = by_when.get("teardown")
    if teardown is not None and teardown.outcome is Outcome.ERROR:
        if outcome in (Outcome.PASSED, Outcome.SKIPPED):
            outcome, message, longrepr = teardown.outcome, teardown.message, teardown.longrepr
        else:
            message = f"{message}\n(and {teardown.message})"
    recorded: list[Exchange] = item.stash.get(EXCHANGES_KEY, [])
    exchanges, omitted = trim_exchanges(recorded)
    duration = sum(phase.duration for phase in phases)
    found = findings.end() or findings.CheckFindings(ids)
    return CheckResult(
        nodeid=item.nodeid,
        requirement_ids=ids,
        outcome=outcome,
        duration=duration,
        message=redactor.text(message),
        longrepr=redactor.text(longrepr),
        exchanges=exchanges,
        exchanges_omitted=omitted,
        broken=item.stash.get(_BROKEN_KEY, ()) if outcome is Outcome.FAILED else (),
        warnings=tuple(findings.Finding(f.rule, redactor.text(f.message)) for f in found.warnings),
        measurements=tuple(found.measurements),
        chains=tuple(found.chains),
        started_at=min((phase.start for phase in phases), default=None),
        stopped_at=max((phase.stop for phase in phases), default=None),
        worker=worker_name(item.config),
    )


def check_overall(check: CheckResult, catalog: Catalog) -> Verdict:
    """One verdict for a whole check (JUnit, Allure and the CLI count checks by it): the
    worst it gives any requirement it cites. A check that broke only interpretations, or
    passed with warnings recorded, is ``warn``: never a failure."""
    return aggregate(check_judgement(check, catalog[i]) for i in check.requirement_ids)


def warning_text(check: CheckResult, catalog: Catalog) -> str:
    """What a warned check warns of, one ``ID: reason`` line per requirement it warns."""
    return "\n".join(
        f"{i}: {check.about(i)}"
        for i in check.requirement_ids
        if check_judgement(check, catalog[i]) is Verdict.WARN
    )


def reported_verdict(report: pytest.TestReport) -> str | None:
    """The check's verdict a teardown report carries (None for other reports)."""
    for name, value in report.user_properties:
        if name == VERDICT_PROPERTY and isinstance(value, str):
            return value
    return None


def is_warning(report: pytest.TestReport) -> bool:
    """Whether *report* is a check's failure that breaks only interpretations (a warning)."""
    return bool(getattr(report, _WARN_ATTR, False))


def pytest_report_teststatus(
    report: pytest.TestReport, config: pytest.Config
) -> tuple[str, str, str] | None:
    """A failure that only breaks interpretations shows as WARN, not FAILED."""
    if report.when == "call" and is_warning(report):
        return "warn", "W", "WARN"
    return None
