"""Verdicts per requirement: the data model and the rules that make them.

A check is a pytest test; it cites one or more requirement ids. pytest says what happened
to the check (:class:`Outcome`); a failure names the rules it broke (``broken``, see
:mod:`conformance.findings`), and the check may have recorded warnings and measurements
against some of the rules it cites. :func:`check_judgement` turns that into a
:class:`Verdict` for each requirement the check cites (a broken ``INTERPRETATION`` is a
warning, never a failure: the spec did not state it; a failure that broke another rule
says nothing of this one); the verdicts of every check of a requirement are aggregated into
one :class:`RequirementVerdict`. A requirement that no check covered is ``untested`` and
shown as such, so gaps stay visible.

Everything here is pure data and pure functions: the pytest plugin feeds it, the report
writers read it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from conformance.catalog import Level, Party, Requirement
from conformance.evidence import Exchange
from conformance.findings import ChainTrace, Finding, Measurement

__all__ = [
    "MAX_EXCHANGES",
    "SEVERITY",
    "CheckResult",
    "Outcome",
    "RequirementVerdict",
    "RunVerdicts",
    "Verdict",
    "aggregate",
    "check_judgement",
    "check_verdict",
    "judge",
    "trim_exchanges",
]


class Outcome(StrEnum):
    """What happened to one check, in the suite's terms (not pytest's phases)."""

    PASSED = "passed"
    #: An assertion about the implementation under test did not hold.
    FAILED = "failed"
    #: The check could not run here (a capability the profile does not offer).
    SKIPPED = "skipped"
    #: The harness broke (fixture setup, teardown, an unexpected exception in the check).
    ERROR = "error"


class Verdict(StrEnum):
    """The verdict on one requirement."""

    PASS = "pass"  # noqa: S105 (a verdict name, not a password)
    FAIL = "fail"
    WARN = "warn"
    SKIP = "skip"
    ERROR = "error"
    UNTESTED = "untested"


#: The most exchanges a check keeps as evidence: the first ones show the setup, the last
#: ones what was asserted on.
MAX_EXCHANGES = 50
_KEEP_FIRST = 10

#: Aggregation order, worst first: one failing check fails the requirement whatever the
#: others say; a harness error hides more than a warning does; a skip says least.
SEVERITY: tuple[Verdict, ...] = (
    Verdict.FAIL,
    Verdict.ERROR,
    Verdict.WARN,
    Verdict.PASS,
    Verdict.SKIP,
    Verdict.UNTESTED,
)


@dataclass(frozen=True)
class CheckResult:
    """One check (a pytest test) and what happened to it; the evidence of a verdict.

    ``message`` is the short form (the assertion message: expected vs seen), ``longrepr``
    the full traceback text; both redacted before they get here, as are the recorded
    ``exchanges`` (at most :data:`MAX_EXCHANGES` kept; ``exchanges_omitted`` counts the rest,
    e.g. of a rate-limit check that sends hundreds of requests). ``broken`` names the rules
    a failure broke (empty: every cited one); ``warnings``, ``measurements`` and ``chains``
    (the delivery chains it looked at) are what the check recorded on the way
    (:mod:`conformance.findings`).
    """

    nodeid: str
    requirement_ids: tuple[str, ...]
    outcome: Outcome
    duration: float
    message: str = ""
    longrepr: str = ""
    exchanges: tuple[Exchange, ...] = ()
    exchanges_omitted: int = 0
    broken: tuple[str, ...] = ()
    warnings: tuple[Finding, ...] = ()
    measurements: tuple[Measurement, ...] = ()
    chains: tuple[ChainTrace, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict; pytest-xdist carries it from a worker to the controller."""
        return {
            "nodeid": self.nodeid,
            "requirement_ids": list(self.requirement_ids),
            "outcome": self.outcome.value,
            "duration": self.duration,
            "message": self.message,
            "longrepr": self.longrepr,
            "exchanges": [exchange.to_dict() for exchange in self.exchanges],
            "exchanges_omitted": self.exchanges_omitted,
            "broken": list(self.broken),
            "warnings": [finding.to_dict() for finding in self.warnings],
            "measurements": [measurement.to_dict() for measurement in self.measurements],
            "chains": [chain.to_dict() for chain in self.chains],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CheckResult:
        return cls(
            nodeid=str(data["nodeid"]),
            requirement_ids=tuple(str(i) for i in data["requirement_ids"]),
            outcome=Outcome(data["outcome"]),
            duration=float(data["duration"]),
            message=str(data["message"]),
            longrepr=str(data["longrepr"]),
            exchanges=tuple(Exchange.from_dict(e) for e in data["exchanges"]),
            exchanges_omitted=int(data.get("exchanges_omitted", 0)),
            broken=tuple(str(i) for i in data.get("broken", ())),
            warnings=tuple(Finding.from_dict(f) for f in data.get("warnings", ())),
            measurements=tuple(Measurement.from_dict(m) for m in data.get("measurements", ())),
            chains=tuple(ChainTrace.from_dict(c) for c in data.get("chains", ())),
        )

    def warnings_for(self, requirement_id: str) -> list[Finding]:
        return [finding for finding in self.warnings if finding.rule == requirement_id]

    def measurements_for(self, requirement_id: str) -> list[Measurement]:
        return [m for m in self.measurements if m.rule == requirement_id]

    def about(self, requirement_id: str) -> str:
        """What this check says of one requirement: its warning(s), or its message."""
        warned = self.warnings_for(requirement_id)
        if warned and (self.outcome is not Outcome.FAILED or requirement_id not in self.broke):
            return "\n".join(finding.message for finding in warned)
        return self.message

    @property
    def broke(self) -> tuple[str, ...]:
        """The rules this check's failure broke: those it named, else all it cites."""
        return self.broken or self.requirement_ids


@dataclass(frozen=True)
class RequirementVerdict:
    """The verdict on one requirement, with the checks that are its evidence."""

    requirement: Requirement
    verdict: Verdict
    checks: tuple[CheckResult, ...]
    reason: str


@dataclass(frozen=True)
class RunVerdicts:
    """Every requirement's verdict in one run, in catalog order."""

    requirements: tuple[RequirementVerdict, ...]
    checks: tuple[CheckResult, ...] = field(default=())

    def counts(self) -> dict[Verdict, int]:
        """How many requirements got each verdict (every verdict present, zero or not)."""
        tally = Counter(rv.verdict for rv in self.requirements)
        return {verdict: tally.get(verdict, 0) for verdict in SEVERITY}

    def with_verdict(self, verdict: Verdict) -> list[RequirementVerdict]:
        return [rv for rv in self.requirements if rv.verdict is verdict]

    @property
    def ok(self) -> bool:
        """True when no stated (MUST) requirement failed and the harness never broke.

        Warnings (interpretations not met), skips and untested requirements do not make a
        run fail: they are reported, not judged.
        """
        return not any(rv.verdict in (Verdict.FAIL, Verdict.ERROR) for rv in self.requirements)


def trim_exchanges(exchanges: Sequence[Exchange]) -> tuple[tuple[Exchange, ...], int]:
    """At most :data:`MAX_EXCHANGES` exchanges (the first and the last ones) and how many
    were left out of the middle."""
    if len(exchanges) <= MAX_EXCHANGES:
        return tuple(exchanges), 0
    tail = MAX_EXCHANGES - _KEEP_FIRST
    kept = (*exchanges[:_KEEP_FIRST], *exchanges[-tail:])
    return kept, len(exchanges) - MAX_EXCHANGES


def check_verdict(outcome: Outcome, requirement: Requirement) -> Verdict:
    """The verdict one check's outcome gives *requirement*.

    A failed check of an ``INTERPRETATION`` is a warning: the spec says "not shown" there,
    and an implementation is never failed for the suite's assumption. A failed check of a
    client's or receiver's duty (``party: client``) is an error: only the suite's own
    client and receiver are checked against those, so the harness broke, not the target.
    """
    if outcome is Outcome.PASSED:
        return Verdict.PASS
    if outcome is Outcome.FAILED:
        if requirement.party is Party.CLIENT:
            return Verdict.ERROR
        return Verdict.FAIL if requirement.level is Level.MUST else Verdict.WARN
    if outcome is Outcome.SKIPPED:
        return Verdict.SKIP
    return Verdict.ERROR


def check_judgement(check: CheckResult, requirement: Requirement) -> Verdict | None:
    """The verdict *check* gives *requirement*, or None when it says nothing of it.

    A failure counts only against the rules it broke: a check that failed on another of
    its rules stopped before it judged this one, so it neither passes nor fails it. A
    warning the check recorded against this rule makes a pass (or that silence) a ``warn``.
    """
    if check.outcome is Outcome.FAILED and requirement.id not in check.broke:
        verdict: Verdict | None = None
    else:
        verdict = check_verdict(check.outcome, requirement)
    if check.warnings_for(requirement.id) and verdict in (None, Verdict.PASS):
        verdict = Verdict.ERROR if requirement.party is Party.CLIENT else Verdict.WARN
    return verdict


def aggregate(verdicts: Iterable[Verdict | None]) -> Verdict:
    """The worst verdict (fail > error > warn > pass > skip); none at all is ``untested``."""
    present = {verdict for verdict in verdicts if verdict is not None}
    for verdict in SEVERITY:
        if verdict in present:
            return verdict
    return Verdict.UNTESTED


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _reason(
    verdict: Verdict, requirement: Requirement, checks: Sequence[CheckResult], deselected: bool
) -> str:
    if not checks:
        if deselected:
            return "its checks were not selected in this run (--only, --area, -k or -m)"
        return "no check in the suite verifies this requirement"
    total = len(checks)
    judged = [(c, check_judgement(c, requirement)) for c in checks]
    deciding = [c for c, v in judged if v is verdict]
    if verdict is Verdict.UNTESTED:
        return (
            f"none of its {total} checks judged it: each failed on another rule first "
            f"({checks[0].nodeid}: {_first_line(checks[0].message)})"
        )
    if verdict is Verdict.PASS:
        skipped = sum(1 for _, v in judged if v is Verdict.SKIP)
        extra = f" ({skipped} skipped)" if skipped else ""
        return f"{len(deciding)} of {total} checks passed{extra}"
    first = deciding[0]
    detail = _first_line(first.about(requirement.id)) or first.outcome.value
    warned = "failed (an interpretation, so a warning)"
    if requirement.level is Level.MUST:
        warned = "warned (met within the slack the spec leaves, or an open choice)"
    verb = {
        Verdict.FAIL: "failed",
        Verdict.WARN: warned,
        Verdict.ERROR: "could not run (harness error)",
        Verdict.SKIP: "skipped",
    }[verdict]
    return f"{len(deciding)} of {total} checks {verb}: {first.nodeid}: {detail}"


def judge(
    requirements: Iterable[Requirement],
    checks: Iterable[CheckResult],
    deselected_ids: frozenset[str] = frozenset(),
) -> RunVerdicts:
    """Verdicts for ``requirements`` (catalog order kept) from the checks that ran.

    ``deselected_ids`` names requirements whose checks exist but were filtered out of this
    run; they are still ``untested``, with a reason that says so.
    """
    all_checks = tuple(checks)
    by_id: dict[str, list[CheckResult]] = {}
    for check in all_checks:
        for requirement_id in check.requirement_ids:
            by_id.setdefault(requirement_id, []).append(check)
    verdicts = []
    for requirement in requirements:
        evidence = by_id.get(requirement.id, [])
        verdict = aggregate(check_judgement(c, requirement) for c in evidence)
        verdicts.append(
            RequirementVerdict(
                requirement=requirement,
                verdict=verdict,
                checks=tuple(evidence),
                reason=_reason(verdict, requirement, evidence, requirement.id in deselected_ids),
            )
        )
    return RunVerdicts(requirements=tuple(verdicts), checks=all_checks)
