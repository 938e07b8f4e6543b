"""Rate limits, the concurrency limit and credits of the ``low-limit`` account (spec §1,
§7 the 429 response, §8 Limits).

**Every use of the ``low-limit`` key role is in this module, and only here.** Its tier has
small limits so they are reachable, and its per-minute window, in-flight generations and
daily credits are shared by everything that uses the key: pytest-xdist (``--dist
loadfile``) keeps one module on one worker, so these checks run one after another, in
file order, and never beside another user of the key. The key must also be idle for a
minute before a run (a request of an earlier run still in the rolling window would be
counted).

The order is deliberate:

1. the per-minute limit (one run of requests up to the first 429, shared by the checks of
   the 429 response), then a retry after Retry-After;
2. the concurrency limit, credits spent and refunded: each waits for room in the rolling
   window first (``ACCOUNT.make_room``), so a 429 it sees is never the rate limit's, and
   waits for its generations to finish, so the next check starts with none in flight;
3. the daily credit cap (destructive): it spends what is left of the account's
   credits for the day (a second destructive run on the same UTC day finds them spent);
4. last, the cap's reset at 00:00 UTC, which moves the target's calendar clock forward
   (the profile's ``[clock]``) or waits across midnight.

The limits are read from the key's own tier record (spec §8: "read from the tier
endpoint, not fixed"). Waiting for room in the window is waiting out the rolling minute
the spec defines (a bounded wait of at most a minute plus the timing tolerance), not a
sleep standing in for an event. The window, the tier record and the two shared runs up to
a 429 are set-up, kept in ``low_limit.py`` beside this module (no check there): the
checks stay in this one module, so that no other worker ever shares the account's window.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Final

import httpx
import pytest

from conformance.checks.low_limit import (
    ACCOUNT,
    DAILY_ROLE,
    IMAGES,
    MIDNIGHT_MARGIN_SECONDS,
    REFUND_READS,
    ROLE,
    SECOND_ROLE,
    TIER_PATH,
    WINDOW_SECONDS,
    CapRun,
    DayRun,
    RateRun,
    accepted_id,
    across_midnight,
    concurrent_submits,
    credits_settled,
    examined_429,
    first_cap_run,
    first_day_run,
    first_rate_run,
    rate_request,
    rate_request_words,
    spread_over_half_minute,
    submit_body,
    tier,
    wait_finished,
)
from conformance.judge.asserts import credits_used_today, describe, error_detail
from conformance.observe.receiver import Endpoint
from conformance.observe.timing import judge_timing
from conformance.target.client import ApiClient, Recorder, parse_retry_after
from conformance.target.profile import Profile
from conformance.target.setup import SUBMIT_PROMPT, SetupFailed

#: Tries of the concurrency check: a fast IUT may finish a generation before the last
#: submit of a burst arrives, so one burst that is all accepted is not yet a failure.
CONCURRENCY_TRIALS: Final = 3
#: The rate headers of every response, served or 429 (spec §7).
RATELIMIT_HEADERS: Final = ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset")


@pytest.fixture(autouse=True)
def _track_window(recorder: Recorder) -> Iterator[None]:
    """Adds the check's requests to the record of the low-limit window."""
    yield
    ACCOUNT.sent.extend(exchange.started_at for exchange in recorder.exchanges)


# -- 1. the per-minute limit ----------------------------------------------------------------


def _assert_retry_after(refused: httpx.Response, requirement_id: str, which: str) -> None:
    """The 429 (*which*: "credit-cap 429") carries the Retry-After header."""
    assert "retry-after" in refused.headers, (
        f"{requirement_id}: expected a Retry-After header on the {which}; saw headers "
        f"{sorted(refused.headers.keys())}"
    )


@pytest.fixture
def rate_run(make_api: Callable[..., ApiClient], profile: Profile, recorder: Recorder) -> RateRun:
    return first_rate_run(make_api, profile, recorder)


