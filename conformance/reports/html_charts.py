"""Inline SVG pictures for ``report.html``: delivery timelines and rate-limit charts.

A delivery timeline puts each attempt a chain received on a time axis (seconds after the
first attempt) against the window in which spec §6 Behaviour allows it: attempt *n + 1*
comes after attempt *n* ended (the target's reply, or the 10 s per-attempt timeout) and
the backoff (1 s, then 2 s). The spec does not say whether the backoff counts from the
attempt's start or its end (DLV-BACKOFF-03), so the window spans both readings, widened
by the run's timing tolerance. A fourth attempt has no window: there are 3 attempts.

A rate chart plots ``X-RateLimit-Remaining`` against time over the exchanges a rate
check kept, with each 429 marked.

Everything drawn from a run is escaped here; the SVG is inline, so the page stays one
offline file.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from conformance.evidence import Exchange
from conformance.findings import Arrival, ChainTrace

__all__ = ["allowed_window", "rate_chart", "timeline_svg"]

_WIDTH = 880
_LEFT = 134  # room for the row labels
_RIGHT = 300  # room for what the target replied
_ROW = 26
_TOP = 8
_AXIS = 30


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def allowed_window(chain: ChainTrace, index: int) -> tuple[float, float] | None:
    """When attempt *index* (0-based, > 0) of *chain* may arrive, given the attempt
    before it; None when no further attempt is allowed.

    The previous attempt ended when the target replied (after ``held`` s) or at the 10 s
    timeout, whichever came first; the backoff follows its end, or its start (the spec
    leaves which open), so the window runs from the earlier reading to the later one.
    """
    if not 0 < index <= len(chain.backoffs):
        return None
    previous, backoff = chain.arrivals[index - 1], chain.backoffs[index - 1]
    ended = previous.at + min(previous.held, chain.timeout)
    earliest = max(previous.at + backoff, ended)
    return earliest - chain.tolerance, ended + backoff + chain.tolerance


def _ticks(span: float) -> list[float]:
    step = next(s for s in (0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 60.0, 120.0) if span / s <= 12)
    count = int(span / step) + 1
    return [round(i * step, 3) for i in range(count)]


def _replied(arrival: Arrival, timeout: float) -> str:
    if arrival.held >= timeout:
        return f"held {arrival.held:g} s (over the {timeout:g} s timeout) then {arrival.status}"
    if arrival.held > 0:
        return f"held {arrival.held:g} s, then {arrival.status}"
    return f"replied {arrival.status} at once"


def timeline_svg(chain: ChainTrace) -> str:
    """One chain's attempts against the windows the spec allows them, as inline SVG."""
    arrivals = chain.arrivals
    timeout = chain.timeout
    windows = [allowed_window(chain, i) if i else None for i in range(len(arrivals))]
    ends = [a.at + max(a.held, timeout if a.held else 0.0) for a in arrivals]
    ends += [w[1] for w in windows if w is not None]
    span = max(max(ends, default=1.0), 1.0) * 1.05
    plot = _WIDTH - _LEFT - _RIGHT
    height = _TOP + _ROW * len(arrivals) + _AXIS

    def x(seconds: float) -> float:
        return round(_LEFT + plot * max(0.0, seconds) / span, 1)

    parts = [
        f"<svg class='timeline' role='img' xmlns='http://www.w3.org/2000/svg' "
        f"width='{_WIDTH}' height='{height}' viewBox='0 0 {_WIDTH} {height}'>"
        f"<title>delivery chain {_e(chain.name)}: {len(arrivals)} attempt(s)</title>"
    ]
    axis_y = _TOP + _ROW * len(arrivals) + 4
    for tick in _ticks(span):
        parts.append(
            f"<line x1='{x(tick)}' y1='{_TOP}' x2='{x(tick)}' y2='{axis_y}' class='grid'/>"
            f"<text x='{x(tick)}' y='{axis_y + 14}' class='tick'>{tick:g}</text>"
        )
    parts.append(
        f"<text x='{_LEFT + plot}' y='{axis_y + 26}' class='tick end'>"
        "seconds after the first attempt</text>"
    )
    for index, arrival in enumerate(arrivals):
        top = _TOP + _ROW * index
        middle = top + _ROW / 2
        window = windows[index]
        on_time = True
        if index and window is None:
            on_time = False
            parts.append(
                f"<rect x='{x(arrivals[index - 1].at)}' y='{top + 4}' "
                f"width='{x(span) - x(arrivals[index - 1].at)}' height='{_ROW - 8}' "
                "class='forbidden'><title>no attempt allowed: "
                f"{len(chain.backoffs) + 1} attempts at most</title></rect>"
            )
        elif window is not None:
            low, high = window
            on_time = low <= arrival.at <= high
            parts.append(
                f"<rect x='{x(low)}' y='{top + 4}' width='{max(2.0, x(high) - x(low))}' "
                f"height='{_ROW - 8}' class='window'><title>allowed from {low:.2f} to "
                f"{high:.2f} s</title></rect>"
            )
        if arrival.held:
            timeout_at = arrival.at + timeout
            parts.append(
                f"<rect x='{x(arrival.at)}' y='{middle - 3}' "
                f"width='{x(arrival.at + arrival.held) - x(arrival.at)}' height='6' "
                f"class='held'><title>the target held its reply {arrival.held:g} s</title>"
                f"</rect><line x1='{x(timeout_at)}' y1='{top + 2}' x2='{x(timeout_at)}' "
                f"y2='{top + _ROW - 2}' class='timeout'><title>{timeout:g} s per-attempt "
                "timeout</title></line>"
            )
        label = f"attempt {index + 1}" + (f" (header {arrival.attempt})" if arrival.attempt else "")
        verdict = "on-time" if on_time else "late"
        parts.append(
            f"<text x='4' y='{middle + 4}' class='label'>{_e(label)}</text>"
            f"<circle cx='{x(arrival.at)}' cy='{middle}' r='5' class='arrival {verdict}'>"
            f"<title>arrived at {arrival.at:.2f} s</title></circle>"
            f"<text x='{_LEFT + plot + 8}' y='{middle + 4}' class='label'>"
            f"+{arrival.at:.2f} s, {_e(_replied(arrival, timeout))}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _remaining(exchange: Exchange) -> int | None:
    for name, value in exchange.response_headers:
        if name.lower() == "x-ratelimit-remaining":
            try:
                return int(value.strip())
            except ValueError:
                return None
    return None


def rate_chart(exchanges: Sequence[Exchange]) -> str:
    """``X-RateLimit-Remaining`` against time over *exchanges* (a 429 drawn red); empty
    when fewer than two of them carry the header."""
    points = [
        (x.started_at, remaining, x.status)
        for x in exchanges
        if x.started_at and (remaining := _remaining(x)) is not None
    ]
    if len(points) < 2:
        return ""
    start = min(p[0] for p in points)
    span = max(max(p[0] for p in points) - start, 1.0) * 1.05
    top_value = max(max(p[1] for p in points), 1)
    width, height, left, bottom = 520, 180, 48, 30
    plot_w, plot_h = width - left - 10, height - bottom - 10

    def x(at: float) -> float:
        return round(left + plot_w * (at - start) / span, 1)

    def y(value: int) -> float:
        return round(10 + plot_h * (1 - value / top_value), 1)

    parts = [
        f"<svg class='ratechart' role='img' xmlns='http://www.w3.org/2000/svg' "
        f"width='{width}' height='{height}' viewBox='0 0 {width} {height}'>"
        "<title>X-RateLimit-Remaining over time</title>"
        f"<line x1='{left}' y1='{y(0)}' x2='{left + plot_w}' y2='{y(0)}' class='grid'/>"
        f"<text x='{left - 4}' y='{y(top_value) + 4}' class='tick end'>{top_value}</text>"
        f"<text x='{left - 4}' y='{y(0) + 4}' class='tick end'>0</text>"
        f"<text x='{left + plot_w}' y='{height - 6}' class='tick end'>"
        f"{span / 1.05:.1f} s</text>"
        f"<text x='{left}' y='{height - 6}' class='tick'>remaining, by request time</text>"
    ]
    for at, remaining, status in points:
        kind = "limited" if status == 429 else "served"
        parts.append(
            f"<circle cx='{x(at)}' cy='{y(remaining)}' r='3' class='{kind}'>"
            f"<title>+{at - start:.2f} s: {_e(status)}, remaining {remaining}</title></circle>"
        )
    parts.append("</svg>")
    return "".join(parts)
