"""Redirects are not followed (spec §6 Behaviour: Redirects, not followed; Success, any 2xx).

Each redirect status gets its own chain: the target answers every attempt with that
status and a Location on another receiver endpoint, which must never be reached; the
redirect is not a 2xx, so the attempt failed and is retried (spec §3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import pytest

from conformance.observe.deliveries import Chain, Chains
from conformance.observe.receiver import Endpoint, Reply
from conformance.run.fixtures.labs import Labs
from conformance.target.profile import Profile

#: The redirect statuses of DLV-REDIRECT-01.
REDIRECTS: Final = (301, 302, 303, 307, 308)
#: After the first redirect reply, how long a follow of the Location is waited for.
QUIET_SECONDS: Final = 2.0

BY_STATUS = [pytest.param(status, id=f"redirect-{status}") for status in REDIRECTS]


@dataclass(frozen=True)
class Redirects:
    """The module's chains and, per redirect status, the endpoint its Location names."""

    chains: Chains
    locations: dict[int, Endpoint]

    def __getitem__(self, name: str) -> Chain:
        return self.chains[name]


@pytest.fixture(scope="module")
def lab(labs: Labs) -> Redirects:
    made = labs.chains("redirects")
    locations: dict[int, Endpoint] = {}
    for status in REDIRECTS:
        locations[status] = made.endpoint(f"location-{status}")
        made.start(f"redirect-{status}", [Reply(status, location=locations[status].url)])
    return Redirects(made, locations)


@pytest.mark.parametrize("status", BY_STATUS)
@pytest.mark.requirement("DLV-REDIRECT-01")
def test_redirect_location_receives_nothing(lab: Redirects, profile: Profile, status: int) -> None:
    """A redirect reply is not followed: its Location URL receives no request."""
    chain = lab[f"redirect-{status}"]
    location = lab.locations[status]
    chain.wait_for(1, "a first attempt")
    try:  # a follow is sent at once after the redirect reply
        location.wait_for(1, QUIET_SECONDS + profile.timing.tolerance_seconds)
    except AssertionError:
        pass  # nothing followed: judged below
    followed = location.deliveries
    assert not followed, (
        f"DLV-REDIRECT-01: the target answered {status} with Location {location.url}; "
        f"expected the Location not requested, saw {len(followed)} requests: "
        + "; ".join(d.summary(location.created_at) for d in followed)
        + f" {chain.describe()}"
    )


@pytest.mark.parametrize("status", BY_STATUS)
@pytest.mark.requirement("DLV-REDIRECT-02")
def test_redirect_reply_is_failed_attempt_and_retried(
    lab: Redirects, profile: Profile, status: int
) -> None:
    """A redirect reply is a failed attempt: the target itself gets a retry."""
    chain = lab[f"redirect-{status}"]
    chain.wait_for(2, f"a retry after a {status} reply")