@pytest.mark.requirement("RATE-RPM-01")
def test_rate_requests_up_to_limit_are_served(rate_run: RateRun, profile: Profile) -> None:
    """The key's first requests_per_minute requests within a minute are not answered 429."""
    assert rate_run.served >= rate_run.limit, (
        f"RATE-RPM-01: expected the first {rate_run.limit} requests (the tier's "
        f"requests_per_minute) to be served; request {rate_run.served + 1} was answered "
        f"{describe(examined_429(rate_run))} (requests: {rate_request_words(profile)})"
    )


@pytest.mark.requirement("RATE-RPM-02")
def test_rate_request_over_limit_answered_429(rate_run: RateRun, profile: Profile) -> None:
    """The request after requests_per_minute requests within a minute is answered 429."""
    if rate_run.refused is None and rate_run.seconds >= WINDOW_SECONDS:
        raise SetupFailed(
            f"setup: {rate_run.served} requests took {rate_run.seconds:.0f} s, more than the "
            "one-minute window: the limit could not be reached"
        )
    assert rate_run.refused is not None, (
        f"RATE-RPM-02: expected request {rate_run.limit + 1} within a minute to be "
        f"answered 429 (requests_per_minute = {rate_run.limit}); all {rate_run.served} "
        f"requests were served in {rate_run.seconds:.1f} s (requests: "
        f"{rate_request_words(profile)})"
    )


@pytest.mark.requirement("TIER-VALUES-01")
def test_per_minute_limit_enforced_is_the_one_the_tier_reports(
    rate_run: RateRun, profile: Profile
) -> None:
    """The per-minute limit the key meets is the requests_per_minute its tier record
    reports: the 429 comes at request requests_per_minute + 1, not sooner, not later."""
    if rate_run.refused is None and rate_run.seconds >= WINDOW_SECONDS:
        raise SetupFailed(
            f"setup: {rate_run.served} requests took {rate_run.seconds:.0f} s, more than the "
            "one-minute window: the limit could not be reached"
        )
    enforced = "none" if rate_run.refused is None else str(rate_run.served)
    assert enforced == str(rate_run.limit), (
        f"TIER-VALUES-01: the tier record reports requests_per_minute = {rate_run.limit}, "
        f"but the limit enforced was {enforced}: "
        + (
            f"{rate_run.served} requests were served, then {describe(rate_run.refused)}"
            if rate_run.refused is not None
            else f"all {rate_run.served} requests were served in {rate_run.seconds:.1f} s"
        )
        + f" (requests: {rate_request_words(profile)})"
    )


@pytest.mark.requirement("RATE-429-01")
def test_rate_refusal_is_429(rate_run: RateRun) -> None:
    """A request over the key's rate limit is refused with 429, not another status (spec
    §7, "429 | Request rate limit exceeded"). Judged on request requests_per_minute + 1
    when it was refused at all (RATE-RPM-02 judges a limit never enforced)."""
    last = rate_run.last
    if rate_run.refused is None and last.status_code == rate_run.first.status_code:
        raise SetupFailed(f"setup: {rate_run.no_429}")  # answered like the served requests
    assert last.status_code == 429, (
        f"RATE-429-01: expected request {rate_run.limit + 1} within a minute "
        f"(requests_per_minute = {rate_run.limit}) to be refused with 429; it was answered "
        f"{describe(last)}"
    )


@pytest.mark.requirement("RATE-RPM-03")
def test_rate_limit_is_per_key(api: ApiClient, rate_run: RateRun, profile: Profile) -> None:
    """The per-minute limit is per API key (spec §8): while the low-limit key is limited,
    another key of the same account is served. An implementation that counts the
    account's requests together refuses the second key too."""
    second = profile.key(SECOND_ROLE)  # a skip when the profile has no such key
    if second.account != profile.key(ROLE).account:
        raise SetupFailed(
            f"setup: [keys.{SECOND_ROLE}] must be a second key of the {ROLE} key's account "
            f"(account {profile.key(ROLE).account!r}), not of {second.account!r}"
        )
    examined_429(rate_run)
    other = rate_request(api, profile, SECOND_ROLE)
    limited = rate_request(api, profile)
    if limited.status_code != 429:
        raise SetupFailed(
            f"setup: the {ROLE} key is no longer limited ({describe(limited)}): its window "
            "rolled before the second key was tried"
        )
    assert other.status_code != 429, (
        f"RATE-RPM-03: expected another key of the account to be served while the {ROLE} "
        f"key is limited (the per-minute limit is per API key); it was answered "
        f"{describe(other)}"
    )


