"""The ``low-limit`` account of the rate checks: its rolling window, its tier, the runs.

Set-up for ``test_rate_limits.py``, the one module that uses the ``low-limit`` key role
(its docstring says why there must be only one: pytest-xdist keeps a module on one
worker, and the account's window, in-flight generations and daily credits are shared by
everything that uses the key). It holds no check: :data:`ACCOUNT` paces the requests in
the account's rolling minute, :func:`first_rate_run` and :func:`first_cap_run` send the
two runs up to a 429 that several checks examine, once per process.

The state here is per process, like that module's: one worker runs all of its checks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, Final

import httpx
import pytest

from conformance.judge.asserts import credits_used_today, describe, json_object
from conformance.observe.receiver import DeliveryTimeout, Endpoint
from conformance.observe.timing import delivery_deadline
from conformance.target.client import ApiClient, Recorder
from conformance.target.clock import next_utc_midnight
from conformance.target.profile import Profile
from conformance.target.setup import (
    IMAGES_PATH,
    SUBMIT_PROMPT,
    TIER_PATH,
    SetupFailed,
    rate_request_of,
)

__all__ = [
    "ACCOUNT",
    "DAILY_ROLE",
    "IMAGES",
    "MIDNIGHT_MARGIN_SECONDS",
    "ROLE",
    "SECOND_ROLE",
    "TIER_PATH",
    "WINDOW_SECONDS",
    "Account",
    "CapRun",
    "DayRun",
    "RateRun",
    "accepted_id",
    "across_midnight",
    "examined_429",
    "first_cap_run",
    "first_day_run",
    "first_rate_run",
    "move_target_clock",
    "open_window",
    "rate_request",
    "rate_request_words",
    "submit_body",
    "tier",
    "wait_finished",
]

ROLE: Final = "low-limit"
#: Another key of the low-limit account (spec §8: the per-minute limit is per API key).
SECOND_ROLE: Final = "low-limit-second"
#: A key whose tier has a small requests_per_day under a large requests_per_minute: the
#: day's limit is reached in a few seconds, and never mistaken for the minute's.
DAILY_ROLE: Final = "low-daily"
IMAGES: Final = IMAGES_PATH
#: Spec §8: "Requests per minute ... rolling window".
WINDOW_SECONDS: Final = 60.0
#: How far before and after 00:00 UTC the daily-reset checks look: more than the clocks
#: of the suite and the target may differ, and more than a request takes.
MIDNIGHT_MARGIN_SECONDS: Final = 30.0


def _is_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class Account:
    """What this process knows of the low-limit account: the send times of the rate
    checks' requests on its key (wall clock: its rolling window), its tier record, and
    the two runs up to a 429 that several checks examine (each sent once).

    Each check's exchanges are added when it ends (the rate module's ``_track_window``);
    ``make_room`` also counts the running check's own. Every request is counted, a
    refused one too: that can only make the wait longer than needed, never too short.
    """

    def __init__(self) -> None:
        self.sent: list[float] = []
        self.tier: dict[str, Any] | None = None
        self.rate_run: RateRun | None = None
        self.cap_run: CapRun | None = None
        self.day_run: DayRun | None = None
        #: Seconds this process has moved the target's calendar clock forward ([clock]):
        #: the target's clock reads the wall clock plus this.
        self.clock_moved = 0.0

    def target_now(self) -> float:
        """The target's calendar time as far as the suite knows it (unix seconds)."""
        return time.time() + self.clock_moved

    def make_room(self, recorder: Recorder, count: int | None, profile: Profile) -> None:
        """Wait until *count* more requests fit in the rolling minute (None: until the
        window holds none of ours)."""
        tolerance = profile.timing.tolerance_seconds
        span = WINDOW_SECONDS + tolerance
        sent = sorted([*self.sent, *(e.started_at for e in recorder.exchanges)])
        now = time.time()
        recent = [t for t in sent if t > now - span]
        if not recent:
            return
        if count is None or self.tier is None:
            wait_until = recent[-1] + span  # all of ours out of the window
        else:
            limit = int(self.tier["requests_per_minute"])
            if count > limit:
                raise SetupFailed(f"setup: {count} requests cannot fit in a window of {limit}")
            excess = len(recent) + count - limit
            if excess <= 0:
                return
            wait_until = recent[excess - 1] + span
        time.sleep(max(0.0, wait_until - time.time()))  # bounded: at most one window


