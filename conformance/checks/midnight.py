"""Crossing the target's 00:00 UTC: set-up for the chains that spend a day's allowance
and then see it reset (spec §8: the daily limits are counted per "calendar day (UTC)";
``test_credits.py``, ``test_rate_day.py``).

The target's calendar clock moves forward through the profile's ``[clock]`` request, or
the suite waits for midnight in real time (bounded by ``max_wait_seconds``). Either way
the chain holds the run's ``clock`` lease (:func:`conformance.checks.low_limit.hold_chain`),
so no other chain starts a new day under it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

import httpx

from conformance.checks.low_limit import Chain
from conformance.judge.asserts import describe
from conformance.target.client import ApiClient
from conformance.target.clock import next_utc_midnight
from conformance.target.profile import Profile
from conformance.target.setup import SetupFailed

__all__ = ["MIDNIGHT_MARGIN_SECONDS", "across_midnight"]

#: How far before and after 00:00 UTC the daily-reset checks look: more than the clocks
#: of the suite and the target may differ, and more than a request takes.
MIDNIGHT_MARGIN_SECONDS: Final = 30.0


def _move_target_clock(api: ApiClient, profile: Profile, seconds: float) -> None:
    """Move the target's calendar clock *seconds* forward.

    With a declared request (``[clock]`` method, path, body): ask for it. With
    ``wait_for_midnight``: wait in real time, at most ``max_wait_seconds`` (the
    capability is checked before the check starts).
    """
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


def across_midnight(
    api: ApiClient, profile: Profile, chain: Chain, send: Callable[[], httpx.Response]
) -> tuple[httpx.Response | None, httpx.Response]:
    """*send* on the target shortly before its next 00:00 UTC, then shortly after (spec
    §8: the daily limits reset at 00:00 UTC); the first answer is None when the target's
    clock is already too close to midnight to ask before it.

    The *chain* holds the clock (:func:`hold_chain` with ``clock=True``): its lease says
    how far this run moved the target's clock (with a declared ``[clock]`` request;
    waiting leaves it on the wall clock), whichever process moved it last.
    """
    clock = chain.clock
    if clock is None:
        raise SetupFailed("setup: the chain crosses midnight without holding the clock")

    def move_to(moment: float) -> None:
        seconds = moment - chain.target_now()
        if seconds > 0:
            _move_target_clock(api, profile, seconds)
            if profile.clock.advance is not None:
                clock["moved_seconds"] = chain.moved_seconds + seconds

    midnight = next_utc_midnight(chain.target_now())
    before: httpx.Response | None = None
    if chain.target_now() < midnight - MIDNIGHT_MARGIN_SECONDS:
        move_to(midnight - MIDNIGHT_MARGIN_SECONDS)
        before = send()
    move_to(midnight + MIDNIGHT_MARGIN_SECONDS)
    return before, send()
