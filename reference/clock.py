"""The calendar clock of the reference: the UTC day its daily limits count in (spec §8:
"Requests per day | Per tier, calendar day (UTC)", "Daily credit cap | Per tier; resets
00:00 UTC").

The daily request count and the daily credits are keyed by the UTC day this clock gives.
Normally it is the wall clock. In test mode (``serve --test-clock``, announced with a
WARNING at start) it is the wall clock plus an offset that a harness moves forward through
``POST /test/clock`` (:func:`clock_routes`), so a conformance run can watch the day end at
00:00 UTC without waiting for it. Only the calendar moves: the rolling minute and the
delivery timers keep real time (they are durations, not days of the calendar).
"""

from __future__ import annotations

import math
import threading
import time
from datetime import UTC, datetime, timedelta

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from reference.bodies import read_json_object
from reference.errors import ApiError

__all__ = ["CLOCK", "TEST_CLOCK_PATH", "ServiceClock", "clock_routes", "day_of", "next_midnight"]

#: Where a harness moves the test clock (mounted only with ``serve --test-clock``).
TEST_CLOCK_PATH = "/test/clock"
#: How far one move may go: a bound, so a typo cannot throw the calendar years ahead.
MAX_ADVANCE_S = 7 * 86_400.0


def day_of(moment: float, utc_offset_s: float = 0.0) -> str:
    """The calendar day of unix time ``moment`` (``2026-08-01``), in UTC unless an offset
    is given (only a fault counts days in another zone)."""
    return datetime.fromtimestamp(moment + utc_offset_s, UTC).date().isoformat()


def next_midnight(moment: float) -> float:
    """The unix time of the first 00:00 UTC after ``moment``."""
    day = datetime.fromtimestamp(moment, UTC)
    midnight = datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)
    return midnight.timestamp()


class ServiceClock:
    """Wall-clock time plus an offset that only moves forward (zero outside test mode)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._offset = 0.0

    @property
    def offset(self) -> float:
        return self._offset

    def now(self) -> float:
        """The service's unix time."""
        return time.time() + self._offset

    def advance(self, seconds: float) -> float:
        """Move the clock ``seconds`` forward; returns the new offset."""
        if not math.isfinite(seconds) or not 0 <= seconds <= MAX_ADVANCE_S:
            raise ValueError(f"advance_seconds must be between 0 and {MAX_ADVANCE_S:g}")
        with self._lock:
            self._offset += seconds
            return self._offset


#: The service's clock (one per process, as the service is).
CLOCK = ServiceClock()


def _state() -> dict[str, float | str]:
    now = CLOCK.now()
    return {"now": now, "offset_seconds": CLOCK.offset, "utc_day": day_of(now)}


async def _read_clock(request: Request) -> Response:
    return JSONResponse(_state())


async def _move_clock(request: Request) -> Response:
    body = await read_json_object(request)
    seconds = body.get("advance_seconds")
    if not isinstance(seconds, int | float) or isinstance(seconds, bool):
        raise ApiError(400, 'send {"advance_seconds": <seconds to move the clock forward>}')
    try:
        CLOCK.advance(float(seconds))
    except ValueError as error:
        raise ApiError(400, str(error)) from None
    return JSONResponse(_state())


def clock_routes() -> list[Route]:
    """``GET``/``POST /test/clock``: read the service's clock, move it forward. Test mode
    only: the service mounts them with ``--test-clock`` and never otherwise."""
    return [
        Route(TEST_CLOCK_PATH, _read_clock, methods=["GET"]),
        Route(TEST_CLOCK_PATH, _move_clock, methods=["POST"]),
    ]