#: The low-limit account as this process knows it.
ACCOUNT: Final = Account()


def move_target_clock(api: ApiClient, profile: Profile, moment: float) -> None:
    """Bring the target's calendar clock to *moment* (unix seconds, not in its past).

    With a declared request (``[clock]`` method, path, body): move it forward by the
    difference. With ``wait_for_midnight``: wait in real time until then, at most
    ``max_wait_seconds`` from now (the capability is checked before the check starts).
    """
    seconds = moment - ACCOUNT.target_now()
    if seconds <= 0:
        return
    advance = profile.clock.advance
    if advance is None:
        if seconds > profile.clock.max_wait_seconds:
            raise SetupFailed(
                f"setup: {seconds:.0f} s to wait, beyond [clock] max_wait_seconds = "
                f"{profile.clock.max_wait_seconds:g}"
            )
        time.sleep(seconds)  # the wait for 00:00 UTC itself, bounded just above
        return
    response = api.request(
        advance.method, advance.path, role="none", json=advance.body_for(seconds), patient=False
    )
    if response.status_code != advance.status:
        raise SetupFailed(
            f"setup: {advance.method} {advance.path} (the profile's [clock]) should move the "
            f"target's clock {seconds:.0f} s forward with {advance.status}; saw "
            f"{describe(response)}"
        )
    ACCOUNT.clock_moved += seconds


def across_midnight(
    api: ApiClient, profile: Profile, send: Callable[[], httpx.Response]
) -> tuple[httpx.Response | None, httpx.Response]:
    """*send* on the target shortly before its next 00:00 UTC, then shortly after (spec
    §8: the daily limits reset at 00:00 UTC); the first answer is None when the target's
    clock is already too close to midnight to ask before it."""
    midnight = next_utc_midnight(ACCOUNT.target_now())
    before: httpx.Response | None = None
    if ACCOUNT.target_now() < midnight - MIDNIGHT_MARGIN_SECONDS:
        move_target_clock(api, profile, midnight - MIDNIGHT_MARGIN_SECONDS)
        before = send()
    move_target_clock(api, profile, midnight + MIDNIGHT_MARGIN_SECONDS)
    return before, send()


def tier(api: ApiClient) -> dict[str, Any]:
    """The low-limit key's tier record (read once per process, then remembered)."""
    if ACCOUNT.tier is None:
        response = api.request("GET", TIER_PATH, role=ROLE)
        ACCOUNT.tier = _checked_tier(response)
    return ACCOUNT.tier


def _checked_tier(response: httpx.Response) -> dict[str, Any]:
    body = json_object(response)
    numbers = ("requests_per_minute", "concurrent_limit", "max_credits_per_day")
    if (
        response.status_code != 200
        or body is None
        or not all(_is_integer(body.get(n)) and body[n] > 0 for n in numbers)
    ):
        raise SetupFailed(
            f"setup: GET {TIER_PATH} ({ROLE}) gave no tier record with positive integer "
            f"{', '.join(numbers)}: {describe(response)}"
        )
    return body


def submit_body(endpoint: Endpoint, prompt: str = SUBMIT_PROMPT) -> dict[str, Any]:
    """A minimal image submit with an inline target on the receiver (spec §4)."""
    return {"prompt": prompt, "webhook": {"url": endpoint.url}}


def accepted_id(response: httpx.Response, what: str) -> str:
    """The id of a set-up submit that must be accepted; a set-up error otherwise."""
    body = json_object(response)
    if response.status_code == 202 and body is not None and isinstance(body.get("id"), str):
        return str(body["id"])
    hint = (
        " (the low-limit account's daily credits may be spent: rerun after 00:00 UTC)"
        if response.status_code == 429
        else ""
    )
    raise SetupFailed(f"setup: {what}: expected 202 with an id, saw {describe(response)}{hint}")


def wait_finished(endpoint: Endpoint, count: int, profile: Profile) -> None:
    """Wait for *count* events at *endpoint*: those generations are no longer in flight."""
    try:
        endpoint.wait_for(count, delivery_deadline(profile))
    except DeliveryTimeout as error:
        raise SetupFailed(f"setup: the generations did not report back: {error}") from None


# -- the per-minute limit --------------------------------------------------------------------


