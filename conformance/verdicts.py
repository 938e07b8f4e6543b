"""Verdicts per requirement: the data model and the rules that make them.

A check is a pytest test; it cites one or more requirement ids. pytest says what happened
to the check (:class:`Outcome`); a failure names the rules it broke (``broken``, see
:mod:`conformance.findings`), and the check may have recorded warnings and measurements
against some of the rules it cites. :func:`check_judgement` turns that into a
:class:`Verdict` for each requirement the check cites (a broken ``INTERPRETATION`` is a
warning, never a failure: the spec did not state it; a failure that broke another rule
says nothing of this one); the verdicts of every check of a requirement are aggregated into
one :class:`RequirementVerdict`. A requirement that no check covered is ``untested`` and
shown as such, so gaps stay visible; one that no black-box check can observe (the
catalog's ``observable: false``) is ``unobservable``, listed apart and never passed.

:class:`Coverage` says how many of the stated (MUST) rules a run checked, and gives the
one verdict line every output prints (:meth:`Coverage.line`): "conformant" only when no
MUST failed and every observable MUST was checked or skipped for a capability the profile
lacks.

Everything here is pure data and pure functions: the pytest plugin feeds it, the report
writers read it.
"""

from __future__ import annotations

import re
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
    "Coverage",
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
    #: No black-box check can observe the rule (the catalog says why): never a pass.
    UNOBSERVABLE = "unobservable"


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
    Verdict.UNOBSERVABLE,
)


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


@dataclass(frozen=True)
class CheckResult:
    """One check (a pytest test) and what happened to it; the evidence of a verdict.

    ``message`` is the short form (the assertion message: expected vs seen), ``longrepr``
    the full traceback text; both redacted before they get here, as are the recorded
    ``exchanges`` (at most :data:`MAX_EXCHANGES` kept; ``exchanges_omitted`` counts the rest,
    e.g. of a rate-limit check that sends hundreds of requests). ``broken`` names the rules
    a failure broke (empty: every cited one); ``warnings``, ``measurements`` and ``chains``
    (the delivery chains it looked at) are what the check recorded on the way
    (:mod:`conformance.findings`). ``started_at`` and ``stopped_at`` (unix seconds, the
    start of its set-up and the end of its teardown) and ``worker`` (the pytest-xdist
    worker that ran it, ``main`` in one process) place it in the run's timeline; None and
    ``""`` where not known (a check whose process died).
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
    started_at: float | None = None
    stopped_at: float | None = None
    worker: str = ""

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
            "started_at": self.started_at,
            "stopped_at": self.stopped_at,
            "worker": self.worker,
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
            started_at=_optional_float(data.get("started_at")),
            stopped_at=_optional_float(data.get("stopped_at")),
            worker=str(data.get("worker", "")),
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
    #: Its checks exist but were filtered out of this run (--only, --area, -k, -m).
    deselected: bool = False


@dataclass(frozen=True)
class RunVerdicts:
    """Every requirement's verdict in one run, in catalog order."""

    requirements: tuple[RequirementVerdict, ...]
    checks: tuple[CheckResult, ...] = field(default=())
    #: The catalog's requirements that --only or --area left out of this run: not judged,
    #: and so not checked.
    outside: tuple[Requirement, ...] = ()

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

    def coverage(self) -> Coverage:
        """How many of the stated rules this run checked, and the verdict line."""
        return Coverage.of(self.requirements, self.outside)


#: A skip for a capability the profile lacks: ``needs <capability>: <what to add>`` (the
#: plugin's capability skips and ``CapabilityMissing`` word it so).
_CAPABILITY_SKIP = re.compile(r"^needs (?P<capability>[^:]{1,80}): ")
#: The most ids a verdict-line detail lists before it counts the rest.
_LISTED_IDS = 40


def _lacked_capability(rv: RequirementVerdict) -> str | None:
    """The capability the profile lacks that made every check of a skipped requirement
    skip (the first one named), or None when some skip had another reason."""
    if rv.verdict is not Verdict.SKIP:
        return None
    skipped = [c for c in rv.checks if c.outcome is Outcome.SKIPPED]
    found = [_CAPABILITY_SKIP.match(c.message) for c in skipped]
    if not found or not all(found):
        return None
    first = found[0]
    assert first is not None
    return first["capability"]


