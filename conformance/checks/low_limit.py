"""The keys of low tiers that the rate and credit checks exhaust, and the chains that use
them: set-up for ``test_rate_minute.py``, ``test_rate_window.py``, ``test_credits.py``
and ``test_rate_day.py`` (no check here).

A key's rolling minute (spec §8, "Requests per minute | Per tier, per API key, rolling
window") holds every request sent on it, whoever sent it; an account's daily credits and
in-flight generations are shared by all its keys. So the checks that exhaust them run as
**chains**: one module each, whose checks run in order on one worker (pytest-xdist's
``--dist loadfile``), started before the other modules (the run's scheduler), each on a
key of its own when the profile names one:

=====================  ===========================  =====================================
module                 key role (fallback)          what it exhausts
=====================  ===========================  =====================================
test_rate_minute.py    ``low-limit`` (and            the key's minute, then waits out its
                       ``low-limit-second``)         Retry-After
test_rate_window.py    ``low-limit-window``          the key's minute, spread over it
                       (``low-limit``)
test_credits.py        ``low-limit-credits``         the account's in-flight limit and
                       (``low-limit``)               daily credits
test_rate_day.py       ``low-daily``                 the key's requests of the day
=====================  ===========================  =====================================

A chain holds its key's lease (:mod:`conformance.target.leases`) while it runs: with a
key per chain, the chains run side by side; with only ``low-limit`` they take turns, and
each learns from the lease the send times of the requests the chain before it left in
the key's window. The optional keys are best of accounts of their own: an implementation
that keeps one window per account (a RATE-RPM-03 failure) then still gives each chain
its own. The two chains that spend a day's allowance and then cross 00:00 UTC
(credits, daily requests) also hold the run's ``clock`` lease, which carries how far the
target's calendar clock was moved: no other chain starts a new day under them.

The state here is per chain (:class:`Chain`, one per module and process).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

import httpx
import pytest

from conformance.findings import fail
from conformance.judge.asserts import describe, is_json_integer, json_object
from conformance.observe.events import target_body
from conformance.observe.receiver import DeliveryTimeout, Endpoint
from conformance.observe.timing import delivery_deadline
from conformance.target.client import ApiClient, Recorder
from conformance.target.leases import Leases
from conformance.target.profile import CHAIN_ROLES, Profile
from conformance.target.profile import LOW_DAILY_ROLE as DAILY_ROLE
from conformance.target.profile import LOW_LIMIT_CREDITS_ROLE as CREDITS_ROLE
from conformance.target.profile import LOW_LIMIT_ROLE as ROLE
from conformance.target.profile import LOW_LIMIT_SECOND_ROLE as SECOND_ROLE
from conformance.target.profile import LOW_LIMIT_WINDOW_ROLE as WINDOW_ROLE
from conformance.target.setup import (
    IMAGES_PATH,
    SUBMIT_PROMPT,
    TIER_PATH,
    SetupFailed,
    rate_request_of,
    submitted_id,
)

__all__ = [
    "CHAIN_ROLES",
    "CREDITS_ROLE",
    "DAILY_ROLE",
    "RATELIMIT_HEADERS",
    "ROLE",
    "SECOND_ROLE",
    "WINDOW_ROLE",
    "WINDOW_SECONDS",
    "Chain",
    "DayRun",
    "RateRun",
    "accepted_id",
    "assert_retry_after",
    "chain_fixtures",
    "examined_429",
    "first_day_run",
    "first_rate_run",
    "hold_chain",
    "rate_request_words",
    "spread_over_half_minute",
    "wait_finished",
]

#: Spec §8: "Requests per minute ... rolling window".
WINDOW_SECONDS: Final = 60.0
#: The rate headers of every response, served or 429 (spec §7).
RATELIMIT_HEADERS: Final = ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset")
#: The lease of the target's calendar clock; its state: ``moved_seconds``.
CLOCK_LEASE: Final = "clock"


def _lease_of(role: str) -> str:
    return f"key {role}"


class Chain:
    """What one chain knows of its key: when each request on it was answered (wall clock:
    its rolling window, those of earlier holders included), its tier record, and the runs
    up to a 429 that several checks examine (each sent once).

    A request enters the target's window when the target stamps it, somewhere between its
    first byte and its answer; on a loaded machine that is seconds after the suite sent
    it. The answer's time is the latest the stamp can be, so a wait counted from it is
    never too short. Each check's exchanges are added when it ends (:meth:`track`, by the
    module's autouse fixture); :meth:`make_room` also counts the running check's own.
    Every request is counted, a refused one too: that can only make a wait longer than
    needed, never too short.
    """

    def __init__(self, role: str, answered: list[float]) -> None:
        self.role = role
        self.answered = answered
        self.tier: dict[str, Any] | None = None
        self.rate_run: RateRun | None = None
        self.day_run: DayRun | None = None
        #: The credit chain's run up to the cap's 429 (``credit_cap.CapRun``).
        self.cap_run: Any = None
        #: The clock lease's state, when the chain holds it (``moved_seconds``: how far
        #: this run moved the target's calendar clock).
        self.clock: dict[str, Any] | None = None

    def target_now(self) -> float:
        """The target's calendar time as far as the run knows it (unix seconds)."""
        return time.time() + self.moved_seconds

    @property
    def moved_seconds(self) -> float:
        """How far this run moved the target's calendar clock (its time is the wall
        clock's plus this)."""
        return float((self.clock or {}).get("moved_seconds", 0.0))

    def track(self, recorder: Recorder) -> None:
        """Add a finished check's requests to the key's window."""
        self.answered.extend(exchange.answered_at for exchange in recorder.exchanges)

    def recent(self) -> list[float]:
        """The answer times that may still be in the window (what the next holder needs)."""
        horizon = time.time() - 2 * WINDOW_SECONDS
        return sorted(t for t in self.answered if t > horizon)

    def make_room(self, recorder: Recorder, count: int | None, profile: Profile) -> None:
        """Wait until *count* more requests fit in the rolling minute (None: until the
        window holds none of ours)."""
        span = WINDOW_SECONDS + profile.timing.tolerance_seconds
        answered = sorted([*self.answered, *(e.answered_at for e in recorder.exchanges)])
        now = time.time()
        recent = [t for t in answered if t > now - span]
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

    def read_tier(self, api: ApiClient, *, patient: bool = True) -> dict[str, Any]:
        """The key's tier record (read once per chain, then remembered; *patient*: a 429
        is waited out, see :meth:`ApiClient.request`)."""
        if self.tier is None:
            response = api.request("GET", TIER_PATH, role=self.role, patient=patient)
            self.tier = _checked_tier(response, self.role)
        return self.tier

    def rate_request(
        self, api: ApiClient, profile: Profile, role: str | None = None
    ) -> httpx.Response:
        """One request of the kind the profile says exercises the per-minute limit
        (``[rate] request``, :func:`~conformance.target.setup.rate_request_of`), on the
        chain's key or *role*."""
        rate = rate_request_of(profile)
        body = None if rate.body is None else dict(rate.body)
        return api.request(rate.method, rate.path, role=role or self.role, json=body, patient=False)

    def submit(
        self,
        api: ApiClient,
        endpoint: Endpoint,
        prompt: str = SUBMIT_PROMPT,
        path: str = IMAGES_PATH,
    ) -> httpx.Response:
        """A submit (an image, or to *path*) on the chain's key with an inline target at
        *endpoint*."""
        body = {"prompt": prompt, **target_body("webhook.url", endpoint.url)}
        return api.request("POST", path, role=self.role, json=body, patient=False)

    def open_window(
        self, api: ApiClient, profile: Profile, recorder: Recorder
    ) -> tuple[int, httpx.Response]:
        """Wait until the key's window holds none of our requests, send the first rate
        request of a new window, and return the tier's requests_per_minute with it.

        With reads the first answer is the tier record itself (no request spent on it);
        with submits the tier is read first, and the wait lets that read leave the window
        (it may or may not count).
        """
        record = self.read_tier(api) if profile.rate.request == "submits" else None
        self.make_room(recorder, None, profile)
        first = self.rate_request(api, profile)
        if first.status_code == 429:
            raise SetupFailed(
                f"setup: the first request of the {self.role} key was answered 429 "
                f"({describe(first)}): the key must be idle for a minute before the run"
            )
        if record is None:
            self.tier = record = _checked_tier(first, self.role)
        return int(record["requests_per_minute"]), first