def rate_request(api: ApiClient, profile: Profile, role: str = ROLE) -> httpx.Response:
    """One request of the kind the profile says exercises the per-minute limit (``[rate]
    request``, :func:`~conformance.target.setup.rate_request_of`)."""
    rate = rate_request_of(profile)
    body = None if rate.body is None else dict(rate.body)
    return api.request(rate.method, rate.path, role=role, json=body, patient=False)


def rate_request_words(profile: Profile) -> str:
    """The rate request, for messages: which request was sent, and the setting to change
    when the deployment counts only the other kind toward its limit."""
    return rate_request_of(profile).words


@dataclass(frozen=True)
class RateRun:
    """Requests sent back to back on the low-limit key up to the first 429."""

    limit: int  # the tier's requests_per_minute
    served: int  # requests answered before the first 429 (all, if none came)
    first: httpx.Response  # the first response (a served one)
    refused: httpx.Response | None  # the first 429
    refused_at: float  # time.time() when the 429 arrived
    seconds: float  # from the first request to the last answer
    last: httpx.Response  # the answer to the last request sent (request limit + 1, or the 429)
    #: With ``[rate] request = "submits"``: a read sent right after the submits' 429
    #: (RATE-RPM-05: a read counts toward the same limit, so it is refused too).
    read_after: httpx.Response | None = None

    @property
    def no_429(self) -> str:
        """Why there is no 429 to examine (RATE-RPM-02 judges that)."""
        return (
            f"no 429 after {self.served} requests (limit {self.limit}): no 429 response to "
            "examine (test_rate_request_over_limit_answered_429 judges this)"
        )


def open_window(api: ApiClient, profile: Profile, recorder: Recorder) -> tuple[int, httpx.Response]:
    """Wait until the low-limit key's window holds none of our requests, send the first
    rate request of a new window, and return the tier's requests_per_minute with it.

    With reads the first answer is the tier record itself (no request spent on it); with
    submits the tier is read first, and the wait lets that read leave the window (it may
    or may not count).
    """
    record = tier(api) if profile.rate.request == "submits" else None
    ACCOUNT.make_room(recorder, None, profile)
    first = rate_request(api, profile)
    if first.status_code == 429:
        raise SetupFailed(
            f"setup: the first request of the low-limit key was answered 429 "
            f"({describe(first)}): the key must be idle for a minute before the run"
        )
    if record is None:
        ACCOUNT.tier = record = _checked_tier(first)
    return int(record["requests_per_minute"]), first


def first_rate_run(
    make_api: Callable[..., ApiClient], profile: Profile, recorder: Recorder
) -> RateRun:
    """The run of requests up to the first 429, sent by the first check that asks.

    The requests are those the profile declares (``[rate] request``, :func:`rate_request`):
    spec §8 counts "Requests per minute | Per tier, per API key" without naming which, so
    a deployment that counts only submits is judged by submits. With reads the first
    answer gives the limit; with submits the tier is read first, and the run waits until
    that read has left the window (it may or may not count). At most requests_per_minute
    + 1 requests are sent.
    """
    if ACCOUNT.rate_run is not None:
        return ACCOUNT.rate_run
    budget = profile.budgets.max_requests_per_rate_check
    api: ApiClient = make_api(budget=budget)
    start = time.monotonic()
    limit, first = open_window(api, profile, recorder)
    if limit + 1 > budget:
        pytest.skip(
            f"the low-limit tier allows {limit} requests per minute, over the budget of "
            f"{budget} ([budgets] max_requests_per_rate_check)"
        )
    served, refused, refused_at, response = 1, None, 0.0, first
    for _ in range(limit):
        response = rate_request(api, profile)
        if response.status_code == 429:
            refused, refused_at = response, time.time()
            break
        served += 1
    seconds = time.monotonic() - start
    read_after = None
    if profile.rate.request == "submits" and refused is not None:
        read_after = api.request("GET", TIER_PATH, role=ROLE, patient=False)
    ACCOUNT.rate_run = RateRun(
        limit, served, first, refused, refused_at, seconds, response, read_after
    )
    return ACCOUNT.rate_run


# -- the daily credit cap --------------------------------------------------------------------


@dataclass(frozen=True)
class CapRun:
    """Submits on the low-limit key, one at a time, up to the first 429."""

    cap: int  # the tier's max_credits_per_day
    statuses: tuple[int, ...]
    refused: httpx.Response | None  # the first 429
    refused_at: float  # time.time() when it arrived

    @property
    def no_429(self) -> str:
        """Why there is no credit-cap 429 to examine (the credit-cap check judges that)."""
        return (
            f"no 429 within {len(self.statuses)} submits (max_credits_per_day {self.cap}): "
            "no credit-cap 429 to examine (the credit-cap check judges this)"
        )


