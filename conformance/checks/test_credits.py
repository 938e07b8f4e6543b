"""The concurrency limit and the credits of an account (spec §1, §7 the 429 response,
§8 Limits): credits spent and refunded, then the daily credit cap and its reset.

A chain on the ``low-limit-credits`` key, or on ``low-limit`` when the profile names no
such key (``low_limit.py`` says what a chain is). The key's account's in-flight
generations and daily credits are this module's alone (the other chains that may share
the account send requests that spend no credit). The order is deliberate:

1. the concurrency limit, credits spent and refunded: each waits for room in the key's
   rolling window first (``chain.make_room``), so a 429 it sees is never the rate
   limit's, and waits for its generations to finish, so the next check starts with none
   in flight;
2. the daily credit cap (destructive): it spends what is left of the account's credits
   for the day (a second destructive run on the same UTC day finds them spent), with as
   few submits as the prices the implementation reports allow (``credit_cap.py``);
3. the cap's reset at 00:00 UTC, which moves the target's calendar clock forward
   (the profile's ``[clock]``) or waits across midnight;
4. last, two checks that only examine the cap's recorded 429 and send nothing. They come
   after the reset so that the chain's long wait (for room in the key's window) is not
   its last check: a worker asks for what follows a chain at its last check
   (``conformance/run/plugin/schedule.py``), and asked after the wait, the run has
   usually nothing left for it to queue behind the chain.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Final, Literal, NamedTuple

import pytest

from conformance.checks.credit_cap import (
    REFUND_READS,
    CapRun,
    concurrent_submits,
    credits_settled,
    event_price,
    first_cap_run,
)
from conformance.checks.low_limit import (
    CREDITS_ROLE,
    RATELIMIT_HEADERS,
    Chain,
    accepted_id,
    assert_retry_after,
    chain_fixtures,
    examined_429,
    wait_finished,
)
from conformance.checks.midnight import MIDNIGHT_MARGIN_SECONDS, across_midnight
from conformance.findings import fail, warn
from conformance.judge.asserts import credits_used_today, describe, error_detail
from conformance.observe.receiver import Endpoint
from conformance.observe.timing import judge_timing
from conformance.target.client import ApiClient, Recorder, parse_retry_after
from conformance.target.clock import next_utc_midnight
from conformance.target.profile import Profile
from conformance.target.setup import SetupFailed, outcome_prompt

#: Tries of the concurrency check: a fast IUT may finish a generation before the last
#: submit of a burst arrives, so one burst that is all accepted is not yet a failure.
CONCURRENCY_TRIALS: Final = 3


chain, _track_window = chain_fixtures(CREDITS_ROLE, clock=True)


@pytest.fixture
def cap_run(
    api: ApiClient, chain: Chain, make_endpoint: Callable[..., Endpoint], profile: Profile
) -> CapRun:
    return first_cap_run(chain, api, make_endpoint, profile)


@pytest.mark.sandbox
@pytest.mark.requirement("RATE-CONC-02")
def test_concurrency_submit_beyond_limit_is_refused(
    api: ApiClient,
    chain: Chain,
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
    limit = int(chain.read_tier(api)["concurrent_limit"])
    burst = limit + 1
    if burst + 1 > profile.budgets.max_requests_per_rate_check:
        pytest.skip(f"concurrent_limit {limit} is over the request budget of a rate check")
    prompt = outcome_prompt(profile, "failed")
    clients = [make_api() for _ in range(burst)]
    seen: list[list[int]] = []
    for _ in range(CONCURRENCY_TRIALS):
        seen.append(concurrent_submits(chain, clients, make_endpoint(), prompt, profile, recorder))
        if any(400 <= s < 500 for s in seen[-1]):
            return
    raise AssertionError(
        f"RATE-CONC-02: expected one of {burst} simultaneous submits (concurrent_limit = "
        f"{limit}) to be refused; statuses of {CONCURRENCY_TRIALS} bursts: {seen}"
    )


class Used(NamedTuple):
    """Credits used today around one generation, and what its final event says it cost."""

    before: int
    after: int
    price: int | None  # the event's data.credits_used (None: not an integer)


def _used_around(
    api: ApiClient,
    chain: Chain,
    endpoint: Endpoint,
    profile: Profile,
    recorder: Recorder,
    outcome: Literal["completed", "failed"],
) -> Used:
    """Credits used today before the submit of a generation meant to end *outcome*, and
    after it finished: re-read (:func:`credits_settled`) until they rose (completed) or
    came back (failed), within the timing tolerance."""
    chain.read_tier(api)
    chain.make_room(recorder, 2 + REFUND_READS, profile)
    day, before = datetime.now(UTC).date(), credits_used_today(api, chain.role)
    sandbox = "" if outcome == "completed" else " with the sandbox fail prompt"
    response = chain.submit(api, endpoint, outcome_prompt(profile, outcome))
    generation_id = accepted_id(api, response, f"the submit{sandbox}")
    wait_finished(endpoint, 1, profile)

    def settled(used: int) -> bool:
        return used > before if outcome == "completed" else used <= before

    after = credits_settled(chain, api, profile, settled, day=day)
    return Used(before, after, event_price(endpoint.deliveries, generation_id))


@pytest.mark.requirement("CREDIT-SPEND-01", "CREDIT-PRICE-01")
def test_credits_completed_generation_increases_credits_used(
    api: ApiClient, chain: Chain, endpoint: Endpoint, profile: Profile, recorder: Recorder
) -> None:
    """A completed generation raises the account's credits used today, by the
    credits_used its event reports (that the two agree is an interpretation: spec §1
    shows no price)."""
    used = _used_around(api, chain, endpoint, profile, recorder, "completed")
    if used.after <= used.before:
        fail(
            f"expected credits used today to rise after a completed generation; saw "
            f"{used.before} before the submit and {used.after} after it completed",
            rule="CREDIT-SPEND-01",
        )
    if used.after - used.before != used.price:
        warn(
            f"credits used today rose by {used.after - used.before} ({used.before} -> "
            f"{used.after}); the generation's event reports credits_used {used.price!r}",
            rule="CREDIT-PRICE-01",
        )


@pytest.mark.sandbox
@pytest.mark.requirement("CREDIT-REFUND-01")
def test_credits_failed_generation_is_refunded(
    api: ApiClient, chain: Chain, endpoint: Endpoint, profile: Profile, recorder: Recorder
) -> None:
    """A failed generation gives its credits back: credits used today return to before."""
    before, after, _ = _used_around(api, chain, endpoint, profile, recorder, "failed")
    assert after <= before, (
        f"CREDIT-REFUND-01: expected credits used today back at {before} after a failed "
        f"generation, saw {after}"
    )


# -- 3. the daily credit cap (last: it spends the day's credits) ------------------------------


@pytest.mark.destructive
@pytest.mark.requirement("CREDIT-CAP-01")
def test_credit_cap_submit_after_cap_answered_429(cap_run: CapRun) -> None:
    """Submits are answered 429 once the day's credits reach max_credits_per_day."""
    assert cap_run.refused is not None, (
        f"CREDIT-CAP-01: expected a 429 within {cap_run.cap + 1} submits of at least one "
        f"credit each (max_credits_per_day = {cap_run.cap}); statuses: {list(cap_run.statuses)}"
    )


