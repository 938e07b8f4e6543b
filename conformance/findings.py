"""What a running check finds about each rule it cites: "one id, one rule".

A check cites requirement ids with ``@pytest.mark.requirement(...)``. When it cites
several, a failure must say which of them the case broke, and nothing else is held
against the implementation: a broken interpretation is never reported as a broken MUST.
So the checks (and the assertion helpers in :mod:`conformance.judge.asserts`) report through
three verbs here instead of bare asserts:

* :func:`fail` ends the check with :class:`RuleBroken`, which names the rule(s) broken;
* :func:`warn` records a warning against a rule and lets the check go on (a value within
  the slack real clients add, a choice the spec leaves open);
* :func:`measure` records a measured value against the :class:`Bands` of its rule and
  passes, warns or fails by the band it falls in, so a report can show the value against
  the bands (timing rules: the 10 s timeout, the 1 s / 2 s backoff, Retry-After).

Beside the verbs, :func:`trace` keeps the arrivals of a delivery chain the check looked
at (:class:`ChainTrace`), so a report can draw them against the windows the spec allows.

The rule named must be one the check cites: ids are taken from the marker, never typed
as something else. With no rule named, a finding is about every id the check cites (what
a bare ``assert`` means too).

The plugin opens a :class:`CheckFindings` when a check starts (:func:`begin`) and collects
it when the check ends (:func:`end`). It is one process-wide slot rather than a context
variable because a check's helpers may run in threads it started (the webhook receiver,
thread pools) and pytest runs one test at a time per process.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

__all__ = [
    "Arrival",
    "Bands",
    "ChainTrace",
    "CheckFindings",
    "Finding",
    "Measurement",
    "RuleBroken",
    "begin",
    "cited",
    "end",
    "fail",
    "measure",
    "trace",
    "warn",
]


class RuleBroken(AssertionError):
    """A check's failure, attributed to the rule(s) in ``ids`` (all it cites when empty)."""

    def __init__(self, message: str, ids: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.ids: tuple[str, ...] = tuple(ids)


@dataclass(frozen=True)
class Finding:
    """A warning about one rule: the check went on, and may still pass."""

    rule: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "message": self.message}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        return cls(rule=str(data["rule"]), message=str(data["message"]))


@dataclass(frozen=True)
class Bands:
    """Where a measured value passes, warns or fails.

    ``passing`` is the spec's value plus the slack of measuring it; ``warning`` contains
    ``passing`` and adds the slack real HTTP clients and schedulers add (a timer that fires
    late); anything outside ``warning`` is clearly another value and fails.
    """

    passing: tuple[float, float]
    warning: tuple[float, float]

    def __post_init__(self) -> None:
        (p_lo, p_hi), (w_lo, w_hi) = self.passing, self.warning
        if not (w_lo <= p_lo <= p_hi <= w_hi):
            raise ValueError(f"the warning band {self.warning} must contain {self.passing}")

    def band(self, value: float) -> str:
        """``pass``, ``warn`` or ``fail``."""
        if self.passing[0] <= value <= self.passing[1]:
            return "pass"
        if self.warning[0] <= value <= self.warning[1]:
            return "warn"
        return "fail"


