"""Request limits of spec §8: per-key rolling minute, per-key UTC day; the 429 of §7.

The rolling-minute window is kept in memory (one deque of admission times per key): it is
a one-minute memory, so a restart forgets at most a minute of history. When several
processes serve one store (``serve --workers N``) it is kept in the store instead (table
``rate_window``, one row per admission), so the limit holds across them. The per-day
counts live in the store (``request_counts``) so a restart does not reset the day.
Every /v1 request that authenticates counts (spec §8 "Requests per minute ... per API
key"), whatever its endpoint; a request refused with 429 is not admitted and does not
count, so a client that waits Retry-After seconds is served again.
"""

from __future__ import annotations

import email.utils
import math
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reference.clock import CLOCK, day_of, next_midnight
from reference.errors import ApiError
from reference.fault import Fault, Faults
from reference.store import Store
from reference.tiers import Tier

__all__ = ["RateLimiter", "WindowState", "rate_limited", "seconds_to_utc_midnight", "utc_day"]

#: The per-minute limit's rolling window, in seconds (spec §8).
WINDOW_S = 60.0

# Faults injected here (``--fault NAME``; the registry, ``reference/faults.py``, collects them).
MISSING_RETRY_AFTER = Fault(
    "missing-retry-after",
    "RATE-HDR-01",
    "429 responses lack the Retry-After header",
)
RETRY_AFTER_HTTP_DATE = Fault(
    "retry-after-http-date",
    "RATE-HDR-02",
    "429 responses give Retry-After as an HTTP-date instead of seconds",
)
RATE_LIMIT_HEADERS_MISSING = Fault(
    "rate-limit-headers-missing",
    "RATE-HDR-03",
    "429 responses lack X-RateLimit-*",
)
RATELIMIT_RESET_MILLISECONDS = Fault(
    "ratelimit-reset-milliseconds",
    "RATE-HDR-05",
    "X-RateLimit-Reset is a unix time in milliseconds",
)
RATE_LIMIT_NEVER_ENFORCED = Fault(
    "rate-limit-never-enforced",
    "RATE-RPM-02",
    "the per-minute request limit is ignored",
)
ENFORCED_LIMIT_BELOW_REPORTED = Fault(
    "enforced-limit-below-reported",
    "RATE-RPM-01",
    "the per-minute limit enforced is 5 below the tier record's requests_per_minute",
)
RATELIMIT_REMAINING_NOT_ZERO = Fault(
    "ratelimit-remaining-not-zero",
    "RATE-HDR-04",
    "a rate-limit 429 gives X-RateLimit-Remaining as the whole limit instead of 0",
)
RATE_LIMIT_PER_ACCOUNT = Fault(
    "rate-limit-per-account",
    "RATE-RPM-03",
    "the per-minute window is shared by all keys of an account instead of kept per key",
)
RATE_WINDOW_FIXED = Fault(
    "rate-window-fixed",
    "RATE-RPM-04",
    "the per-minute window is fixed: its count is dropped a minute after its first request",
)
DAILY_REQUEST_LIMIT_NOT_ENFORCED = Fault(
    "daily-request-limit-not-enforced",
    "RATE-RPD-01",
    "the per-day request limit is ignored",
)
DAILY_REQUESTS_RESET_AT_LOCAL_MIDNIGHT = Fault(
    "daily-requests-reset-at-local-midnight",
    "RATE-RPD-02",
    "requests are counted per UTC+05:30 day: the count resets at 18:30 UTC, not 00:00 UTC",
)
RATE_LIMIT_REFUSED_WITH_403 = Fault(
    "rate-limit-refused-with-403",
    "RATE-429-01",
    "a request over the per-minute limit is refused with 403 instead of 429",
)
RATE_429_BODY_WITHOUT_DETAIL = Fault(
    "rate-429-body-without-detail",
    "RATE-BODY-01",
    'a per-minute rate-limit 429 has the body {"message": ...} instead of a `detail` string',
)