def first_cap_run(
    api: ApiClient, make_endpoint: Callable[..., Endpoint], profile: Profile, recorder: Recorder
) -> CapRun:
    """The submits up to the credit cap's 429, sent by the first check that asks.

    Every accepted submit spends at least one credit (CREDIT-SPEND-01), so of
    max_credits_per_day + 1 submits one at least must be refused. Each generation is
    waited for before the next submit (none in flight: no concurrency 429), and each
    submit has room in the rate window (no rate-limit 429).
    """
    if ACCOUNT.cap_run is not None:
        return ACCOUNT.cap_run
    cap = int(tier(api)["max_credits_per_day"])
    if cap + 2 > profile.budgets.max_requests_per_rate_check:
        pytest.skip(
            f"max_credits_per_day {cap} needs more submits than the budget of "
            f"{profile.budgets.max_requests_per_rate_check}"
        )
    endpoint = make_endpoint("credit-cap")
    statuses: list[int] = []
    refused: httpx.Response | None = None
    refused_at = 0.0
    for index in range(cap + 1):
        ACCOUNT.make_room(recorder, 1, profile)
        body = submit_body(endpoint)
        response = api.request("POST", IMAGES, role=ROLE, json=body, patient=False)
        statuses.append(response.status_code)
        if response.status_code == 429:
            refused, refused_at = response, time.time()
            break
        accepted_id(response, f"POST {IMAGES} number {index + 1} toward the cap")
        wait_finished(endpoint, index + 1, profile)
    ACCOUNT.cap_run = CapRun(cap, tuple(statuses), refused, refused_at)
    return ACCOUNT.cap_run


def examined_429(run: RateRun | CapRun | DayRun) -> httpx.Response:
    """A run's 429 for a check that examines it; a set-up error when none came (the one
    check that asks for the 429 judges that, not every check that reads it)."""
    if run.refused is None:
        raise SetupFailed(f"setup: {run.no_429}")
    return run.refused


# -- the daily request limit ----------------------------------------------------------------


@dataclass(frozen=True)
class DayRun:
    """Requests on the ``low-daily`` key, back to back, up to the first 429."""

    per_day: int  # the tier's requests_per_day
    statuses: tuple[int, ...]
    refused: httpx.Response | None  # the first 429

    @property
    def no_429(self) -> str:
        """Why there is no daily 429 to build on (RATE-RPD-01 judges that)."""
        return (
            f"no 429 within {len(self.statuses)} requests (requests_per_day {self.per_day}): "
            "no spent day to examine (test_rate_day_limit_answered_429 judges this)"
        )


def first_day_run(make_api: Callable[..., ApiClient], profile: Profile) -> DayRun:
    """The requests of the ``low-daily`` key up to the day's 429, sent by the first check
    that asks: its tier record, then requests_per_day + 1 requests of the profile's rate
    kind (:func:`rate_request`), stopping at the first 429. The tier's minute limit must
    exceed that many, so a 429 among them is the day's."""
    if ACCOUNT.day_run is not None:
        return ACCOUNT.day_run
    budget = profile.budgets.max_requests_per_rate_check
    api: ApiClient = make_api(budget=budget)
    record = _checked_tier(api.request("GET", TIER_PATH, role=DAILY_ROLE, patient=False))
    if not _is_integer(record.get("requests_per_day")) or record["requests_per_day"] < 1:
        raise SetupFailed(f"setup: the {DAILY_ROLE} tier record has no positive requests_per_day")
    per_day = int(record["requests_per_day"])
    if per_day + 2 > budget:
        pytest.skip(f"requests_per_day {per_day} is over the request budget of {budget}")
    if int(record["requests_per_minute"]) <= per_day + 1:
        pytest.skip(
            f"the {DAILY_ROLE} tier's requests_per_minute ({record['requests_per_minute']}) "
            f"would refuse before its requests_per_day ({per_day}): no daily 429 to tell apart"
        )
    statuses: list[int] = []
    refused: httpx.Response | None = None
    for _ in range(per_day + 1):
        response = rate_request(api, profile, DAILY_ROLE)
        statuses.append(response.status_code)
        if response.status_code == 429:
            refused = response
            break
    ACCOUNT.day_run = DayRun(per_day, tuple(statuses), refused)
    return ACCOUNT.day_run


