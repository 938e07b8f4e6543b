"""The ``[clock]`` capability of a target profile: how the suite gets past 00:00 UTC.

Spec §8: "Requests per day | Per tier, calendar day (UTC)" and "Daily credit cap | Per
tier; resets 00:00 UTC". A check of a reset must see the day end. A deployment can offer
that in one of two ways, both declared here rather than coded:

* ``advance``: a request that moves the target's calendar clock forward (a test mode,
  like the reference's ``serve --test-clock`` and its ``POST /test/clock``): the method,
  the path, a JSON body template in which the string ``"{seconds}"`` stands for the number
  of seconds to move, and the status that says it moved;
* ``wait_for_midnight = true``: the run waits across 00:00 UTC in real time, when the next
  midnight is at most ``max_wait_seconds`` away (a bounded wait).

Without either the capability is missing and the daily-reset checks are skipped with that
reason (``conformance.run.plugin.capabilities``).

    [clock]
    method = "POST"
    path = "/test/clock"
    body = { advance_seconds = "{seconds}" }
    status = 200
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

__all__ = [
    "CLOCK_UNDECLARED_FIX",
    "SECONDS_PLACEHOLDER",
    "ClockAdvance",
    "ClockProfile",
    "next_utc_midnight",
    "parse_clock",
]

#: The body template's stand-in for the number of seconds to move the clock.
SECONDS_PLACEHOLDER: Final = "{seconds}"
#: The default bound of ``wait_for_midnight``: a quarter of an hour.
DEFAULT_MAX_WAIT_SECONDS: Final = 900.0
#: What to add to the profile when a check needs the capability.
CLOCK_UNDECLARED_FIX: Final = (
    "add a [clock] table to the profile: the request that moves the target's calendar "
    'clock forward (method, path, body with "{seconds}", status), or wait_for_midnight '
    "= true to wait across 00:00 UTC (at most max_wait_seconds)"
)


def next_utc_midnight(moment: float) -> float:
    """The unix time of the first 00:00 UTC after *moment*."""
    day = datetime.fromtimestamp(moment, UTC)
    return (datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)).timestamp()


@dataclass(frozen=True)
class ClockAdvance:
    """The request that moves the target's calendar clock forward by some seconds."""

    method: str
    path: str
    body: Mapping[str, Any]
    status: int

    def body_for(self, seconds: float) -> dict[str, Any]:
        """The body with every ``"{seconds}"`` replaced by *seconds* (a JSON number)."""
        return {
            name: seconds if value == SECONDS_PLACEHOLDER else value
            for name, value in self.body.items()
        }


@dataclass(frozen=True)
class ClockProfile:
    """How the suite gets past 00:00 UTC on the target (none of the ways: not declared)."""

    advance: ClockAdvance | None = None
    wait_for_midnight: bool = False
    max_wait_seconds: float = DEFAULT_MAX_WAIT_SECONDS

    def missing(self, now: float | None = None) -> str | None:
        """Why the suite cannot get past midnight now (None: it can)."""
        if self.advance is not None:
            return None
        if not self.wait_for_midnight:
            return CLOCK_UNDECLARED_FIX
        moment = time.time() if now is None else now
        wait = next_utc_midnight(moment) - moment
        if wait > self.max_wait_seconds:
            return (
                f"00:00 UTC is {wait:.0f} s away, beyond [clock] max_wait_seconds = "
                f"{self.max_wait_seconds:g}: run again shortly before midnight UTC, raise "
                "max_wait_seconds, or declare the request that moves the clock"
            )
        return None

    def to_dict(self) -> dict[str, Any]:
        """The table as a profile writes it (without the defaults)."""
        table: dict[str, Any] = {}
        if self.advance is not None:
            table.update(
                method=self.advance.method,
                path=self.advance.path,
                body=dict(self.advance.body),
                status=self.advance.status,
            )
        if self.wait_for_midnight:
            table.update(wait_for_midnight=True, max_wait_seconds=self.max_wait_seconds)
        return table


def parse_clock(table: Mapping[str, Any] | None) -> tuple[ClockProfile, list[str]]:
    """The ``[clock]`` table (already checked against the profile's JSON schema) and the
    problems the schema cannot state."""
    if table is None:
        return ClockProfile(), []
    problems: list[str] = []
    advance: ClockAdvance | None = None
    if "path" in table:
        body = dict(table.get("body", {}))
        if SECONDS_PLACEHOLDER not in body.values():
            problems.append(
                f'clock.body: no value is "{SECONDS_PLACEHOLDER}"; write the field that takes '
                f'the seconds to move as "{SECONDS_PLACEHOLDER}", e.g. '
                f'{{ advance_seconds = "{SECONDS_PLACEHOLDER}" }}'
            )
        advance = ClockAdvance(
            method=str(table.get("method", "POST")).upper(),
            path=str(table["path"]),
            body=body,
            status=int(table.get("status", 200)),
        )
    wait = bool(table.get("wait_for_midnight", False))
    if advance is None and not wait:
        problems.append(f"clock: declares nothing; {CLOCK_UNDECLARED_FIX}")
    return (
        ClockProfile(
            advance=advance,
            wait_for_midnight=wait,
            max_wait_seconds=float(table.get("max_wait_seconds", DEFAULT_MAX_WAIT_SECONDS)),
        ),
        problems,
    )
