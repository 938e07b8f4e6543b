"""The state of a generation as its events and its read show it (spec §3, §6 Behaviour).

§3 gives completed, failed and cancelled as "event names and status": a generation.failed
event carries the status failed. §6: "A missed delivery does not mean the generation
failed; it is readable through GET /v1/generations/{id}": a generation whose delivery is
exhausted (3 attempts, each answered 500 by the receiver) is still served by the read.

The two channels of a result (§1: read with GET /v1/generations/{id}, or pushed by a
webhook) must agree on status, credits and which of output_url and error_message are
set. Twice: over this module's own generations (evidence when GEN-CONSIST-01 is run
alone), and over every generation of the run with a target: each final event any
check's generation sent to any worker's receiver is compared with one read, by a check
that runs after every other (``conformance.run.plugin.channels`` says how, with
pytest-xdist too). The read body is not shown, so a disagreement only warns, listing
each one found.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, Final

import httpx
import pytest

from conformance.findings import Bands, measure, warn
from conformance.judge.asserts import describe, json_values
from conformance.observe.deliveries import (
    RECORD_POLL_SECONDS,
    RECORD_SETTLE_SECONDS,
    settle_exhausted,
    submit_with_target,
)
from conformance.observe.events import (
    FAILED,
    Disagreement,
    EventLab,
    FinalEvent,
    Scenario,
    disagreements,
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
#: The most generations the run-wide check reads (one GET each, its client's request
#: budget); a full run has a few hundred, and any beyond are counted as not checked.
MAX_COMPARED: Final = 1000


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


def _record_state(record: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if record is None else final_state(record)


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
                generated.generation_id, final_state(data), _record_state(record)
            )
        ]
    if found:
        warn(f"the event and GET /v1/generations/{{id}} disagree: {'; '.join(found)}")


def _by_generation(events: list[FinalEvent]) -> dict[str, list[FinalEvent]]:
    grouped: dict[str, list[FinalEvent]] = {}
    for event in events:
        grouped.setdefault(event.generation_id, []).append(event)
    return grouped


@pytest.mark.requirement("GEN-CONSIST-01")
def test_every_final_event_agrees_with_the_read(
    make_api: Callable[..., ApiClient], final_events: Callable[[], list[FinalEvent]]
) -> None:
    """Run-wide: every generation whose final event reached the suite's receiver, from
    any check on any worker (missed and exhausted deliveries too: the event was received,
    though answered with an error), reads with GET /v1/generations/{id} as its event
    says; every disagreement is listed by generation and field.

    Runs after every other check (this module is the run's last, and this its last
    check: ``conformance.run.plugin.channels``). One read per generation, at most
    :data:`MAX_COMPARED`, with the primary key and no patience: a 429 ends the reading
    and what is left is not checked (never a disagreement), as is a generation the
    primary key cannot read (another account's) or a read the transport lost. The
    numbers of generations compared and not checked are recorded as measurements.
    """
    api = make_api(budget=MAX_COMPARED)
    grouped = _by_generation(final_events())
    found: list[Disagreement] = []
    compared = 0
    unchecked: list[str] = []
    for index, (generation_id, sent) in enumerate(grouped.items()):
        left = len(grouped) - index
        if index >= MAX_COMPARED:
            unchecked.append(f"{left} past the cap of {MAX_COMPARED} reads")
            break
        try:
            response = api.request("GET", f"/v1/generations/{generation_id}", patient=False)
        except httpx.HTTPError as error:
            unchecked.append(f"{left} from a lost read on ({type(error).__name__})")
            break
        if response.status_code == 429:
            retry_after = response.headers.get("Retry-After")
            unchecked.append(f"{left} from a 429 on (Retry-After {retry_after!r})")
            break
        if not 200 <= response.status_code < 300:
            unchecked.append(f"{generation_id} (read {response.status_code})")
            continue
        compared += 1
        record = _record_state(_record_in(response, generation_id))
        for event in sent:
            found += disagreements(generation_id, event.state, record)
    not_checked = ", ".join(unchecked) or "none"
    if not compared:
        pytest.skip(
            f"no generation could be compared: {len(grouped)} with a final event, "
            f"not checked: {not_checked}"
        )
    counted = Bands(passing=(0, MAX_COMPARED), warning=(0, MAX_COMPARED))
    measure("GEN-CONSIST-01", "generations compared", compared, counted, unit="generations")
    measure(
        "GEN-CONSIST-01",
        "generations not checked",
        len(grouped) - compared,
        Bands(passing=(0, len(grouped)), warning=(0, len(grouped))),
        unit="generations",
    )
    if found:
        shown = "; ".join(disagreement.describe() for disagreement in found)
        warn(
            f"the webhook and GET /v1/generations/{{id}} disagree on {len(found)} field(s) "
            f"of {compared} generation(s) compared: {shown} (not checked: {not_checked})"
        )