@dataclass(frozen=True)
class Measurement:
    """A value a check measured for a rule, and the band it fell in."""

    rule: str
    quantity: str
    value: float
    unit: str
    band: str
    passing: tuple[float, float]
    warning: tuple[float, float]

    def describe(self) -> str:
        """``attempt 1 -> 2 = 11.82 s (pass 9.4 to 10.6 s, warn 9.4 to 11.6 s): fail``."""
        unit = self.unit
        return (
            f"{self.quantity} = {self.value:.2f} {unit} (pass {self.passing[0]:g} to "
            f"{self.passing[1]:g} {unit}, warn {self.warning[0]:g} to {self.warning[1]:g} "
            f"{unit}): {self.band}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "quantity": self.quantity,
            "value": self.value,
            "unit": self.unit,
            "band": self.band,
            "passing": list(self.passing),
            "warning": list(self.warning),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Measurement:
        def pair(value: Any) -> tuple[float, float]:
            low, high = value
            return float(low), float(high)

        return cls(
            rule=str(data["rule"]),
            quantity=str(data["quantity"]),
            value=float(data["value"]),
            unit=str(data["unit"]),
            band=str(data["band"]),
            passing=pair(data["passing"]),
            warning=pair(data["warning"]),
        )


@dataclass(frozen=True)
class Arrival:
    """One attempt of a delivery as the suite's receiver saw it: when it came (seconds
    after the chain's first arrival), the attempt number it carried (if any), and the
    reply the receiver was scripted to give and how long it held that reply."""

    at: float
    attempt: str | None
    status: int
    held: float

    def to_dict(self) -> dict[str, Any]:
        return {"at": self.at, "attempt": self.attempt, "status": self.status, "held": self.held}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Arrival:
        attempt = data.get("attempt")
        return cls(
            at=float(data["at"]),
            attempt=None if attempt is None else str(attempt),
            status=int(data["status"]),
            held=float(data["held"]),
        )


@dataclass(frozen=True)
class ChainTrace:
    """The arrivals of one delivery chain (a generation delivering to one scripted
    endpoint), with what they are judged against: the per-attempt ``timeout``, the
    ``backoffs`` before the 2nd, 3rd… attempt (spec §6 Behaviour; one more attempt than
    backoffs) and the run's timing ``tolerance``, all in seconds."""

    name: str
    arrivals: tuple[Arrival, ...]
    timeout: float
    backoffs: tuple[float, ...]
    tolerance: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "arrivals": [arrival.to_dict() for arrival in self.arrivals],
            "timeout": self.timeout,
            "backoffs": list(self.backoffs),
            "tolerance": self.tolerance,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChainTrace:
        return cls(
            name=str(data["name"]),
            arrivals=tuple(Arrival.from_dict(a) for a in data["arrivals"]),
            timeout=float(data["timeout"]),
            backoffs=tuple(float(b) for b in data["backoffs"]),
            tolerance=float(data["tolerance"]),
        )


@dataclass
class CheckFindings:
    """What one running check has found so far (the plugin reads it at the end)."""

    ids: tuple[str, ...]
    warnings: list[Finding] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)
    chains: list[ChainTrace] = field(default_factory=list)


_lock = threading.Lock()
_current: CheckFindings | None = None


def begin(ids: Sequence[str]) -> CheckFindings:
    """Start collecting for a check that cites *ids* (called by the plugin)."""
    global _current
    with _lock:
        _current = CheckFindings(tuple(ids))
        return _current


def end() -> CheckFindings | None:
    """Stop collecting; what the check found (None when no check was running)."""
    global _current
    with _lock:
        found, _current = _current, None
        return found


def cited() -> tuple[str, ...]:
    """The ids the running check cites (empty outside a check, e.g. in unit tests)."""
    current = _current
    return current.ids if current is not None else ()


def _rules(rule: str | None) -> tuple[str, ...]:
    """The ids a finding is about: *rule*, which must be cited, or every cited id."""
    ids = cited()
    if rule is None:
        return ids
    if ids and rule not in ids:
        # A harness error, not a verdict: the check would blame a rule it does not cite.
        raise ValueError(
            f"a finding names {rule}, which this check does not cite "
            f"(it cites {', '.join(ids)}): cite it in @pytest.mark.requirement or name "
            "one of those"
        )
    return (rule,)


def _prefixed(ids: Sequence[str], message: str) -> str:
    return f"{', '.join(ids)}: {message}" if ids else message


def fail(message: str, *, rule: str | None = None) -> NoReturn:
    """End the check: the implementation broke *rule* (default: every id the check cites)."""
    ids = _rules(rule)
    raise RuleBroken(_prefixed(ids, message), ids)


def warn(message: str, *, rule: str | None = None) -> None:
    """Record a warning against *rule* (default: every cited id); the check goes on."""
    current = _current
    ids = _rules(rule)
    if current is None:
        # Outside a conformance check nobody would see it: say so loudly instead.
        raise RuntimeError(f"warn() outside a running check: {_prefixed(ids, message)}")
    with _lock:
        current.warnings.extend(Finding(i, message) for i in ids)


def measure(rule: str, quantity: str, value: float, bands: Bands, *, unit: str = "s") -> str:
    """Judge *value* (of *quantity*, for *rule*) by *bands*: record it, then pass, warn
    (:func:`warn`) or fail (:func:`fail`). Returns the band (``pass`` or ``warn``)."""
    _rules(rule)
    found = Measurement(
        rule, quantity, value, unit, bands.band(value), bands.passing, bands.warning
    )
    current = _current
    if current is not None:
        with _lock:
            current.measurements.append(found)
    if found.band == "fail":
        fail(found.describe(), rule=rule)
    if found.band == "warn":
        warn(found.describe(), rule=rule)
    return found.band


def trace(chain: ChainTrace) -> None:
    """Keep what the running check saw of a delivery chain; a later look at the same
    chain (more arrivals) replaces the earlier one. Outside a check it is dropped."""
    current = _current
    if current is None:
        return
    with _lock:
        current.chains[:] = [c for c in current.chains if c.name != chain.name] + [chain]
