"""The daily request limit of a key and its reset at 00:00 UTC (spec §8, "Requests per
day" counted per "calendar day (UTC)").

A chain on the ``low-daily`` key (``low_limit.py`` says what a chain is), whose tier
allows more requests per minute than per day: the day's limit is reached in a few
seconds and its 429 is never the minute's.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from conformance.checks.low_limit import (
    DAILY_ROLE,
    Chain,
    DayRun,
    chain_fixtures,
    examined_429,
    first_day_run,
)
from conformance.checks.midnight import MIDNIGHT_MARGIN_SECONDS, across_midnight
from conformance.judge.asserts import describe
from conformance.target.client import ApiClient
from conformance.target.profile import Profile

chain, _track_window = chain_fixtures(DAILY_ROLE, fallback=None, clock=True)


@pytest.fixture
def day_run(chain: Chain, make_api: Callable[..., ApiClient], profile: Profile) -> DayRun:
    return first_day_run(chain, make_api, profile)


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
    api: ApiClient, chain: Chain, day_run: DayRun, profile: Profile
) -> None:
    """The daily request count resets at 00:00 UTC (spec §8, "calendar day (UTC)"): with
    the day's requests spent, a request shortly before 00:00 UTC is still refused, and one
    shortly after is served. A count that resets at a local midnight is caught on one side
    of 00:00 UTC or the other."""
    examined_429(day_run)
    before, after = across_midnight(api, profile, chain, lambda: chain.rate_request(api, profile))
    assert before is None or before.status_code == 429, (
        f"RATE-RPD-02: expected the day's request limit to hold until 00:00 UTC: a request "
        f"{MIDNIGHT_MARGIN_SECONDS:g} s before it was answered {describe(before)}, not 429"
    )
    assert after.status_code != 429, (
        f"RATE-RPD-02: expected the day's request count to reset at 00:00 UTC: a request "
        f"{MIDNIGHT_MARGIN_SECONDS:g} s after it was answered {describe(after)}"
    )
