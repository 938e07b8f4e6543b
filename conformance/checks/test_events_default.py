"""Which events are sent without a subscription, and for which generations (spec §6
Events): generation.completed and generation.failed by default, for every asynchronous
generation with a delivery target (video, and images submitted with one).

Each check sends its submit by hand and waits for the delivery at a fresh endpoint, with
a deadline from the profile (``sandbox.max_generation_seconds`` plus one attempt).
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.asserts import assert_status
from conformance.client import ApiClient
from conformance.events import (
    COMPLETED,
    FAILED,
    TargetKind,
    delivery_deadline,
    target_body,
)
from conformance.operations import SUBMIT_PROMPT
from conformance.profile import Profile
from conformance.receiver import Delivery, DeliveryTimeout, Endpoint

DEFAULT_TARGETS = [
    pytest.param("webhook.url", id="webhook-url-no-events"),
    pytest.param("callback_url", id="callback-url"),
]


def _event_of(delivery: Delivery) -> Any:
    """The event a delivery reports: the body's event (the header is checked apart)."""
    try:
        body = delivery.json()
    except ValueError:
        return delivery.header("Event")
    return body.get("event") if isinstance(body, dict) else None


def _first_delivery(
    endpoint: Endpoint, profile: Profile, requirement_id: str, what: str
) -> Delivery:
    try:
        return endpoint.wait_for(1, timeout=delivery_deadline(profile))[0]
    except DeliveryTimeout as error:
        pytest.fail(f"{requirement_id}: expected {what}; {error}")


@pytest.mark.parametrize("kind", DEFAULT_TARGETS)
@pytest.mark.requirement("EVT-DEFAULT-01")
def test_completed_sent_without_events_field(
    api: ApiClient, endpoint: Endpoint, profile: Profile, kind: TargetKind
) -> None:
    """With no events field (or a bare callback_url) a success sends generation.completed."""
    body = {"prompt": SUBMIT_PROMPT, **target_body(kind, endpoint.url)}
    response = api.request("POST", "/v1/images/generate", json=body)
    assert_status(response, 202, "EVT-DEFAULT-01 (setup)")
    delivery = _first_delivery(endpoint, profile, "EVT-DEFAULT-01", f"{COMPLETED} by default")
    assert _event_of(delivery) == COMPLETED, (
        f"EVT-DEFAULT-01: expected {COMPLETED}, saw {_event_of(delivery)!r}"
    )


@pytest.mark.sandbox
@pytest.mark.parametrize("kind", DEFAULT_TARGETS)
@pytest.mark.requirement("EVT-DEFAULT-02")
def test_failed_sent_without_events_field(
    api: ApiClient, endpoint: Endpoint, profile: Profile, kind: TargetKind
) -> None:
    """With no events field (or a bare callback_url) a failure sends generation.failed."""
    prompt = f"{SUBMIT_PROMPT} {profile.sandbox.fail_prompt}"
    body = {"prompt": prompt, **target_body(kind, endpoint.url)}
    response = api.request("POST", "/v1/images/generate", json=body)
    assert_status(response, 202, "EVT-DEFAULT-02 (setup)")
    delivery = _first_delivery(endpoint, profile, "EVT-DEFAULT-02", f"{FAILED} by default")
    assert _event_of(delivery) == FAILED, (
        f"EVT-DEFAULT-02: expected {FAILED}, saw {_event_of(delivery)!r}"
    )


def _submit_and_expect_event(
    api: ApiClient, endpoint: Endpoint, profile: Profile, path: str, requirement_id: str
) -> None:
    body = {"prompt": SUBMIT_PROMPT, **target_body("webhook.url", endpoint.url)}
    response = api.request("POST", path, json=body)
    assert_status(response, 202, requirement_id)
    delivery = _first_delivery(endpoint, profile, requirement_id, f"an event for POST {path}")
    assert _event_of(delivery) == COMPLETED, (
        f"{requirement_id}: expected {COMPLETED} for POST {path}, saw {_event_of(delivery)!r}"
    )


@pytest.mark.requirement("EVT-APPLY-01")
def test_video_with_target_sends_events(
    api: ApiClient, endpoint: Endpoint, profile: Profile
) -> None:
    """A video generation submitted with a delivery target sends its event there."""
    _submit_and_expect_event(api, endpoint, profile, "/v1/videos/generate", "EVT-APPLY-01")


@pytest.mark.requirement("EVT-APPLY-02")
def test_image_with_target_sends_events(
    api: ApiClient, endpoint: Endpoint, profile: Profile
) -> None:
    """An image generation submitted with a delivery target sends its event there."""
    _submit_and_expect_event(api, endpoint, profile, "/v1/images/generate", "EVT-APPLY-02")


@pytest.mark.requirement("EVT-APPLY-03")
def test_image_edit_with_target_sends_events(
    api: ApiClient, endpoint: Endpoint, profile: Profile
) -> None:
    """An image edit submitted with a delivery target sends its event there (an
    interpretation: the spec's "images submitted with a delivery target")."""
    body = {"prompt": SUBMIT_PROMPT, **target_body("webhook.url", endpoint.url)}
    response = api.request("POST", "/v1/images/edit", json=body)
    assert response.status_code == 202, (
        f"EVT-APPLY-03: expected the edit to be asynchronous (202), saw {response.status_code}"
    )
    delivery = _first_delivery(endpoint, profile, "EVT-APPLY-03", "an event for the edit")
    assert _event_of(delivery) == COMPLETED, (
        f"EVT-APPLY-03: expected {COMPLETED}, saw {_event_of(delivery)!r}"
    )