@dataclass(frozen=True)
class Coverage:
    """The stated (MUST) duties of the implementation under test, by what a run did with
    them: the truth behind the verdict line.

    Every observable MUST of the service is in exactly one of ``checked`` (judged: pass,
    warn or fail), ``lacking`` (every check skipped for a capability the profile lacks,
    by capability) or ``unchecked`` (untested, not selected, skipped for another reason,
    or a harness error) or ``outside`` (left out of the run by --only or --area).
    ``unobservable`` holds the MUSTs no black-box check can observe.
    """

    checked: tuple[RequirementVerdict, ...]
    failed: tuple[RequirementVerdict, ...]
    lacking: Mapping[str, tuple[RequirementVerdict, ...]]
    unchecked: tuple[RequirementVerdict, ...]
    unobservable: tuple[RequirementVerdict, ...]
    outside: tuple[Requirement, ...] = ()

    @classmethod
    def of(
        cls, verdicts: Iterable[RequirementVerdict], outside: Iterable[Requirement] = ()
    ) -> Coverage:
        checked, unchecked, unobservable = [], [], []
        lacking: dict[str, list[RequirementVerdict]] = {}
        for rv in verdicts:
            requirement = rv.requirement
            if not _service_must(requirement):
                continue
            if rv.verdict is Verdict.UNOBSERVABLE:
                unobservable.append(rv)
            elif rv.verdict in (Verdict.PASS, Verdict.WARN, Verdict.FAIL):
                checked.append(rv)
            elif (capability := _lacked_capability(rv)) is not None:
                lacking.setdefault(capability, []).append(rv)
            else:
                unchecked.append(rv)
        return cls(
            checked=tuple(checked),
            failed=tuple(rv for rv in checked if rv.verdict is Verdict.FAIL),
            lacking={name: tuple(rvs) for name, rvs in sorted(lacking.items())},
            unchecked=tuple(unchecked),
            unobservable=tuple(unobservable),
            outside=tuple(r for r in outside if _service_must(r) and r.observable),
        )

    @property
    def conformant(self) -> bool:
        """No MUST failed, and every observable MUST was checked or skipped for a
        capability the profile lacks."""
        return not self.failed and not self.unchecked and not self.outside

    def line(self, target: str | None = None) -> str:
        """The run's verdict in one sentence (plain text: every output words it so), with
        *target* (the profile's name) after the verdict word when given: ``conformant:
        TARGET: no failures among ...``, ``not conformant: TARGET: 1 of ...``, or, when
        some were not checked, ``TARGET: no failures among the N ...; M not checked``."""
        checked = _musts(len(self.checked))
        unchecked = len(self.unchecked) + len(self.outside)
        not_checked = f"; {unchecked} not checked" if unchecked else ""
        if self.failed:
            verdict = "not conformant"
            words = f"{len(self.failed)} of the {checked} checked failed{not_checked}"
        elif unchecked:
            verdict = ""
            words = f"no failures among the {checked} checked; {unchecked} not checked"
        elif not self.lacking:
            verdict = "conformant"
            words = f"no failures among the {checked} checked, every observable one"
        else:
            verdict = "conformant"
            skipped = ", ".join(f"{name} ({len(rvs)})" for name, rvs in self.lacking.items())
            total = sum(len(rvs) for rvs in self.lacking.values())
            words = (
                f"no failures among the {checked} checked; {total} skipped for capabilities "
                f"the profile lacks: {skipped}"
            )
        return ": ".join(part for part in (verdict, target, words) if part)

    def details(self) -> list[str]:
        """What the line counts, one line per group: the MUSTs not checked (each group of
        a reason together), those skipped per lacking capability, the unobservable ones,
        and how many a selection left out."""
        lines = []
        not_selected = [rv for rv in self.unchecked if rv.deselected]
        groups = (
            ("not checked", [rv for rv in self.unchecked if not rv.deselected]),
            ("not selected in this run", not_selected),
            *(
                (f"skipped, the profile lacks {name}", list(rvs))
                for name, rvs in self.lacking.items()
            ),
            ("cannot be observed from outside", list(self.unobservable)),
        )
        for label, rvs in groups:
            if rvs:
                lines.append(f"{label} ({len(rvs)}): {_ids([rv.requirement for rv in rvs])}")
        if self.outside:  # counted, not listed: a selection leaves out most of the catalog
            lines.append(
                f"outside this run's selection (--only, --area): {_musts(len(self.outside))}"
            )
        return lines


def _musts(count: int) -> str:
    return f"{count} MUST requirement{'' if count == 1 else 's'}"


def _service_must(requirement: Requirement) -> bool:
    """A stated duty of the implementation under test (not an interpretation, not a
    duty of the suite's own receiver or client)."""
    return requirement.level is Level.MUST and requirement.party is Party.SERVICE


def _ids(requirements: Sequence[Requirement]) -> str:
    shown = ", ".join(r.id for r in requirements[:_LISTED_IDS])
    more = len(requirements) - _LISTED_IDS
    return f"{shown} and {more} more" if more > 0 else shown


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
        if verdict is Verdict.UNOBSERVABLE:
            return f"no black-box check can observe it: {requirement.unobservable_reason}"
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
        Verdict.ERROR: "ended in an error",
        Verdict.SKIP: "skipped",
    }[verdict]
    return f"{len(deciding)} of {total} checks {verb}: {first.nodeid}: {detail}"


def judge(
    requirements: Iterable[Requirement],
    checks: Iterable[CheckResult],
    deselected_ids: frozenset[str] = frozenset(),
    outside: Iterable[Requirement] = (),
) -> RunVerdicts:
    """Verdicts for ``requirements`` (catalog order kept) from the checks that ran.

    ``deselected_ids`` names requirements whose checks exist but were filtered out of this
    run; they are still ``untested``, with a reason that says so. ``outside`` holds the
    requirements --only or --area left out of the run: they get no verdict, and the
    coverage counts them as not checked.
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
        if not evidence and not requirement.observable:
            verdict = Verdict.UNOBSERVABLE
        deselected = requirement.id in deselected_ids
        verdicts.append(
            RequirementVerdict(
                requirement=requirement,
                verdict=verdict,
                checks=tuple(evidence),
                reason=_reason(verdict, requirement, evidence, deselected),
                deselected=deselected and not evidence,
            )
        )
    return RunVerdicts(requirements=tuple(verdicts), checks=all_checks, outside=tuple(outside))
