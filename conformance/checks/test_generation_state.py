"""The state of a generation as its events and its read show it (spec §3, §6 Behaviour).

§3 gives completed, failed and cancelled as "event names and status": a generation.failed
event carries the status failed. §6: "A missed delivery does not mean the generation
failed; it is readable through GET /v1/generations/{id}": a generation whose delivery is
exhausted (3 attempts, each answered 500 by the receiver) is still served by the read.
"""

from __future__ import annotations

from typing import Final

import pytest

from conformance.judge.asserts import describe
from conformance.observe.deliveries import settle_exhausted, submit_with_target
from conformance.observe.events import FAILED, EventLab, Scenario
from conformance.observe.receiver import DeliveryTimeout, Endpoint
from conformance.observe.timing import delivery_deadline
from conformance.run.fixtures.labs import Labs
from conformance.target.client import ApiClient
from conformance.target.profile import Profile
from conformance.target.setup import SetupFailed

#: Spec §3 and §6: attempts before a delivery is exhausted.
ATTEMPTS: Final = 3
#: A generation that fails (the profile's sandbox fail prompt), inline target.
FAILS: Final = Scenario(outcome="failed")


@pytest.fixture(scope="module")
def lab(labs: Labs) -> EventLab:
    return labs.events("generation-state")


@pytest.mark.sandbox
@pytest.mark.requirement("GEN-STATE-01")
def test_failed_event_carries_status_failed(lab: EventLab) -> None:
    """The generation.failed event of a generation that failed carries data.status
    "failed"."""
    generated = lab.get(FAILS)
    envelope = generated.envelope()
    if envelope.get("event") != FAILED:
        raise SetupFailed(
            f"setup: expected the generation.failed event, saw {envelope.get('event')!r} "
            f"(EVT-DEFAULT-02 judges which events are sent) {generated.describe()}"
        )
    data = envelope.get("data")
    status = data.get("status") if isinstance(data, dict) else None
    assert status == "failed", (
        f"GEN-STATE-01: expected data.status 'failed' in the generation.failed event, "
        f"saw {status!r} {generated.describe()}"
    )


@pytest.mark.requirement("GEN-MISSED-01")
def test_generation_with_exhausted_delivery_stays_readable(
    api: ApiClient, endpoint: Endpoint, profile: Profile
) -> None:
    """A generation whose delivery is exhausted (every attempt answered 500) is still
    served by GET /v1/generations/{id}."""
    endpoint.respond_with_statuses([500])
    generation_id = submit_with_target(api, endpoint.url)
    try:
        arrived = endpoint.wait_for(ATTEMPTS, delivery_deadline(profile, ATTEMPTS))
    except DeliveryTimeout as missing:
        raise SetupFailed(
            f"setup: the delivery did not make {ATTEMPTS} attempts (DLV-ATTEMPTS-01 judges "
            f"that): {missing}"
        ) from None
    settle_exhausted(api, generation_id, endpoint.url, arrived)
    response = api.request("GET", f"/v1/generations/{generation_id}")
    assert 200 <= response.status_code < 300, (
        f"GEN-MISSED-01: GET /v1/generations/{generation_id} after its delivery was "
        f"exhausted: expected 2xx, saw {describe(response)}"
    )