@contextmanager
def hold_chain(
    leases: Leases,
    profile: Profile,
    role: str,
    *,
    fallback: str | None = ROLE,
    clock: bool = False,
) -> Iterator[Chain]:
    """The chain of a module on *role*'s key, or on *fallback*'s when the profile has no
    key of *role* (none: a skip naming the key to add): holds the key's lease for as long
    as the module's checks run, waiting for it at most the run's ceiling.

    *clock*: hold the target's calendar clock too, for a chain that spends a day's
    allowance and then crosses midnight: no other chain moves the clock meanwhile (a
    move would start a new day under it).
    """
    held = role if role in profile.keys or fallback is None else fallback
    profile.key(held)  # a skip (CapabilityMissing) when the profile lacks it
    lease = _lease_of(held)
    names = (lease, CLOCK_LEASE) if clock else (lease,)
    with leases.hold(*names, wait_seconds=profile.timing.run_ceiling_seconds) as states:
        chain = Chain(held, [float(t) for t in states[lease].get("answered", [])])
        chain.clock = states.get(CLOCK_LEASE)
        try:
            yield chain
        finally:
            states[lease]["answered"] = chain.recent()


def chain_fixtures(role: str, *, fallback: str | None = ROLE, clock: bool = False) -> Any:
    """The two fixtures of a chain's module, assigned there as ``chain, _track_window =
    chain_fixtures(...)``: ``chain``, the module's :class:`Chain` (:func:`hold_chain` with
    these arguments, held while the module runs), and ``_track_window``, autouse, which
    adds each check's requests to the chain's window when the check ends."""

    @pytest.fixture(scope="module")
    def chain(leases: Leases, profile: Profile) -> Iterator[Chain]:
        with hold_chain(leases, profile, role, fallback=fallback, clock=clock) as held:
            yield held

    @pytest.fixture(autouse=True)
    def _track_window(chain: Chain, recorder: Recorder) -> Iterator[None]:
        yield
        chain.track(recorder)

    return chain, _track_window