@pytest.mark.destructive
@pytest.mark.requirement("CREDIT-CAP-04")
def test_credit_cap_retry_after_is_seconds_to_utc_midnight(
    cap_run: CapRun, chain: Chain, profile: Profile
) -> None:
    """Retry-After of a credit-cap 429 is the number of seconds until the next 00:00 UTC
    (of the target's calendar clock, which this run may have moved: ``[clock]``)."""
    refused = examined_429(cap_run)
    wait = parse_retry_after(refused.headers.get("retry-after"), now=cap_run.refused_at)
    if wait is None:
        raise SetupFailed(
            f"setup: no Retry-After in seconds on the credit-cap 429 "
            f"({refused.headers.get('retry-after')!r}; CREDIT-CAP-02 judges its presence)"
        )
    moment = cap_run.refused_at + chain.moved_seconds  # the target's time of the 429
    expected = next_utc_midnight(moment) - moment
    judge_timing(
        "CREDIT-CAP-04",
        abs(wait - expected),
        profile,
        what=f"Retry-After {wait:g} s, {expected:.0f} s to 00:00 UTC",
    )


@pytest.mark.destructive
@pytest.mark.requirement("CREDIT-CAP-05")
def test_credit_cap_submit_whose_price_would_pass_it_is_refused(
    api: ApiClient, cap_run: CapRun, chain: Chain, profile: Profile, recorder: Recorder
) -> None:
    """A submit whose price would take the credits used today past max_credits_per_day is
    refused, even before the cap is reached (an interpretation: spec §7 says "reached",
    §8 "exceeding it"). After the cap run, spent with the dearest operation first, the
    credits used today are within the cap."""
    examined_429(cap_run)
    chain.make_room(recorder, 1, profile)
    used = credits_used_today(api, chain.role)
    if used > cap_run.cap:
        fail(
            f"expected the credits used today within max_credits_per_day = {cap_run.cap}, "
            f"saw {used}: a submit was admitted whose price took them past the cap (prices "
            f"{dict(cap_run.prices)}, statuses of the cap run {list(cap_run.statuses)})"
        )
    if not cap_run.refused_before_cap:
        pytest.skip(
            f"not exercised: no submit of the cap run was refused before the cap was reached "
            f"(prices {dict(cap_run.prices)}, statuses {list(cap_run.statuses)}), so none had "
            "a price that would pass it"
        )


@pytest.mark.destructive
@pytest.mark.requirement("CREDIT-CAP-06")
def test_credit_cap_refused_submit_spends_no_credits(
    api: ApiClient,
    cap_run: CapRun,
    chain: Chain,
    endpoint: Endpoint,
    profile: Profile,
    recorder: Recorder,
) -> None:
    """A submit refused for the daily credit cap spends no credits."""
    examined_429(cap_run)
    chain.make_room(recorder, 3, profile)
    before = credits_used_today(api, chain.role)
    response = chain.submit(api, endpoint)
    if response.status_code != 429:
        raise SetupFailed(
            f"setup: a submit after the credit cap was reached answered {describe(response)}, "
            "expected the cap's 429"
        )
    after = credits_used_today(api, chain.role)
    assert after == before, (
        f"CREDIT-CAP-06: expected credits used today to stay {before} across a submit "
        f"refused for the cap ({describe(response)}), saw {after}"
    )


@pytest.mark.destructive
@pytest.mark.requirement("CREDIT-CAP-03")
def test_credit_cap_resets_at_utc_midnight(
    api: ApiClient,
    cap_run: CapRun,
    chain: Chain,
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
    # Room for both submits first: a wait for the window between a move of the clock and
    # a submit would let the target's clock run past the moment that submit is meant for.
    chain.make_room(recorder, 2, profile)
    before, after = across_midnight(api, profile, chain, lambda: chain.submit(api, endpoint))
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


@pytest.mark.destructive
@pytest.mark.requirement("CREDIT-CAP-02")
def test_credit_cap_429_carries_retry_after(cap_run: CapRun) -> None:
    """A 429 for the daily credit cap carries Retry-After (spec §8)."""
    assert_retry_after(examined_429(cap_run), "CREDIT-CAP-02", "credit-cap 429")


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
