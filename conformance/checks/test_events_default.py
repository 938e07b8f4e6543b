"""Which events are sent without a subscription, and for which generations (spec §6
Events): generation.completed and generation.failed by default, for every asynchronous
generation with a delivery target (video, and images submitted with one).

Each check submits a generation (set-up: a refused submit is an error, not a verdict) and
waits for the event at a fresh endpoint, with a deadline from the profile
(``sandbox.max_generation_seconds`` plus one attempt). The spec says which events are
sent, not in which order beside others: the expected event is looked for among the
first arrivals (:func:`~conformance.observe.waits.wait_for_event`).
"""

from __future__ import annotations

import pytest

from conformance.checks.scenarios import WITHOUT_SUBSCRIPTION
from conformance.judge.asserts import DeliveryTarget, assert_delivered
from conformance.observe.deliveries import submit_with_target
from conformance.observe.events import COMPLETED, FAILED, TargetKind, target_body
from conformance.target.client import ApiClient
from conformance.target.profile import Profile
from conformance.target.setup import (
    EDIT_PATH,
    IMAGES_PATH,
    SUBMIT_PROMPT,
    VIDEOS_PATH,
    outcome_prompt,
)


@pytest.mark.parametrize("kind", WITHOUT_SUBSCRIPTION)
@pytest.mark.requirement("EVT-DEFAULT-01")
def test_completed_sent_without_events_field(
    api: ApiClient, delivery_target: DeliveryTarget, kind: TargetKind
) -> None:
    """With no events field (or a bare callback_url) a success sends generation.completed."""
    submit_with_target(api, delivery_target.url, kind=kind)
    assert_delivered(delivery_target, f"a generation bound by {kind}", event=COMPLETED)


@pytest.mark.sandbox
@pytest.mark.parametrize("kind", WITHOUT_SUBSCRIPTION)
@pytest.mark.requirement("EVT-DEFAULT-02")
def test_failed_sent_without_events_field(
    api: ApiClient, delivery_target: DeliveryTarget, profile: Profile, kind: TargetKind
) -> None:
    """With no events field (or a bare callback_url) a failure sends generation.failed."""
    submit_with_target(
        api, delivery_target.url, kind=kind, prompt=outcome_prompt(profile, "failed")
    )
    assert_delivered(delivery_target, f"a failed generation bound by {kind}", event=FAILED)


@pytest.mark.parametrize(
    ("path", "requirement_id"),
    [
        pytest.param(
            VIDEOS_PATH,
            "EVT-APPLY-01",
            id="video",
            marks=pytest.mark.requirement("EVT-APPLY-01"),
        ),
        pytest.param(
            IMAGES_PATH, "EVT-APPLY-02", id="image", marks=pytest.mark.requirement("EVT-APPLY-02")
        ),
    ],
)
def test_generation_with_target_sends_events(
    api: ApiClient, delivery_target: DeliveryTarget, path: str, requirement_id: str
) -> None:
    """A video or image generation submitted with a delivery target sends its event there."""
    submit_with_target(api, delivery_target.url, path=path)
    what = f"POST {path} with webhook.url"
    assert_delivered(delivery_target, what, event=COMPLETED, rule=requirement_id)


@pytest.mark.requirement("EVT-APPLY-03")
def test_image_edit_with_target_sends_events(
    api: ApiClient, delivery_target: DeliveryTarget
) -> None:
    """An image edit submitted with a delivery target sends its event there (an
    interpretation: the spec's "images submitted with a delivery target")."""
    body = {"prompt": SUBMIT_PROMPT, **target_body("webhook.url", delivery_target.url)}
    response = api.request("POST", EDIT_PATH, json=body)
    assert response.status_code == 202, (
        f"EVT-APPLY-03: expected the edit to be asynchronous (202), saw {response.status_code}"
    )
    assert_delivered(delivery_target, f"POST {EDIT_PATH} with webhook.url", event=COMPLETED)
