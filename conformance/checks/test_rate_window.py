"""The rolling minute of a key's per-minute limit (spec §8, "Requests per minute | Per
tier, per API key, rolling window").

A chain on the ``low-limit-window`` key, or on ``low-limit`` when the profile names no
such key (``low_limit.py`` says what a chain is): it spreads the key's limit over a minute
and watches the requests leave the window one by one.
"""

from __future__ import annotations

import pytest

from conformance.checks.low_limit import (
    WINDOW_ROLE,
    WINDOW_SECONDS,
    Chain,
    chain_fixtures,
    spread_over_half_minute,
)
from conformance.target.client import ApiClient, Recorder
from conformance.target.profile import Profile

chain, _track_window = chain_fixtures(WINDOW_ROLE)


@pytest.mark.slow
@pytest.mark.requirement("RATE-RPM-04")
def test_rate_window_rolls(
    api: ApiClient, chain: Chain, profile: Profile, recorder: Recorder
) -> None:
    """The per-minute window rolls (spec §8, "rolling window"): requests leave it one by
    one, a minute after each was sent.

    Half the limit is sent, then half a minute later the rest; a minute after the first
    half only that half has left a rolling window, so exactly that many requests are
    served and the next is refused. A fixed window that drops its whole count a minute
    after it began serves the full limit again (more than the limit within a minute); a
    window that never rolls serves none.
    """
    spread = spread_over_half_minute(chain, api, profile, recorder)
    limit, first_half, tolerance = spread.limit, spread.first_half, profile.timing.tolerance_seconds
    statuses = spread.after_the_roll(api, profile)
    served = sum(1 for s in statuses if s != 429)
    assert served == first_half and statuses[-1] == 429, (
        f"RATE-RPM-04: expected a rolling minute: {first_half} requests sent at 0 s and "
        f"{limit - first_half} at 30 s (requests_per_minute = {limit}), then at "
        f"{WINDOW_SECONDS + tolerance:.0f} s exactly {first_half} served (those of 0 s left "
        f"the window) and the next answered 429; saw {served} served (statuses {statuses})"
    )