@pytest.mark.requirement("RATE-RPM-05")
def test_rate_reads_count_toward_the_limit(rate_run: RateRun, profile: Profile) -> None:
    """Reads (GET) count toward the per-minute limit: a run of reads meets its 429 (or,
    when the profile exercises the limit with submits, a read right after their 429 is
    refused too)."""
    if profile.rate.request == "submits":
        refused = examined_429(rate_run)
        read = rate_run.read_after
        assert read is not None and read.status_code == 429, (
            f"RATE-RPM-05: expected a read (GET {TIER_PATH}) right after the submits' 429 "
            f"to be answered 429 too (reads counting toward the same per-minute limit); "
            f"it was answered {describe(read) if read is not None else 'nothing'} (the "
            f"submits' 429: {describe(refused)})"
        )
        return
    assert rate_run.refused is not None or rate_run.seconds >= WINDOW_SECONDS, (
        f"RATE-RPM-05: expected {rate_run.limit + 1} reads (GET {TIER_PATH}) within a "
        f"minute to meet a 429; all {rate_run.served} were served"
    )


@pytest.mark.requirement("RATE-HDR-01")
def test_rate_429_carries_retry_after(rate_run: RateRun) -> None:
    """A 429 response carries the Retry-After header."""
    _assert_retry_after(examined_429(rate_run), "RATE-HDR-01", "429")


@pytest.mark.requirement("RATE-HDR-03")
def test_rate_429_limit_header_equals_requests_per_minute(rate_run: RateRun) -> None:
    """X-RateLimit-Limit of a 429 is an integer equal to the tier's requests_per_minute."""
    seen = examined_429(rate_run).headers.get("x-ratelimit-limit")
    assert seen is not None and seen.strip() == str(rate_run.limit), (
        f"RATE-HDR-03: expected X-RateLimit-Limit: {rate_run.limit} (the tier's "
        f"requests_per_minute) on the 429, saw {seen!r}"
    )


@pytest.mark.requirement("RATE-HDR-02")
def test_rate_429_retry_after_is_whole_seconds(rate_run: RateRun) -> None:
    """Retry-After of a 429 is a non-negative integer number of seconds (spec §7)."""
    seen = examined_429(rate_run).headers.get("retry-after")
    assert seen is not None and seen.strip().isdigit(), (
        f"RATE-HDR-02: expected Retry-After as whole seconds (digits only), saw {seen!r}"
    )


@pytest.mark.requirement("RATE-HDR-04")
def test_rate_429_remaining_header_is_zero(rate_run: RateRun) -> None:
    """X-RateLimit-Remaining of a rate-limit 429 is an integer, 0: no request left."""
    seen = examined_429(rate_run).headers.get("x-ratelimit-remaining")
    assert seen is not None and seen.strip() == "0", (
        f"RATE-HDR-04: expected X-RateLimit-Remaining: 0 on the 429 of a spent window, saw {seen!r}"
    )


@pytest.mark.requirement("RATE-HDR-05")
def test_rate_429_reset_header_is_unix_time_within_a_minute(
    rate_run: RateRun, profile: Profile
) -> None:
    """X-RateLimit-Reset of a 429 is an integer unix time (seconds) in the coming minute,
    judged by the catalog's timing bands."""
    seen = examined_429(rate_run).headers.get("x-ratelimit-reset")
    assert seen is not None and seen.strip().isdigit(), (
        f"RATE-HDR-05: expected X-RateLimit-Reset as an integer unix time in seconds, saw {seen!r}"
    )
    judge_timing(
        "RATE-HDR-05",
        int(seen.strip()) - math.floor(rate_run.refused_at),
        profile,
        what=f"X-RateLimit-Reset {seen.strip()}, the 429 at {rate_run.refused_at:.1f}",
    )


