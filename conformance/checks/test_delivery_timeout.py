"""The 10 s per-attempt timeout (spec §3 Delivery, §6 Behaviour, §8 Webhook attempts).

Two chains run side by side for the whole module (about 35 s): a *silent* target that
holds every reply well beyond 10 s (its attempts are abandoned and retried: about 0, 11,
23 s when backoff counts from the timeout), and a *slow* target that answers 200 after
7 s (within the timeout: success, no retry).
"""

from __future__ import annotations

import json
import re
from typing import Final

import pytest

from conformance.observe.deliveries import Chains, arrival_gaps
from conformance.observe.receiver import Reply
from conformance.observe.timing import ATTEMPT_TIMEOUT_SECONDS as TIMEOUT
from conformance.observe.timing import BACKOFF_SECONDS as BACKOFF
from conformance.observe.timing import judge_timing
from conformance.run.fixtures.labs import Labs
from conformance.target.profile import Profile

pytestmark = pytest.mark.slow

#: The silent target's hold: beyond the timeout by more than any tolerance, so an IUT
#: whose timeout is longer than 10 s gets a 200 and stops retrying.
SILENT_HOLD: Final = 16.0
#: The slow target's reply time: within the timeout (DLV-TIMEOUT-02's example).
SLOW_REPLY: Final = 7.0
#: An error text that names the timeout: "timeout", "timed out", "no response within 10 s".
_NAMES_TIMEOUT: Final = re.compile(r"time|within\s*\d+|\b10\s*s\b", re.IGNORECASE)


@pytest.fixture(scope="module")
def lab(labs: Labs) -> Chains:
    made = labs.chains("timeout")
    made.start("silent", [Reply(200, delay=SILENT_HOLD)])
    made.start("slow-200", [Reply(200, delay=SLOW_REPLY)])
    return made


@pytest.mark.requirement("DLV-RETRY-02")
def test_timed_out_attempt_is_retried(lab: Chains, profile: Profile) -> None:
    """An attempt that gets no reply within 10 s is retried: a second attempt arrives."""
    chain = lab["silent"]
    chain.wait_for(2, "a retry after a timeout")


@pytest.mark.requirement("DLV-TIMEOUT-01")
def test_attempt_abandoned_after_10_seconds(lab: Chains, profile: Profile) -> None:
    """An attempt without a reply is abandoned after 10 s: the next attempt comes before
    the late reply would have."""
    # Backoff from the start or from the end of the attempt (DLV-BACKOFF-03 judges which):
    # the 3rd attempt comes 10 to 12 s after the 2nd, never after the 16 s reply. The
    # retries' gap: the first attempt's includes what the sender does before its first
    # byte arrives (see DLV-BACKOFF-03's check).
    lab["silent"].judge_gap(2, "DLV-TIMEOUT-01", profile)


@pytest.mark.requirement("DLV-BACKOFF-03")
def test_backoff_counts_from_end_of_timed_out_attempt(lab: Chains, profile: Profile) -> None:
    """After a timed-out attempt, the backoff counts from the timeout: the third attempt
    comes 10 s (the second's timeout) and 2 s after the second's start, not 10 s.

    The gap from the second attempt to the third is judged, not the first: the first
    attempt's timeout starts before its first byte arrives, by what the sender does first
    (validating the target, connecting; 0.7 s on a loaded machine), which shortens the
    first gap alone; the two retries share it.
    """
    chain = lab["silent"]
    arrived = chain.wait_for(3, "3 attempts")
    gap = arrival_gaps(arrived)[1]
    judge_timing("DLV-BACKOFF-03", gap - BACKOFF[1], profile, what=f"gap 2 {chain.describe()}")


@pytest.mark.requirement("REC-ATTEMPT-08")
def test_timed_out_attempt_recorded_with_status_0_and_timeout_error(
    lab: Chains, profile: Profile
) -> None:
    """A timed-out attempt is recorded with status 0, an error naming the timeout and
    ms of at least 10000 (less the profile's timing tolerance)."""
    chain = lab["silent"]
    chain.wait_for(1, "a first attempt")
    record = lab.record(
        chain,
        lambda r: isinstance(r.get("attempts"), list) and len(r["attempts"]) >= 1,
        extra=TIMEOUT,
    )
    attempts = record.get("attempts") if record else None
    first = attempts[0] if isinstance(attempts, list) and attempts else None
    assert isinstance(first, dict), (
        f"REC-ATTEMPT-08: expected the record to hold the timed-out attempt, saw "
        f"{json.dumps(record)[:300]} {chain.describe()}"
    )
    error, status, ms = first.get("error"), first.get("status"), first.get("ms")
    # About the 10 s it waited: an implementation's clock for ms need not be the one of
    # its timer, and an integer of ms may be cut down (the loaded soak saw 9999), so the
    # profile's timing tolerance applies as to every timed value.
    least = (TIMEOUT - profile.timing.tolerance_seconds) * 1000
    assert (
        status == 0
        and isinstance(error, str)
        and _NAMES_TIMEOUT.search(error)
        and isinstance(ms, int)
        and ms >= least
    ), (
        f"REC-ATTEMPT-08: expected status 0, an error naming the timeout and ms of about "
        f"{TIMEOUT * 1000:g} (at least {least:g}), saw status {status!r}, error {error!r}, "
        f"ms {ms!r}"
    )


@pytest.mark.requirement("DLV-TIMEOUT-02")
def test_2xx_after_7_seconds_is_success(lab: Chains, profile: Profile) -> None:
    """A 200 that comes 7 s after the attempt started (within 10 s) is success: no retry."""
    chain = lab["slow-200"]
    chain.wait_for(1, "a first attempt")
    # A retry would come 1 s after the attempt ended: by 7 + 1 s, or 10 + 1 s if the IUT
    # timed out early; listen past both.
    quiet = TIMEOUT + BACKOFF[0] + 2 * profile.timing.tolerance_seconds
    chain.assert_arrivals(1, quiet, f"a 200 after {SLOW_REPLY:g} s is within 10 s: no retry")
    lab.assert_outcome(chain, "delivered", f"for a 200 after {SLOW_REPLY:g} s")