#: Counts one request of a key on a day unless the day is used up (params: key id, day,
#: the per-day limit twice); one statement, atomic on its own.
_COUNT_DAY = (
    "INSERT INTO request_counts (key_id, day, count) SELECT ?, ?, 1 WHERE ? > 0 "
    "ON CONFLICT (key_id, day) DO UPDATE SET count = count + 1 WHERE count < ?"
)
#: The stored minute window of one key (``shared`` mode): the requests admitted in it
#: (the key's counter less its rows not yet pruned) and the oldest admission in it.
_WINDOW_SQL = (
    "SELECT COALESCE((SELECT used FROM rate_used WHERE counted_as = :key), 0) "
    "- (SELECT COUNT(*) FROM rate_window WHERE counted_as = :key AND at <= :start) AS used, "
    "(SELECT MIN(at) FROM rate_window WHERE counted_as = :key AND at > :start) AS oldest"
)


#: The zone of the fault DAILY_REQUESTS_RESET_AT_LOCAL_MIDNIGHT: a fixed offset, so the
#: fault is the same whatever the process's TZ.
_LOCAL_UTC_OFFSET_S = 5.5 * 3600


def _stored_window(
    run: Callable[[str, dict[str, Any]], list[sqlite3.Row]], counted_as: str, now: float
) -> tuple[int, float]:
    """Requests in a stored minute window at ``now`` and its oldest admission (``now``
    if none); ``run`` reads through the store or a connection in a transaction."""
    row = run(_WINDOW_SQL, {"key": counted_as, "start": now - WINDOW_S})[0]
    oldest = row["oldest"]
    return int(row["used"]), now if oldest is None else float(oldest)


def utc_day(now: float | None = None) -> str:
    """The calendar day (UTC) of ``now`` (default: the service's clock), e.g.
    ``2026-08-01``: daily limits reset at 00:00 UTC."""
    return day_of(CLOCK.now() if now is None else now)


def seconds_to_utc_midnight(now: float | None = None) -> float:
    """Seconds until the next 00:00 UTC (of the service's clock by default), when daily
    limits and the credit cap reset."""
    moment = CLOCK.now() if now is None else now
    return next_midnight(moment) - moment


@dataclass(frozen=True)
class WindowState:
    """The per-minute window of one key as the X-RateLimit-* headers describe it."""

    limit: int
    remaining: int
    reset_unix: int


def rate_limited(
    detail: str,
    *,
    retry_after_s: float,
    window: WindowState,
    faults: Faults,
) -> ApiError:
    """The 429 of spec §7: Retry-After (whole seconds, at least 1) and X-RateLimit-*."""
    headers: dict[str, str] = {}
    if not faults.on(MISSING_RETRY_AFTER):
        seconds = max(1, math.ceil(retry_after_s))
        headers["Retry-After"] = (
            email.utils.formatdate(time.time() + seconds, usegmt=True)
            if faults.on(RETRY_AFTER_HTTP_DATE)
            else str(seconds)
        )
    if not faults.on(RATE_LIMIT_HEADERS_MISSING):
        reset = window.reset_unix * (1000 if faults.on(RATELIMIT_RESET_MILLISECONDS) else 1)
        headers["X-RateLimit-Limit"] = str(window.limit)
        headers["X-RateLimit-Remaining"] = str(window.remaining)
        headers["X-RateLimit-Reset"] = str(reset)
    return ApiError(429, detail, headers)


