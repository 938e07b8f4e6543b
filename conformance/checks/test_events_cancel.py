"""generation.cancelled and explicit subscriptions (spec §6 Events): cancelled is sent
only when the binding's events field subscribes to it; the events field selects what is
sent (interpretations: a list without completed gets no completed; an unknown name is
refused).

Cancellation is driven by the profile's sandbox prompt. An absence ("nothing is sent")
is judged once the generation has settled: its record reads finished (or the profile's
``max_generation_seconds`` passed), its delivery list shows no such event, and nothing
arrived within a short quiet window after that.
"""

from __future__ import annotations

import pytest

from conformance.checks.scenarios import WITHOUT_SUBSCRIPTION
from conformance.findings import fail
from conformance.judge.asserts import DeliveryTarget, assert_delivered
from conformance.observe.deliveries import submit_with_target
from conformance.observe.events import (
    CANCELLED,
    COMPLETED,
    FAILED,
    EventLab,
    Scenario,
    TargetKind,
    target_body,
)
from conformance.observe.receiver import DeliveryTimeout, Endpoint
from conformance.observe.waits import (
    QUIET_AFTER_SETTLED_SECONDS,
    event_of,
    wait_until_settled,
)
from conformance.run.fixtures.labs import Labs
from conformance.target.client import ApiClient
from conformance.target.profile import Profile
from conformance.target.setup import IMAGES_PATH, SUBMIT_PROMPT, outcome_prompt

SUBSCRIBED = Scenario(kind="webhook.url", outcome="cancelled", events=(CANCELLED,))


@pytest.fixture(scope="module")
def lab(labs: Labs) -> EventLab:
    return labs.events("events-cancel")


def _assert_nothing_sent(
    api: ApiClient, endpoint: Endpoint, generation_id: str, unwanted: str, requirement_id: str
) -> None:
    """No *unwanted* event reaches *endpoint* nor shows in the generation's delivery list."""
    status, arrived = wait_until_settled(api, generation_id, endpoint)
    if not arrived:
        # Settled (or the deadline passed): give a first attempt its moment to arrive.
        try:
            arrived = endpoint.wait_for(1, timeout=QUIET_AFTER_SETTLED_SECONDS)
        except DeliveryTimeout:
            arrived = []
    events = [event_of(delivery) for delivery in arrived]
    if unwanted in events:
        fail(
            f"expected no {unwanted} (status read: {status!r}), but the target received {events}",
            rule=requirement_id,
        )
    listed = api.request("GET", f"/v1/generations/{generation_id}/deliveries")
    if listed.status_code == 200:
        body = listed.json()
        records = body.get("deliveries") if isinstance(body, dict) else None
        fired = [r.get("event_type") for r in records or [] if isinstance(r, dict)]
        if unwanted in fired:
            fail(
                f"expected no {unwanted}, but the generation's delivery list records {fired}",
                rule=requirement_id,
            )


@pytest.mark.sandbox
@pytest.mark.parametrize("kind", WITHOUT_SUBSCRIPTION)
@pytest.mark.requirement("EVT-CANCEL-01")
def test_cancelled_not_sent_without_subscription(
    api: ApiClient, endpoint: Endpoint, profile: Profile, kind: TargetKind
) -> None:
    """Without an explicit subscription a cancelled generation sends no generation.cancelled."""
    generation_id = submit_with_target(
        api, endpoint.url, kind=kind, prompt=outcome_prompt(profile, "cancelled")
    )
    _assert_nothing_sent(api, endpoint, generation_id, CANCELLED, "EVT-CANCEL-01")


@pytest.mark.sandbox
@pytest.mark.requirement("EVT-CANCEL-02")
def test_cancelled_sent_when_subscribed(
    api: ApiClient, delivery_target: DeliveryTarget, profile: Profile
) -> None:
    """A binding whose events list generation.cancelled receives it on cancellation."""
    submit_with_target(
        api, delivery_target.url, prompt=outcome_prompt(profile, "cancelled"), events=(CANCELLED,)
    )
    what = "a cancelled generation whose webhook.events lists it"
    assert_delivered(delivery_target, what, event=CANCELLED)


@pytest.mark.sandbox
@pytest.mark.requirement("EVT-CANCEL-03")
def test_cancelled_event_is_full_envelope(lab: EventLab, profile: Profile) -> None:
    """generation.cancelled is a full envelope with data.status "cancelled", output_url
    null and error_message a string or null (an interpretation: its payload is not shown)."""
    generated = lab.get(SUBSCRIBED)
    envelope = generated.envelope()
    missing = [
        name
        for name in ("id", "event", "created_at", "api_version", "webhook_id", "data")
        if name not in envelope
    ]
    data = envelope.get("data")
    problems = [f"missing envelope fields {missing}"] if missing else []
    if not isinstance(data, dict):
        problems.append(f"data is {data!r:.100}, expected an object")
    else:
        if data.get("status") != "cancelled":
            problems.append(f"data.status is {data.get('status')!r}, expected 'cancelled'")
        if "output_url" not in data or data["output_url"] is not None:
            problems.append(f"data.output_url is {data.get('output_url', '(absent)')!r}")
        if not isinstance(data.get("error_message"), str | None):
            problems.append(f"data.error_message is {data.get('error_message')!r}")
    assert not problems, f"EVT-CANCEL-03: {'; '.join(problems)} {generated.describe()}"


@pytest.mark.requirement("EVT-SUB-01")
def test_events_list_without_completed_gets_no_completed(
    api: ApiClient, endpoint: Endpoint
) -> None:
    """A binding with events [generation.cancelled] receives no generation.completed (an
    interpretation: the listed events replace the defaults)."""
    generation_id = submit_with_target(api, endpoint.url, events=(CANCELLED,))
    _assert_nothing_sent(api, endpoint, generation_id, COMPLETED, "EVT-SUB-01")


@pytest.mark.requirement("EVT-SUB-02")
def test_unknown_event_name_is_refused(api: ApiClient, endpoint: Endpoint) -> None:
    """A binding whose events list holds an unknown name is refused with a 4xx (an
    interpretation)."""
    events = (COMPLETED, FAILED, "generation.conformance-unknown")
    body = {"prompt": SUBMIT_PROMPT, **target_body("webhook.url", endpoint.url, events=events)}
    response = api.request("POST", IMAGES_PATH, json=body)
    assert 400 <= response.status_code < 500, (
        f"EVT-SUB-02: expected a 4xx for the unknown event name, saw {response.status_code}"
    )