@pytest.mark.requirement("RATE-HDR-06")
def test_rate_429_retry_after_reaches_reset(rate_run: RateRun, profile: Profile) -> None:
    """Waiting the Retry-After seconds of a rate-limit 429 reaches X-RateLimit-Reset."""
    refused = examined_429(rate_run)
    wait = parse_retry_after(refused.headers.get("retry-after"), now=rate_run.refused_at)
    reset = refused.headers.get("x-ratelimit-reset", "")
    if wait is None or not reset.strip().isdigit():
        raise SetupFailed(
            f"setup: no Retry-After or X-RateLimit-Reset to compare "
            f"({refused.headers.get('retry-after')!r}, {reset!r})"
        )
    judge_timing(
        "RATE-HDR-06",
        abs(rate_run.refused_at + wait - int(reset)),
        profile,
        what=f"Retry-After {wait:g} s, X-RateLimit-Reset {reset.strip()}",
    )


@pytest.mark.requirement("RATE-BODY-01")
def test_rate_429_body_has_detail_string(rate_run: RateRun) -> None:
    """A rate-limit 429 has a JSON body with a ``detail`` string (spec §7), checked on the
    per-minute 429 so that no credits need be spent for it."""
    refused = examined_429(rate_run)
    assert isinstance(error_detail(refused), str), (
        f"RATE-BODY-01: expected a JSON body with a 'detail' string on the rate-limit 429, "
        f"saw {describe(refused)}"
    )


@pytest.mark.requirement("RATE-HDR-07")
def test_rate_served_response_carries_ratelimit_headers(rate_run: RateRun) -> None:
    """A served (non-429) response carries the X-RateLimit-* headers too."""
    missing = [n for n in RATELIMIT_HEADERS if n not in rate_run.first.headers]
    assert not missing, (
        f"RATE-HDR-07: expected {list(RATELIMIT_HEADERS)} on a served response "
        f"({rate_run.first.status_code}), missing {missing}"
    )


@pytest.mark.requirement("RATE-RETRY-01")
def test_rate_retry_after_waiting_retry_after_is_served(
    api: ApiClient, rate_run: RateRun, profile: Profile
) -> None:
    """After waiting the Retry-After seconds of a rate-limit 429, a retry is served."""
    refused = examined_429(rate_run)
    wait = parse_retry_after(refused.headers.get("retry-after"), now=rate_run.refused_at)
    if wait is None or wait > WINDOW_SECONDS + api.profile.timing.tolerance_seconds:
        raise SetupFailed(
            f"setup: no usable Retry-After on the 429 ({refused.headers.get('retry-after')!r})"
        )
    time.sleep(max(0.0, rate_run.refused_at + wait - time.time()))  # the wait under test
    retry = rate_request(api, profile)
    assert retry.status_code != 429, (
        f"RATE-RETRY-01: expected a retry after the Retry-After of {wait:g} s to be served, "
        f"saw {describe(retry)}"
    )


@pytest.mark.slow
@pytest.mark.requirement("RATE-RPM-04")
def test_rate_window_rolls(api: ApiClient, profile: Profile, recorder: Recorder) -> None:
    """The per-minute window rolls (spec §8, "rolling window"): requests leave it one by
    one, a minute after each was sent.

    Half the limit is sent, then half a minute later the rest; a minute after the first
    half only that half has left a rolling window, so exactly that many requests are
    served and the next is refused. A fixed window that drops its whole count a minute
    after it began serves the full limit again (more than the limit within a minute); a
    window that never rolls serves none.
    """
    spread = spread_over_half_minute(api, profile, recorder)
    limit, first_half, tolerance = spread.limit, spread.first_half, profile.timing.tolerance_seconds
    statuses = spread.after_the_roll(api, profile)
    served = sum(1 for s in statuses if s != 429)
    assert served == first_half and statuses[-1] == 429, (
        f"RATE-RPM-04: expected a rolling minute: {first_half} requests sent at 0 s and "
        f"{limit - first_half} at 30 s (requests_per_minute = {limit}), then at "
        f"{WINDOW_SECONDS + tolerance:.0f} s exactly {first_half} served (those of 0 s left "
        f"the window) and the next answered 429; saw {served} served (statuses {statuses})"
    )