def _checked_tier(response: httpx.Response, role: str) -> dict[str, Any]:
    body = json_object(response)
    numbers = ("requests_per_minute", "concurrent_limit", "max_credits_per_day")
    if (
        response.status_code != 200
        or body is None
        or not all(is_json_integer(body.get(n)) and body[n] > 0 for n in numbers)
    ):
        raise SetupFailed(
            f"setup: GET {TIER_PATH} ({role}) gave no tier record with positive integer "
            f"{', '.join(numbers)}: {describe(response)}"
        )
    return body


# -- set-up shared by the chains -------------------------------------------------------------


def accepted_id(api: ApiClient, response: httpx.Response, what: str) -> str:
    """The id of a chain's set-up submit that must be accepted
    (:func:`~conformance.target.setup.submitted_id`); a set-up error otherwise, which says
    when a 429 may be the day's credits spent."""
    hint = (
        " (the account's daily credits may be spent: rerun after 00:00 UTC)"
        if response.status_code == 429
        else ""
    )
    return submitted_id(api, response, context=f"{what}{hint}")


def wait_finished(endpoint: Endpoint, count: int, profile: Profile) -> None:
    """Wait for *count* events at *endpoint*: those generations are no longer in flight."""
    try:
        endpoint.wait_for(count, delivery_deadline(profile))
    except DeliveryTimeout as error:
        raise SetupFailed(f"setup: the generations did not report back: {error}") from None


