"""The per-minute limit of a key (spec §7 the 429 response, §8 Limits): one run of
requests up to the first 429, shared by the checks of the 429 response, and a retry after
its Retry-After. The checks that only examine the stored 429 come after the wait: a
worker knows its next check before it starts one, so the wait is not the chain's last.

A chain on the ``low-limit`` key (``low_limit.py`` says what a chain is): its checks run
in file order on one worker, holding the key's lease, and its second key
``low-limit-second`` (RATE-RPM-03) is this module's alone. The key must be idle for a
minute before a run (a request of an earlier run still in the rolling window would be
counted). The limit is read from the key's own tier record (spec §8: "read from the tier
endpoint, not fixed").
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import pytest

from conformance.checks.low_limit import (
    RATELIMIT_HEADERS,
    ROLE,
    SECOND_ROLE,
    WINDOW_SECONDS,
    Chain,
    RateRun,
    assert_retry_after,
    chain_fixtures,
    examined_429,
    first_rate_run,
    rate_request_words,
)
from conformance.judge.asserts import describe, error_detail
from conformance.observe.timing import judge_timing
from conformance.target.client import ApiClient, Recorder, parse_retry_after
from conformance.target.profile import Profile
from conformance.target.setup import TIER_PATH, SetupFailed

chain, _track_window = chain_fixtures(ROLE)


def _require_window_reached(rate_run: RateRun) -> None:
    """A set-up error when no 429 came because the requests took longer than the
    one-minute window: then the limit could not be reached, and nothing is judged."""
    if rate_run.refused is None and rate_run.seconds >= WINDOW_SECONDS:
        raise SetupFailed(
            f"setup: {rate_run.served} requests took {rate_run.seconds:.0f} s, more than the "
            "one-minute window: the limit could not be reached"
        )


@pytest.fixture
def rate_run(
    chain: Chain, make_api: Callable[..., ApiClient], profile: Profile, recorder: Recorder
) -> RateRun:
    return first_rate_run(chain, make_api, profile, recorder)


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
    _require_window_reached(rate_run)
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
    _require_window_reached(rate_run)
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
def test_rate_limit_is_per_key(
    api: ApiClient, chain: Chain, rate_run: RateRun, profile: Profile
) -> None:
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
    other = chain.rate_request(api, profile, SECOND_ROLE)
    limited = chain.rate_request(api, profile)
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


@pytest.mark.requirement("RATE-RETRY-01")
def test_rate_retry_after_waiting_retry_after_is_served(
    api: ApiClient, chain: Chain, rate_run: RateRun, profile: Profile
) -> None:
    """After waiting the Retry-After seconds of a rate-limit 429, a retry is served."""
    refused = examined_429(rate_run)
    wait = parse_retry_after(refused.headers.get("retry-after"), now=rate_run.refused_at)
    if wait is None or wait > WINDOW_SECONDS + api.profile.timing.tolerance_seconds:
        raise SetupFailed(
            f"setup: no usable Retry-After on the 429 ({refused.headers.get('retry-after')!r})"
        )
    time.sleep(max(0.0, rate_run.refused_at + wait - time.time()))  # the wait under test
    retry = chain.rate_request(api, profile)
    assert retry.status_code != 429, (
        f"RATE-RETRY-01: expected a retry after the Retry-After of {wait:g} s to be served, "
        f"saw {describe(retry)}"
    )


@pytest.mark.requirement("RATE-HDR-01")
def test_rate_429_carries_retry_after(rate_run: RateRun) -> None:
    """A 429 response carries the Retry-After header."""
    assert_retry_after(examined_429(rate_run), "RATE-HDR-01", "429")


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
