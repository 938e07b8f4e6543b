"""The delivery target of each submit endpoint (spec §4 body tables, "Target selection
rules for a generation", "Callback URL requirements").

POST /v1/images/generate takes ``callback_url`` (the legacy flat body) and ``webhook``;
POST /v1/images/edit "Accepts callback_url and webhook as above"; POST
/v1/videos/generate lists both "As above". So every one of them accepts either target and
holds it to the same callback URL rules. The rest of an edit body is not shown (§4): an
edit that this suite's prompt-only body cannot get accepted even without a target says
nothing about targets, and is a skip, never a verdict.
"""

from __future__ import annotations

from typing import Any, Final

import pytest

from conformance.findings import fail
from conformance.judge.asserts import DeliveryTarget, assert_delivered, assert_status, describe
from conformance.judge.strategies import must_reject_vector
from conformance.observe.events import TargetKind, target_body
from conformance.observe.receiver import Endpoint
from conformance.target.client import ApiClient
from conformance.target.setup import EDIT_PATH, IMAGES_PATH, SUBMIT_PROMPT, VIDEOS_PATH
from conformance.target.webhooks import delete_webhook, register_webhook

#: The requirement that says each endpoint takes both target forms as the image submit does.
SAME_TARGETS: Final = {EDIT_PATH: "GEN-EDIT-01", VIDEOS_PATH: "GEN-VIDEO-06"}
#: A callback target every implementation must refuse (a private address, §4), from the
#: fixture vectors whose own requirement is a MUST.
BAD_CALLBACK: Final = must_reject_vector("http://10.0.0.1:9/").template


def _target_cases() -> list[Any]:
    return [
        pytest.param(
            path,
            field,
            id=f"{path.split('/')[-2]}-{path.split('/')[-1]}-{field}",
            marks=pytest.mark.requirement(rule),
        )
        for path, rule in SAME_TARGETS.items()
        for field in ("callback_url", "webhook.url")
    ]


def _skip_if_edit_body_refused(api: ApiClient, path: str) -> None:
    """Skip an edit check when this suite's prompt-only edit body is refused even without
    a target: then the answer says nothing about the target (the edit body is not shown)."""
    if path != EDIT_PATH:
        return
    bare = api.request("POST", path, json={"prompt": SUBMIT_PROMPT})
    if not 200 <= bare.status_code < 300:
        pytest.skip(
            f"POST {EDIT_PATH} refuses this suite's prompt-only edit body even without a "
            f"target ({describe(bare)}); the rest of the edit body is not shown (§4)"
        )


@pytest.mark.requirement("GEN-IMAGE-05")
def test_image_submit_with_callback_url_answers_202_and_delivers(
    api: ApiClient, delivery_target: DeliveryTarget
) -> None:
    """An image submit with ``callback_url`` (the legacy flat body) is answered 202 and
    its event is delivered to that URL."""
    body = {"prompt": SUBMIT_PROMPT, "callback_url": delivery_target.url}
    assert_status(api.request("POST", IMAGES_PATH, json=body), 202)
    assert_delivered(
        delivery_target, f"POST {IMAGES_PATH} with callback_url {delivery_target.url!r}"
    )


@pytest.mark.parametrize(("path", "field"), _target_cases())
def test_submit_endpoint_accepts_both_target_forms(
    api: ApiClient, endpoint: Endpoint, path: str, field: TargetKind
) -> None:
    """An edit or video submit naming its target by ``callback_url`` or by
    ``webhook.url`` (a URL on the suite's receiver) is accepted (2xx)."""
    response = api.request(
        "POST", path, json={"prompt": SUBMIT_PROMPT, **target_body(field, endpoint.url)}
    )
    if 200 <= response.status_code < 300:
        return
    _skip_if_edit_body_refused(api, path)
    fail(
        f"POST {path} with {field} on the suite's receiver: expected the submit accepted "
        f"(2xx), as {IMAGES_PATH} accepts it, saw {describe(response)}"
    )


@pytest.mark.parametrize(("path", "field"), _target_cases())
def test_submit_endpoint_refuses_bad_callback_target_with_400(
    api: ApiClient, path: str, field: TargetKind
) -> None:
    """An edit or video submit whose ``callback_url`` or ``webhook.url`` breaks the
    callback URL rules (a private address) is answered 400, as an image submit is."""
    body = {"prompt": SUBMIT_PROMPT, **target_body(field, BAD_CALLBACK)}
    response = api.request("POST", path, json=body)
    if response.status_code != 400:
        _skip_if_edit_body_refused(api, path)
    assert_status(response, 400)


@pytest.mark.console
@pytest.mark.requirement("HOOK-ID-01")
def test_registered_webhook_id_names_it_in_webhook_id(
    api: ApiClient, delivery_target: DeliveryTarget
) -> None:
    """The id a registered webhook was created with, sent as the string ``webhook.id`` of
    an image submit, names that webhook: the submit is answered 202 and its event arrives
    at the webhook's URL."""
    webhook = register_webhook(api, delivery_target.url)
    try:
        body = {"prompt": SUBMIT_PROMPT, "webhook": {"id": webhook.id}}
        response = api.request("POST", IMAGES_PATH, json=body)
        if response.status_code != 202:
            fail(
                f"POST {IMAGES_PATH} with webhook.id {webhook.id!r} (the id POST /api/webhooks "
                f"answered): expected 202, saw {describe(response)}"
            )
        assert_delivered(delivery_target, f"POST {IMAGES_PATH} with webhook.id {webhook.id!r}")
    finally:
        delete_webhook(api, webhook)