class RateLimiter:
    """Admits or refuses requests of a key against its tier's per-minute and per-day limits.

    ``shared``: several processes serve the one store (``serve --workers``), so the
    rolling minute lives in the store (table ``rate_window``) and each admission is one
    ``BEGIN IMMEDIATE`` transaction; otherwise it lives in this process's memory.
    """

    def __init__(self, store: Store, faults: Faults, *, shared: bool = False) -> None:
        self._store = store
        self._faults = faults
        self._shared = shared
        self._lock = threading.Lock()
        self._windows: dict[str, deque[float]] = {}

    def _prune(self, window: deque[float], now: float) -> None:
        if self._faults.on(RATE_WINDOW_FIXED) and window and window[0] <= now - WINDOW_S:
            window.clear()  # a fixed minute from its first request: all of it at once
        while window and window[0] <= now - WINDOW_S:
            window.popleft()

    def window_state(self, key_id: str, tier: Tier) -> WindowState:
        """Where the key stands in its current minute (for 429s raised elsewhere)."""
        if self._shared:
            now = time.time()
            used, oldest = _stored_window(self._store.read, key_id, now)
        else:
            now = time.monotonic()
            with self._lock:
                window = self._windows.setdefault(key_id, deque())
                self._prune(window, now)
                used = len(window)
                oldest = window[0] if window else now
        reset_in = (oldest + WINDOW_S - now) if used else WINDOW_S
        return WindowState(
            limit=tier.requests_per_minute,
            remaining=max(0, tier.requests_per_minute - used),
            reset_unix=math.ceil(time.time() + reset_in),
        )

    def _minute_refusal(self, tier: Tier, wait: float) -> ApiError:
        """The 429 of a full minute window, ``wait`` seconds before a slot frees."""
        state = WindowState(
            limit=tier.requests_per_minute,
            remaining=tier.requests_per_minute
            if self._faults.on(RATELIMIT_REMAINING_NOT_ZERO)
            else 0,
            reset_unix=math.ceil(time.time() + wait),
        )
        refusal = rate_limited(
            f"rate limit exceeded: {tier.requests_per_minute} requests per rolling "
            f"minute for this API key (tier {tier.plan_code}); retry after the "
            "Retry-After seconds",
            retry_after_s=wait,
            window=state,
            faults=self._faults,
        )
        if self._faults.on(RATE_429_BODY_WITHOUT_DETAIL):
            refusal.detail_field = "message"
        if self._faults.on(RATE_LIMIT_REFUSED_WITH_403):
            refusal.status = 403
        return refusal

    def admit(self, key_id: str, tier: Tier, account_id: str) -> WindowState | None:
        """Count one request of ``key_id`` (of ``account_id``), or raise the 429 of spec §7.

        Returns where the key now stands in its minute window (the service also sends it
        as X-RateLimit-* headers on admitted /v1 requests), None when nothing is counted.
        """
        if self._faults.on(RATE_LIMIT_NEVER_ENFORCED):
            return None
        enforced = tier.requests_per_minute
        if self._faults.on(ENFORCED_LIMIT_BELOW_REPORTED):
            enforced = max(1, enforced - 5)
        counted_as = account_id if self._faults.on(RATE_LIMIT_PER_ACCOUNT) else key_id
        if self._shared:
            return self._admit_shared(key_id, counted_as, tier, enforced)
        now = time.monotonic()
        with self._lock:
            window = self._windows.setdefault(counted_as, deque())
            self._prune(window, now)
            if len(window) >= enforced:
                raise self._minute_refusal(tier, window[0] + WINDOW_S - now)
            window.append(now)
            remaining = tier.requests_per_minute - len(window)
            reset_in = window[0] + WINDOW_S - now
        self._admit_day(key_id, counted_as, tier, remaining, reset_in, now)
        return WindowState(
            limit=tier.requests_per_minute,
            remaining=max(0, remaining),
            reset_unix=math.ceil(time.time() + reset_in),
        )

    def _admit_shared(self, key_id: str, counted_as: str, tier: Tier, enforced: int) -> WindowState:
        """``admit`` over the store, in wall-clock time (the clock every process shares).

        A full window is refused on a read alone, without the write lock: a later state
        of the store only holds more admissions within that minute, so the refusal
        stands. Otherwise the minute (its rows and its counter, ``rate_used``, which
        spares counting thousands of rows) and the day's count change in one
        ``BEGIN IMMEDIATE`` transaction, so no process admits past either limit.
        """
        fixed = self._faults.on(RATE_WINDOW_FIXED)
        if not fixed:  # the fault's window drops whole minutes: only the write path knows
            now = time.time()
            used, oldest = _stored_window(self._store.read, counted_as, now)
            if used >= enforced:
                raise self._minute_refusal(tier, oldest + WINDOW_S - now)
        day, per_day = self._request_day(), self._per_day(tier)
        with self._store.transaction() as conn:

            def run(sql: str, params: dict[str, Any]) -> list[sqlite3.Row]:
                return conn.execute(sql, params).fetchall()

            now = time.time()
            pruned = self._prune_stored(conn, counted_as, now, fixed=fixed)
            if pruned:
                conn.execute(
                    "UPDATE rate_used SET used = MAX(0, used - ?) WHERE counted_as = ?",
                    (pruned, counted_as),
                )
            used, oldest = _stored_window(run, counted_as, now)
            # Raised inside the transaction: rolling back undoes only the pruning above.
            if used >= enforced:
                raise self._minute_refusal(tier, oldest + WINDOW_S - now)
            remaining = tier.requests_per_minute - used - 1
            reset_in = oldest + WINDOW_S - now
            if not conn.execute(_COUNT_DAY, (key_id, day, per_day, per_day)).rowcount:
                raise self._day_refusal(tier, remaining, reset_in)
            conn.execute(
                "INSERT INTO rate_window (counted_as, at) VALUES (?, ?)", (counted_as, now)
            )
            conn.execute(
                "INSERT INTO rate_used (counted_as, used) VALUES (?, 1) "
                "ON CONFLICT (counted_as) DO UPDATE SET used = used + 1",
                (counted_as,),
            )
        return WindowState(
            limit=tier.requests_per_minute,
            remaining=max(0, remaining),
            reset_unix=math.ceil(time.time() + reset_in),
        )

    @staticmethod
    def _prune_stored(conn: sqlite3.Connection, counted_as: str, now: float, *, fixed: bool) -> int:
        """Drop the admissions that left the window; how many."""
        if fixed:
            row = conn.execute(
                "SELECT MIN(at) AS oldest FROM rate_window WHERE counted_as = ?", (counted_as,)
            ).fetchone()
            if row["oldest"] is not None and row["oldest"] <= now - WINDOW_S:
                # A fixed minute from its first request: all of it at once.
                return conn.execute(
                    "DELETE FROM rate_window WHERE counted_as = ?", (counted_as,)
                ).rowcount
        # Rows a minute in the future can only come from a clock set back: dropped too.
        return conn.execute(
            "DELETE FROM rate_window WHERE counted_as = ? AND (at <= ? OR at > ?)",
            (counted_as, now - WINDOW_S, now + WINDOW_S),
        ).rowcount

    def _request_day(self) -> str:
        """The day the requests are counted in: the calendar day (UTC) of the service's
        clock (spec §8, "Requests per day | Per tier, calendar day (UTC)")."""
        local = self._faults.on(DAILY_REQUESTS_RESET_AT_LOCAL_MIDNIGHT)
        return day_of(CLOCK.now(), _LOCAL_UTC_OFFSET_S if local else 0.0)

    def _per_day(self, tier: Tier) -> int:
        if self._faults.on(DAILY_REQUEST_LIMIT_NOT_ENFORCED):
            return 2**62
        return tier.requests_per_day

    def _admit_day(
        self, key_id: str, counted_as: str, tier: Tier, remaining: int, reset_in: float, now: float
    ) -> None:
        # One statement, atomic on its own: count the request unless the day is used up.
        per_day = self._per_day(tier)
        counted = self._store.execute(_COUNT_DAY, (key_id, self._request_day(), per_day, per_day))
        if counted:
            return
        # Refused for the day: take the request back out of the minute window.
        with self._lock:
            window = self._windows.get(counted_as)
            if window and now in window:
                window.remove(now)
        raise self._day_refusal(tier, remaining, reset_in)

    def _day_refusal(self, tier: Tier, remaining: int, reset_in: float) -> ApiError:
        return rate_limited(
            f"daily request limit reached: {tier.requests_per_day} requests per UTC day for "
            f"this API key (tier {tier.plan_code}); it resets at 00:00 UTC",
            retry_after_s=seconds_to_utc_midnight(),
            window=WindowState(
                limit=tier.requests_per_minute,
                remaining=max(0, remaining),
                reset_unix=math.ceil(time.time() + reset_in),
            ),
            faults=self._faults,
        )

    def requests_today(self, key_ids: list[str]) -> int:
        """Requests admitted today for the given keys (GET /v1/account/usage)."""
        if not key_ids:
            return 0
        marks = ",".join("?" for _ in key_ids)
        rows = self._store.read(
            f"SELECT COALESCE(SUM(count), 0) AS n FROM request_counts "  # noqa: S608 - placeholders only
            f"WHERE day = ? AND key_id IN ({marks})",
            [self._request_day(), *key_ids],
        )
        total: int = rows[0]["n"]
        return total