@dataclass(frozen=True)
class Spread:
    """Set-up of the rolling-window check (RATE-RPM-04): the window was empty, half the
    limit was sent at once (``first_half``, the first at ``started``, a ``time.time()``)
    and the rest half a minute later, all served."""

    limit: int
    first_half: int
    started: float

    def after_the_roll(self, api: ApiClient, profile: Profile) -> list[int]:
        """The statuses of requests sent once the first half has left the window (a
        minute and the tolerance after it), up to one past that half or the first 429;
        sent too late to tell the halves apart is a set-up error."""
        tolerance = profile.timing.tolerance_seconds
        time.sleep(max(0.0, self.started + WINDOW_SECONDS + tolerance - time.time()))
        statuses: list[int] = []
        for _ in range(self.first_half + 1):
            statuses.append(rate_request(api, profile).status_code)
            if statuses[-1] == 429:
                break
        rolled_at = time.time() - self.started
        if rolled_at >= WINDOW_SECONDS * 1.5 - tolerance:
            raise SetupFailed(
                f"setup: the requests after the roll took until {rolled_at:.0f} s, past the "
                "moment the second half leaves the window"
            )
        return statuses


def spread_over_half_minute(api: ApiClient, profile: Profile, recorder: Recorder) -> Spread:
    """Send the limit's first half now and the rest 30 s later (the sleep between is the
    spread under test, bounded by the minute); a 429 among them is a set-up error (the
    limit's own checks judge it), a limit the request budget cannot hold a skip."""
    limit, first = open_window(api, profile, recorder)
    started = time.time()  # the first request's moment, within a request's time
    first_half = limit // 2
    if first_half < 1 or limit + first_half + 2 > profile.budgets.max_requests_per_rate_check:
        pytest.skip(f"requests_per_minute {limit} does not fit this check's request budget")
    early = [first, *(rate_request(api, profile) for _ in range(first_half - 1))]
    time.sleep(max(0.0, started + WINDOW_SECONDS / 2 - time.time()))
    later = [rate_request(api, profile) for _ in range(limit - first_half)]
    statuses = [r.status_code for r in [*early, *later]]
    if 429 in statuses:
        raise SetupFailed(
            f"setup: {limit} requests within a minute met a 429 before the limit "
            f"(RATE-RPM-01 judges this): {statuses}"
        )
    return Spread(limit, first_half, started)


def concurrent_submits(
    clients: Sequence[ApiClient],
    endpoint: Endpoint,
    prompt: str,
    profile: Profile,
    recorder: Recorder,
) -> list[int]:
    """One burst for the concurrency check: a submit per client, all at once, once the
    window has room for them; their statuses. The accepted ones are waited for, so the
    next burst starts with nothing in flight."""
    ACCOUNT.make_room(recorder, len(clients), profile)

    def send(client: ApiClient) -> httpx.Response:
        body = submit_body(endpoint, prompt)
        return client.request("POST", IMAGES, role=ROLE, json=body, patient=False)

    with ThreadPoolExecutor(max_workers=len(clients)) as pool:
        statuses = [r.status_code for r in pool.map(send, clients)]
    accepted = sum(1 for status in statuses if 200 <= status < 300)
    if accepted:
        wait_finished(endpoint, accepted, profile)
    return statuses


#: Reads of credits used today after a generation ended: its refund may land just after
#: the event, so the reading is repeated within the tolerance.
REFUND_READS: Final = 3


def credits_settled(
    api: ApiClient, profile: Profile, settled: Callable[[int], bool], *, day: date
) -> int:
    """Credits used today, re-read (:data:`REFUND_READS` times within the tolerance) until
    *settled* holds of the reading; the last reading. A UTC *day* (the one of the reading
    it is compared with) that ended meanwhile is a set-up error: the count was reset at
    00:00 UTC, so the readings cannot be compared."""
    deadline = time.monotonic() + profile.timing.tolerance_seconds
    used = credits_used_today(api, ROLE)
    for _ in range(REFUND_READS - 1):
        if settled(used) or time.monotonic() >= deadline:
            break
        time.sleep(profile.timing.tolerance_seconds / REFUND_READS)
        used = credits_used_today(api, ROLE)
    if datetime.now(UTC).date() != day:
        raise SetupFailed("setup: 00:00 UTC passed between the readings of credits used today")
    return used