# -- 2. concurrency, credits spent and refunded ----------------------------------------------


@pytest.mark.sandbox
@pytest.mark.requirement("RATE-CONC-02")
def test_concurrency_submit_beyond_limit_is_refused(
    api: ApiClient,
    make_api: Callable[..., ApiClient],
    make_endpoint: Callable[..., Endpoint],
    profile: Profile,
    recorder: Recorder,
) -> None:
    """Of concurrent_limit + 1 submits sent at once, one is refused (an interpretation:
    the spec says neither that running generations are the requests in flight nor that
    one beyond the limit is refused rather than queued).

    The submits carry the sandbox fail prompt, so their credits come back (spec §1) and
    the burst does not eat into the daily cap; each burst's generations are waited for.
    """
    limit = int(tier(api)["concurrent_limit"])
    burst = limit + 1
    if burst + 1 > profile.budgets.max_requests_per_rate_check:
        pytest.skip(f"concurrent_limit {limit} is over the request budget of a rate check")
    prompt = f"{SUBMIT_PROMPT} {profile.sandbox.fail_prompt}"
    clients = [make_api() for _ in range(burst)]
    seen: list[list[int]] = []
    for _ in range(CONCURRENCY_TRIALS):
        seen.append(concurrent_submits(clients, make_endpoint(), prompt, profile, recorder))
        if any(400 <= s < 500 for s in seen[-1]):
            return
    raise AssertionError(
        f"RATE-CONC-02: expected one of {burst} simultaneous submits (concurrent_limit = "
        f"{limit}) to be refused; statuses of {CONCURRENCY_TRIALS} bursts: {seen}"
    )


@pytest.mark.requirement("CREDIT-SPEND-01")
def test_credits_completed_generation_increases_credits_used(
    api: ApiClient, endpoint: Endpoint, profile: Profile, recorder: Recorder
) -> None:
    """A completed generation raises the account's credits used today."""
    tier(api)
    ACCOUNT.make_room(recorder, 2 + REFUND_READS, profile)
    day, before = datetime.now(UTC).date(), credits_used_today(api, ROLE)
    response = api.request("POST", IMAGES, role=ROLE, json=submit_body(endpoint), patient=False)
    accepted_id(response, f"POST {IMAGES}")
    wait_finished(endpoint, 1, profile)
    after = credits_settled(api, profile, lambda used: used > before, day=day)
    assert after > before, (
        f"CREDIT-SPEND-01: expected credits used today to rise after a completed "
        f"generation; saw {before} before the submit and {after} after it completed"
    )


@pytest.mark.sandbox
@pytest.mark.requirement("CREDIT-REFUND-01")
def test_credits_failed_generation_is_refunded(
    api: ApiClient, endpoint: Endpoint, profile: Profile, recorder: Recorder
) -> None:
    """A failed generation gives its credits back: credits used today return to before."""
    tier(api)
    ACCOUNT.make_room(recorder, 2 + REFUND_READS, profile)
    day, before = datetime.now(UTC).date(), credits_used_today(api, ROLE)
    prompt = f"{SUBMIT_PROMPT} {profile.sandbox.fail_prompt}"
    response = api.request(
        "POST", IMAGES, role=ROLE, json=submit_body(endpoint, prompt), patient=False
    )
    accepted_id(response, f"POST {IMAGES} with the sandbox fail prompt")
    wait_finished(endpoint, 1, profile)
    after = credits_settled(api, profile, lambda used: used <= before, day=day)
    assert after <= before, (
        f"CREDIT-REFUND-01: expected credits used today back at {before} after a failed "
        f"generation, saw {after}"
    )


