"""Where a run's time went, from its ``results.json`` alone: chains, the longest, the
critical path.

A run cannot end before its longest chain does: a chain is the checks of one scheduling
unit, which one worker runs in order (the test module, or ``module::Class`` for checks in
a class, as pytest-xdist's ``loadfile`` and ``loadscope`` hand them out). Its span runs
from the start of its first check's set-up to the end of its last check's teardown (the
``started_at`` and ``stopped_at`` each check records, unix seconds). The ratio of the
run's wall time to the longest span says how close the scheduling comes to that floor
(1.0: the run took no longer than its longest chain); the chains that ended last are the
critical path, the ones to shorten or start earlier. ``scripts/bench-run`` prints this
for a full run (:func:`table`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from conformance.reports import JSON_NAME

__all__ = [
    "Chain",
    "RunTimings",
    "TimingsError",
    "chain_name",
    "load_timings",
    "run_timings",
    "table",
]

#: How many of the chains that ended last the critical path shows.
CRITICAL_PATH = 3


class TimingsError(ValueError):
    """``results.json`` cannot give the run's timings (missing, not one, no check times)."""


def chain_name(nodeid: str) -> str:
    """The scheduling unit of a check: ``module::Class`` for a check in a class, else the
    module (parameters, which may hold ``::``, do not count)."""
    parts = nodeid.split("[", 1)[0].split("::")
    return "::".join(parts[:2]) if len(parts) > 2 else parts[0]


@dataclass(frozen=True)
class Chain:
    """The checks of one scheduling unit and when they ran (unix seconds)."""

    name: str
    started_at: float
    stopped_at: float
    checks: int
    #: The workers that ran its checks (one, unless the scheduler split the unit).
    workers: tuple[str, ...]
    #: The seconds its checks took, each from set-up to teardown: far less than the span
    #: when its worker waited between them (pytest-xdist holds a worker's last check until
    #: it is sent the next one, or told there is none).
    busy: float

    @property
    def span(self) -> float:
        """First start to last stop, in seconds."""
        return self.stopped_at - self.started_at


@dataclass(frozen=True)
class RunTimings:
    """A run's wall time and chains (longest first), as ``results.json`` records them;
    ``started_at`` (unix seconds) is the origin of the offsets :func:`table` shows,
    ``untimed`` counts the checks without times (their process died), ``busy`` is the
    seconds each worker spent in checks (against the wall time: how long it was idle)."""

    wall_s: float
    started_at: float
    chains: tuple[Chain, ...]
    untimed: int
    busy: Mapping[str, float]

    @property
    def longest(self) -> Chain:
        return self.chains[0]

    @property
    def ratio(self) -> float:
        """The run's wall time over its longest chain's span (1.0 at best)."""
        return self.wall_s / self.longest.span if self.longest.span > 0 else float("inf")

    def critical_path(self, count: int = CRITICAL_PATH) -> tuple[Chain, ...]:
        """The *count* chains that ended last, the last first."""
        return tuple(sorted(self.chains, key=lambda c: c.stopped_at, reverse=True)[:count])


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def run_timings(document: Mapping[str, Any]) -> RunTimings:
    """The timings of a parsed ``results.json`` document."""
    wall = _number(document.get("duration_seconds"))
    try:
        started = datetime.fromisoformat(str(document.get("started_at"))).timestamp()
    except ValueError:
        raise TimingsError("results.json has no started_at time") from None
    if wall is None:
        raise TimingsError("results.json has no duration_seconds")
    checks = document.get("checks")
    if not isinstance(checks, list):
        raise TimingsError("results.json has no checks list")
    grouped: dict[str, list[tuple[float, float, str]]] = {}
    untimed = 0
    for check in checks:
        start, stop = _number(check.get("started_at")), _number(check.get("stopped_at"))
        if start is None or stop is None:
            untimed += 1
            continue
        name = chain_name(str(check.get("nodeid", "")))
        grouped.setdefault(name, []).append((start, stop, str(check.get("worker", ""))))
    if not grouped:
        raise TimingsError(
            "results.json records no check's start and stop (a run of an older suite, "
            "or no check ran)"
        )
    chains = (_chain(name, spans) for name, spans in grouped.items())
    ordered = sorted(chains, key=lambda c: (-c.span, c.name))
    busy: dict[str, float] = {}
    for spans in grouped.values():
        for start, stop, worker in spans:
            busy[worker] = busy.get(worker, 0.0) + stop - start
    return RunTimings(wall, started, tuple(ordered), untimed, dict(sorted(busy.items())))


def _chain(name: str, spans: Sequence[tuple[float, float, str]]) -> Chain:
    return Chain(
        name=name,
        started_at=min(start for start, _, _ in spans),
        stopped_at=max(stop for _, stop, _ in spans),
        checks=len(spans),
        workers=tuple(sorted({worker for _, _, worker in spans})),
        busy=sum(stop - start for start, stop, _ in spans),
    )


def load_timings(path: Path) -> RunTimings:
    """The timings of a run: its report folder, or its ``results.json``."""
    file = path / JSON_NAME if path.is_dir() else path
    try:
        document = json.loads(file.read_text(encoding="utf-8"))
    except OSError as error:
        raise TimingsError(f"cannot read {file}: {error.strerror or error}") from None
    except json.JSONDecodeError as error:
        raise TimingsError(f"{file} is not JSON: {error}") from None
    if not isinstance(document, dict):
        raise TimingsError(f"{file} is not a results.json document")
    return run_timings(document)


def _columns(*cells: str) -> str:
    span, busy, start, stop, worker, checks, name = cells
    return f"  {span:>8}  {busy:>8}  {start:>8} → {stop:>8}  {worker:<6}  {checks:>6}  {name}"


def _row(chain: Chain, origin: float) -> str:
    return _columns(
        f"{chain.span:.1f} s",
        f"{chain.busy:.1f} s",
        f"+{chain.started_at - origin:.1f}",
        f"+{chain.stopped_at - origin:.1f}",
        ",".join(chain.workers) or "-",
        str(chain.checks),
        chain.name,
    )


def table(timings: RunTimings, *, chains: int | None = None) -> list[str]:
    """The lines that show *timings*: the wall time, the longest chain and the ratio, the
    chains longest first (the first *chains* of them; all when None), the critical path
    and each worker's busy time. Offsets are seconds from the run's start."""
    origin = timings.started_at
    longest = timings.longest
    lines = [
        f"wall time of the run: {timings.wall_s:.1f} s (results.json duration_seconds)",
        f"longest chain: {longest.span:.1f} s  {longest.name}",
        f"ratio wall / longest chain: {timings.ratio:.3f}",
        f"chains: {len(timings.chains)}"
        + (f" ({timings.untimed} checks without times)" if timings.untimed else ""),
        _columns("span", "busy", "from", "to", "worker", "checks", "chain"),
    ]
    shown = timings.chains if chains is None else timings.chains[:chains]
    lines += [_row(chain, origin) for chain in shown]
    hidden = len(timings.chains) - len(shown)
    if hidden:
        lines.append(f"  ({hidden} shorter chains not shown)")
    lines.append(f"critical path (the {CRITICAL_PATH} chains that ended last, last first):")
    lines += [_row(chain, origin) for chain in timings.critical_path()]
    busy = ", ".join(
        f"{worker} {seconds:.1f} s ({seconds / timings.wall_s:.0%})"
        for worker, seconds in timings.busy.items()
        if timings.wall_s > 0
    )
    lines.append(f"busy per worker (in checks / wall): {busy}")
    return lines