def rate_request_words(profile: Profile) -> str:
    """The rate request, for messages: which request was sent, and the setting to change
    when the deployment counts only the other kind toward its limit."""
    return rate_request_of(profile).words


def assert_retry_after(refused: httpx.Response, requirement_id: str, which: str) -> None:
    """The 429 (*which*: "credit-cap 429") carries the Retry-After header; else the check
    fails *requirement_id*."""
    if "retry-after" not in refused.headers:
        fail(
            f"expected a Retry-After header on the {which}; saw headers "
            f"{sorted(refused.headers.keys())}",
            rule=requirement_id,
        )


def examined_429(run: Any) -> httpx.Response:
    """A run's 429 (its ``refused``) for a check that examines it; a set-up error when
    none came (the one check that asks for the 429 judges that, not every check that
    reads it). *run*: a :class:`RateRun`, :class:`DayRun` or ``credit_cap.CapRun``."""
    if run.refused is None:
        raise SetupFailed(f"setup: {run.no_429}")
    refused: httpx.Response = run.refused
    return refused


# -- the per-minute limit --------------------------------------------------------------------


@dataclass(frozen=True)
class RateRun:
    """Requests sent back to back on the chain's key up to the first 429."""

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


def first_rate_run(
    chain: Chain, make_api: Callable[..., ApiClient], profile: Profile, recorder: Recorder
) -> RateRun:
    """The run of requests up to the first 429, sent by the first check that asks.

    The requests are those the profile declares (``[rate] request``):
    spec §8 counts "Requests per minute | Per tier, per API key" without naming which, so
    a deployment that counts only submits is judged by submits. With reads the first
    answer gives the limit; with submits the tier is read first, and the run waits until
    that read has left the window (it may or may not count). At most requests_per_minute
    + 1 requests are sent.
    """
    if chain.rate_run is not None:
        return chain.rate_run
    budget = profile.budgets.max_requests_per_rate_check
    api: ApiClient = make_api(budget=budget)
    start = time.monotonic()
    limit, first = chain.open_window(api, profile, recorder)
    if limit + 1 > budget:
        pytest.skip(
            f"the low-limit tier allows {limit} requests per minute, over the budget of "
            f"{budget} ([budgets] max_requests_per_rate_check)"
        )
    served, refused, refused_at, response = 1, None, 0.0, first
    for _ in range(limit):
        response = chain.rate_request(api, profile)
        if response.status_code == 429:
            refused, refused_at = response, time.time()
            break
        served += 1
    seconds = time.monotonic() - start
    read_after = None
    if profile.rate.request == "submits" and refused is not None:
        read_after = api.request("GET", TIER_PATH, role=chain.role, patient=False)
    chain.rate_run = RateRun(
        limit, served, first, refused, refused_at, seconds, response, read_after
    )
    return chain.rate_run


@dataclass(frozen=True)
class Spread:
    """Set-up of the rolling-window check (RATE-RPM-04): the window was empty, half the
    limit was sent back to back (``first_half``, all answered by ``early_done``, a
    ``time.time()``) and the rest from ``later_started``, half a minute after the first
    request, all served."""

    chain: Chain
    limit: int
    first_half: int
    early_done: float
    later_started: float

    def after_the_roll(self, api: ApiClient, profile: Profile) -> list[int]:
        """The statuses of requests sent once the whole first half has left the window (a
        minute and the tolerance after its last answer), up to one past that half or the
        first 429; sent too late to tell the halves apart (the second half leaving too)
        is a set-up error."""
        tolerance = profile.timing.tolerance_seconds
        time.sleep(max(0.0, self.early_done + WINDOW_SECONDS + tolerance - time.time()))
        statuses: list[int] = []
        for _ in range(self.first_half + 1):
            statuses.append(self.chain.rate_request(api, profile).status_code)
            if statuses[-1] == 429:
                break
        if time.time() >= self.later_started + WINDOW_SECONDS - tolerance:
            raise SetupFailed(
                f"setup: the requests after the roll took until "
                f"{time.time() - self.later_started:.0f} s after the second half began, past "
                "the moment it leaves the window"
            )
        return statuses