# -- 3. the daily credit cap (last: it spends the day's credits) ------------------------------


@pytest.fixture
def cap_run(
    api: ApiClient, make_endpoint: Callable[..., Endpoint], profile: Profile, recorder: Recorder
) -> CapRun:
    return first_cap_run(api, make_endpoint, profile, recorder)


@pytest.mark.destructive
@pytest.mark.requirement("CREDIT-CAP-01")
def test_credit_cap_submit_after_cap_answered_429(cap_run: CapRun) -> None:
    """Submits are answered 429 once the day's credits reach max_credits_per_day."""
    assert cap_run.refused is not None, (
        f"CREDIT-CAP-01: expected a 429 within {cap_run.cap + 1} submits of at least one "
        f"credit each (max_credits_per_day = {cap_run.cap}); statuses: {list(cap_run.statuses)}"
    )


@pytest.mark.destructive
@pytest.mark.requirement("CREDIT-CAP-02")
def test_credit_cap_429_carries_retry_after(cap_run: CapRun) -> None:
    """A 429 for the daily credit cap carries Retry-After (spec §8)."""
    _assert_retry_after(examined_429(cap_run), "CREDIT-CAP-02", "credit-cap 429")


@pytest.mark.destructive
@pytest.mark.requirement("CREDIT-429-01")
def test_credit_cap_429_has_the_429_headers_and_detail(cap_run: CapRun) -> None:
    """A credit-cap 429 carries the headers and the JSON detail of every 429 (spec §7)."""
    refused = examined_429(cap_run)
    names = ("retry-after", *RATELIMIT_HEADERS)
    missing = [name for name in names if name not in refused.headers]
    assert not missing and isinstance(error_detail(refused), str), (
        f"CREDIT-429-01: expected {list(names)} and a JSON 'detail' string on the "
        f"credit-cap 429; missing headers {missing}, body {describe(refused)}"
    )


@pytest.mark.destructive
@pytest.mark.requirement("CREDIT-CAP-04")
def test_credit_cap_retry_after_is_seconds_to_utc_midnight(
    cap_run: CapRun, profile: Profile
) -> None:
    """Retry-After of a credit-cap 429 is the number of seconds until the next 00:00 UTC."""
    refused = examined_429(cap_run)
    wait = parse_retry_after(refused.headers.get("retry-after"), now=cap_run.refused_at)
    if wait is None:
        raise SetupFailed(
            f"setup: no Retry-After in seconds on the credit-cap 429 "
            f"({refused.headers.get('retry-after')!r}; CREDIT-CAP-02 judges its presence)"
        )
    moment = datetime.fromtimestamp(cap_run.refused_at, UTC)
    midnight = datetime(moment.year, moment.month, moment.day, tzinfo=UTC) + timedelta(days=1)
    expected = midnight.timestamp() - cap_run.refused_at
    judge_timing(
        "CREDIT-CAP-04",
        abs(wait - expected),
        profile,
        what=f"Retry-After {wait:g} s, {expected:.0f} s to 00:00 UTC",
    )


@pytest.mark.destructive
@pytest.mark.requirement("CREDIT-CAP-06")
def test_credit_cap_refused_submit_spends_no_credits(
    api: ApiClient,
    cap_run: CapRun,
    make_endpoint: Callable[..., Endpoint],
    profile: Profile,
    recorder: Recorder,
) -> None:
    """A submit refused for the daily credit cap spends no credits."""
    examined_429(cap_run)
    ACCOUNT.make_room(recorder, 3, profile)
    before = credits_used_today(api, ROLE)
    endpoint = make_endpoint()
    response = api.request("POST", IMAGES, role=ROLE, json=submit_body(endpoint), patient=False)
    if response.status_code != 429:
        raise SetupFailed(
            f"setup: a submit after the credit cap was reached answered {describe(response)}, "
            "expected the cap's 429"
        )
    after = credits_used_today(api, ROLE)
    assert after == before, (
        f"CREDIT-CAP-06: expected credits used today to stay {before} across a submit "
        f"refused for the cap ({describe(response)}), saw {after}"
    )


