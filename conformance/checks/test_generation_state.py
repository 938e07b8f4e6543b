"""The state of a generation as its events and its read show it (spec §3, §6 Behaviour).

§3 gives completed, failed and cancelled as "event names and status": a generation.failed
event carries the status failed. §6: "A missed delivery does not mean the generation
failed; it is readable through GET /v1/generations/{id}": a generation whose delivery is
exhausted (3 attempts, each answered 500 by the receiver) is still served by the read,
and where the read shows a status it is still the one the event carried (an
interpretation: the read body is not shown).

The two channels of a result (§1: read with GET /v1/generations/{id}, or pushed by a
webhook) must agree on status, credits and which of output_url and error_message are
set. Here over this module's own generations (evidence when GEN-CONSIST-01 is run
alone); over every generation of the run, by a check that runs after every other, in
``test_run_consistency.py``. The read body is not shown, so a disagreement only warns,
listing each one found.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Final

import pytest

from conformance.findings import fail, warn
from conformance.judge.asserts import describe, record_in_read
from conformance.observe.deliveries import (
    RECORD_POLL_SECONDS,
    RECORD_SETTLE_SECONDS,
    settle_exhausted,
    submit_with_target,
)
from conformance.observe.events import (
    FAILED,
    EventLab,
    Scenario,
    disagreements,
    final_event,
    final_state,
)
from conformance.observe.receiver import DeliveryTimeout, Endpoint
from conformance.observe.timing import delivery_deadline
from conformance.run.fixtures.labs import Labs
from conformance.target.client import ApiClient
from conformance.target.profile import Profile
from conformance.target.setup import VIDEOS_PATH, SetupFailed

#: Spec §3 and §6: attempts before a delivery is exhausted.
ATTEMPTS: Final = 3
#: A generation that fails (the profile's sandbox fail prompt), inline target.
FAILS: Final = Scenario(outcome="failed")
#: Generations that complete, one per target form and type (the two channels compared).
COMPLETES: Final = (
    Scenario(),
    Scenario(kind="callback_url"),
    Scenario(path=VIDEOS_PATH),
)


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


@pytest.mark.requirement("GEN-MISSED-01", "GEN-MISSED-02")
def test_generation_with_exhausted_delivery_stays_readable(
    api: ApiClient, endpoint: Endpoint, profile: Profile
) -> None:
    """A generation whose delivery is exhausted (every attempt answered 500) is still
    served by GET /v1/generations/{id}, and where the read shows a status, it is the one
    its event carried (the generation completed), not failed."""
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
    if not 200 <= response.status_code < 300:
        fail(
            f"GET /v1/generations/{generation_id} after its delivery was exhausted: expected "
            f"2xx, saw {describe(response)}",
            rule="GEN-MISSED-01",
        )
    # The read body is not shown: judged only where both the read and the event show one.
    read = record_in_read(response, generation_id) or {}
    event = final_event(arrived[0])
    delivered = None if event is None else event.state.get("status")
    if delivered is not None and read.get("status", delivered) != delivered:
        warn(
            f"GET /v1/generations/{generation_id} after its delivery was exhausted: expected "
            f"the status its event carried ({delivered!r}), saw {read.get('status')!r}",
            rule="GEN-MISSED-02",
        )


def _read_settled(api: ApiClient, generation_id: str, status: object) -> dict[str, Any] | None:
    """The record read, once it shows *status* (the event's) or the settle time and the
    profile's tolerance pass: a read may lag the event it was sent after."""
    deadline = time.monotonic() + RECORD_SETTLE_SECONDS + api.profile.timing.tolerance_seconds
    pause = threading.Event()  # never set: wait() is a bounded pause between reads
    while True:
        response = api.request("GET", f"/v1/generations/{generation_id}")
        record = record_in_read(response, generation_id)
        if (record is not None and record.get("status") == status) or (
            time.monotonic() >= deadline
        ):
            return record
        pause.wait(min(RECORD_POLL_SECONDS, max(0.0, deadline - time.monotonic())))


@pytest.mark.parametrize(
    "outcome",
    [
        pytest.param("completed", id="completed"),
        pytest.param("failed", id="failed", marks=pytest.mark.sandbox),
    ],
)
@pytest.mark.requirement("GEN-CONSIST-01")
def test_event_and_read_agree_on_final_state(lab: EventLab, api: ApiClient, outcome: str) -> None:
    """For each of this module's generations with a target, the event and GET
    /v1/generations/{id} agree on status, credits_used and whether output_url and
    error_message are set; every disagreement found is listed."""
    scenarios = COMPLETES if outcome == "completed" else (FAILS,)
    lab.start(*scenarios)
    found: list[str] = []
    for scenario in scenarios:
        generated = lab.get(scenario)
        data = generated.envelope().get("data")
        if not isinstance(data, dict):
            raise SetupFailed(f"setup: the event carries no data object {generated.describe()}")
        record = _read_settled(api, generated.generation_id, data.get("status"))
        found += [
            f"{scenario.label}: {disagreement.describe()}"
            for disagreement in disagreements(
                generated.generation_id,
                final_state(data),
                None if record is None else final_state(record),
            )
        ]
    if found:
        warn(f"the event and GET /v1/generations/{{id}} disagree: {'; '.join(found)}")