def spread_over_half_minute(
    chain: Chain, api: ApiClient, profile: Profile, recorder: Recorder
) -> Spread:
    """Send the limit's first half now and the rest 30 s later (the sleep between is the
    spread under test, bounded by the minute); a 429 among them is a set-up error (the
    limit's own checks judge it), a limit the request budget cannot hold a skip.

    A slow machine or target spreads the first half itself over seconds: the roll is
    awaited from its last answer, not its first request, so every request of it has left
    the window when the next ones are sent."""
    limit, first = chain.open_window(api, profile, recorder)
    sent = api.recorder.exchanges
    started = sent[-1].started_at if sent else time.time()  # when the first was sent
    first_half = limit // 2
    if first_half < 1 or limit + first_half + 2 > profile.budgets.max_requests_per_rate_check:
        pytest.skip(f"requests_per_minute {limit} does not fit this check's request budget")
    early = [first, *(chain.rate_request(api, profile) for _ in range(first_half - 1))]
    early_done = time.time()
    if early_done - started >= WINDOW_SECONDS / 2:
        raise SetupFailed(
            f"setup: the first {first_half} requests took {early_done - started:.0f} s, "
            "half the window: the halves cannot be told apart"
        )
    time.sleep(max(0.0, started + WINDOW_SECONDS / 2 - time.time()))
    later_started = time.time()
    later = [chain.rate_request(api, profile) for _ in range(limit - first_half)]
    statuses = [r.status_code for r in [*early, *later]]
    if 429 in statuses:
        raise SetupFailed(
            f"setup: {limit} requests within a minute met a 429 before the limit "
            f"(RATE-RPM-01 judges this): {statuses}"
        )
    return Spread(chain, limit, first_half, early_done, later_started)


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


def first_day_run(chain: Chain, make_api: Callable[..., ApiClient], profile: Profile) -> DayRun:
    """The requests of the ``low-daily`` key up to the day's 429, sent by the first check
    that asks: its tier record, then requests_per_day + 1 requests of the profile's rate
    kind, stopping at the first 429. The tier's minute limit must exceed that many, so a
    429 among them is the day's."""
    if chain.day_run is not None:
        return chain.day_run
    budget = profile.budgets.max_requests_per_rate_check
    api: ApiClient = make_api(budget=budget)
    record = chain.read_tier(api, patient=False)
    if not is_json_integer(record.get("requests_per_day")) or record["requests_per_day"] < 1:
        raise SetupFailed(f"setup: the {chain.role} tier record has no positive requests_per_day")
    per_day = int(record["requests_per_day"])
    if per_day + 2 > budget:
        pytest.skip(f"requests_per_day {per_day} is over the request budget of {budget}")
    if int(record["requests_per_minute"]) <= per_day + 1:
        pytest.skip(
            f"the {chain.role} tier's requests_per_minute ({record['requests_per_minute']}) "
            f"would refuse before its requests_per_day ({per_day}): no daily 429 to tell apart"
        )
    statuses: list[int] = []
    refused: httpx.Response | None = None
    for _ in range(per_day + 1):
        response = chain.rate_request(api, profile)
        statuses.append(response.status_code)
        if response.status_code == 429:
            refused = response
            break
    chain.day_run = DayRun(per_day, tuple(statuses), refused)
    return chain.day_run
