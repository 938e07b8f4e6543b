"""The state of a generation as its events and its read show it (spec §3, §6 Behaviour).

§3 gives completed, failed and cancelled as "event names and status": a generation.failed
event carries the status failed. §6: "A missed delivery does not mean the generation
failed; it is readable through GET /v1/generations/{id}": a generation whose delivery is
exhausted (3 attempts, each answered 500 by the receiver) is still served by the read.

The two channels of a result (§1: read with GET /v1/generations/{id}, or pushed by a
webhook) are compared over this module's generations with a target: the record read must
agree with the event on status, credits and which of output_url and error_message are
set. The read body is not shown, so a disagreement only warns, listing each one found.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Final

import httpx
import pytest

from conformance.findings import warn
from conformance.judge.asserts import describe, json_values
from conformance.observe.deliveries import (
    RECORD_POLL_SECONDS,
    RECORD_SETTLE_SECONDS,
    settle_exhausted,
    submit_with_target,
)
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
#: Generations that complete, one per target form and type (the two channels compared).
COMPLETES: Final = (
    Scenario(),
    Scenario(kind="callback_url"),
    Scenario(path="/v1/videos/generate"),
)
#: The event data fields compared by value, and those compared by presence (§2: output_url
#: null on failure, error_message null on success).
SAME_VALUE: Final = ("status", "credits_used")
SAME_PRESENCE: Final = ("output_url", "error_message")


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


def _record_in(response: httpx.Response, generation_id: str) -> dict[str, Any] | None:
    """The generation record in a read: the JSON object whose id is *generation_id*
    (the body, or an object nested in it: the read body is not shown)."""
    for value in json_values(response):
        if isinstance(value, dict) and value.get("id") == generation_id:
            return value
    return None


def _read_settled(api: ApiClient, generation_id: str, status: object) -> dict[str, Any] | None:
    """The record read, once it shows *status* (the event's) or the settle time and the
    profile's tolerance pass: a read may lag the event it was sent after."""
    deadline = time.monotonic() + RECORD_SETTLE_SECONDS + api.profile.timing.tolerance_seconds
    pause = threading.Event()  # never set: wait() is a bounded pause between reads
    while True:
        response = api.request("GET", f"/v1/generations/{generation_id}")
        record = _record_in(response, generation_id)
        if (record is not None and record.get("status") == status) or (
            time.monotonic() >= deadline
        ):
            return record
        pause.wait(min(RECORD_POLL_SECONDS, max(0.0, deadline - time.monotonic())))


def _present(value: object) -> bool:
    return value is not None and value != ""


def _disagreements(data: dict[str, Any], record: dict[str, Any] | None) -> list[str]:
    """Where the record read differs from the event's data."""
    if record is None:
        return ["the read holds no object with the generation's id"]
    found = [
        f"{name} {data.get(name)!r} in the event, {record.get(name)!r} in the read"
        for name in SAME_VALUE
        if data.get(name) != record.get(name)
    ]
    for name in SAME_PRESENCE:
        in_event, in_read = _present(data.get(name)), _present(record.get(name))
        if in_event != in_read:
            shown = {True: "set", False: "not set"}
            found.append(f"{name} {shown[in_event]} in the event, {shown[in_read]} in the read")
    return found


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
            f"{scenario.label} ({generated.generation_id}): {disagreement}"
            for disagreement in _disagreements(data, record)
        ]
    if found:
        warn(f"the event and GET /v1/generations/{{id}} disagree: {'; '.join(found)}")