# -- 4. the daily reset at 00:00 UTC (last: it moves the target's calendar) -------------------


@pytest.mark.destructive
@pytest.mark.requirement("CREDIT-CAP-03")
def test_credit_cap_resets_at_utc_midnight(
    api: ApiClient,
    cap_run: CapRun,
    make_endpoint: Callable[..., Endpoint],
    profile: Profile,
    recorder: Recorder,
) -> None:
    """The daily credit cap resets at 00:00 UTC (spec §8): with the day's credits spent,
    a submit shortly before 00:00 UTC is still refused, and one shortly after is accepted.

    The target's clock gets there through the profile's ``[clock]``: the declared request
    moves it forward, or the run waits across midnight. A cap that resets at another hour
    (a local midnight) is caught on one side of 00:00 UTC or the other: refused after it,
    or accepted before it.
    """
    examined_429(cap_run)
    endpoint = make_endpoint("credit-cap-reset")

    def submit() -> httpx.Response:
        ACCOUNT.make_room(recorder, 1, profile)
        return api.request("POST", IMAGES, role=ROLE, json=submit_body(endpoint), patient=False)

    before, after = across_midnight(api, profile, submit)
    assert before is None or before.status_code == 429, (
        f"CREDIT-CAP-03: expected the credit cap to hold until 00:00 UTC: a submit "
        f"{MIDNIGHT_MARGIN_SECONDS:g} s before it (the day's credits spent) was answered "
        f"{describe(before)}, not 429"
    )
    assert 200 <= after.status_code < 300, (
        f"CREDIT-CAP-03: expected the credit cap to reset at 00:00 UTC: a submit "
        f"{MIDNIGHT_MARGIN_SECONDS:g} s after it was answered {describe(after)}"
    )
    wait_finished(endpoint, 1, profile)


@pytest.fixture
def day_run(make_api: Callable[..., ApiClient], profile: Profile) -> DayRun:
    return first_day_run(make_api, profile)


@pytest.mark.destructive
@pytest.mark.requirement("RATE-RPD-01")
def test_rate_day_limit_answered_429(day_run: DayRun) -> None:
    """The request after requests_per_day requests within a UTC day is answered 429 (spec
    §8), on a key whose tier allows more per minute than per day."""
    assert day_run.refused is not None, (
        f"RATE-RPD-01: expected a 429 within {day_run.per_day + 1} requests of one UTC day "
        f"(requests_per_day = {day_run.per_day}); all were served: {list(day_run.statuses)}"
    )


@pytest.mark.destructive
@pytest.mark.requirement("RATE-RPD-02")
def test_rate_day_limit_resets_at_utc_midnight(
    api: ApiClient, day_run: DayRun, profile: Profile
) -> None:
    """The daily request count resets at 00:00 UTC (spec §8, "calendar day (UTC)"): with
    the day's requests spent, a request shortly before 00:00 UTC is still refused, and one
    shortly after is served. A count that resets at a local midnight is caught on one side
    of 00:00 UTC or the other."""
    examined_429(day_run)
    before, after = across_midnight(api, profile, lambda: rate_request(api, profile, DAILY_ROLE))
    assert before is None or before.status_code == 429, (
        f"RATE-RPD-02: expected the day's request limit to hold until 00:00 UTC: a request "
        f"{MIDNIGHT_MARGIN_SECONDS:g} s before it was answered {describe(before)}, not 429"
    )
    assert after.status_code != 429, (
        f"RATE-RPD-02: expected the day's request count to reset at 00:00 UTC: a request "
        f"{MIDNIGHT_MARGIN_SECONDS:g} s after it was answered {describe(after)}"
    )
