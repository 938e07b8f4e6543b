"""Versioning of the public paths (spec §9: "Public paths are prefixed /v1"; the header
of the spec: "Public paths sit under /v1").

Every public operation of the OpenAPI document is sent to its /v1 path with the primary
key (every scope) and real ids of the primary account: it must be served there, so
neither a 404 (no such path) nor a 405 (no such method at that path). The api_version of
event envelopes (VER-ENV-*) is judged by the envelope checks. Spec §9 also makes image
submits with a delivery target asynchronous: a 202 with an id, the result pushed later.
"""

from __future__ import annotations

from typing import Any, Final

import pytest

from conformance.findings import fail
from conformance.judge.asserts import (
    DeliveryTarget,
    accepted_generation_id,
    assert_delivered,
    assert_status,
    describe,
)
from conformance.judge.operations import Operation, OperationPaths, operations
from conformance.observe.receiver import Delivery, Endpoint
from conformance.observe.waits import event_of
from conformance.run.fixtures.labs import Labs
from conformance.target.client import ApiClient
from conformance.target.setup import IMAGES_PATH, SUBMIT_PROMPT

PUBLIC: Final = [pytest.param(op, id=op.param_id) for op in operations() if op.public]
#: Spec §9: images with a delivery target are asynchronous.
#: What a server answers for a path or method it does not serve.
NOT_SERVED: Final = frozenset({404, 405})


@pytest.fixture(scope="module")
def paths(labs: Labs) -> OperationPaths:
    """Real ids of the primary account for the operations' path parameters."""
    return labs.paths("versioning")


@pytest.mark.parametrize("op", PUBLIC)
@pytest.mark.requirement("VER-PATH-01")
def test_public_operation_is_served_under_v1(
    api: ApiClient, paths: OperationPaths, endpoint: Endpoint, op: Operation
) -> None:
    """The public operation is served at its /v1 path (not 404, not 405)."""
    if op.path.startswith("/v1/webhooks/{id}") and not api.profile.sessions:
        pytest.skip("needs console: a registered webhook's id (add [sessions.primary])")
    path = paths.path(op)
    assert path.startswith("/v1/"), f"VER-PATH-01: the document's path {op.path} is not /v1"
    body: dict[str, Any] | None = op.minimal_body()
    if body is not None:
        body["webhook"] = {"url": endpoint.url}  # the stated async form (spec §9)
    response = api.request(op.method, path, json=body)
    assert response.status_code not in NOT_SERVED, (
        f"VER-PATH-01: {op.method} {path}: expected the operation to be served under /v1, "
        f"saw {describe(response)}"
    )


@pytest.mark.requirement("VER-IMAGE-01")
def test_image_submit_with_target_is_asynchronous(
    api: ApiClient, delivery_target: DeliveryTarget
) -> None:
    """An image submit with a delivery target is answered 202 with an id, and its result
    is pushed to the target later (an event for that generation arrives there)."""
    response = api.request(
        "POST", IMAGES_PATH, json={"prompt": SUBMIT_PROMPT, "webhook": {"url": delivery_target.url}}
    )
    assert_status(response, 202)
    generation_id = accepted_generation_id(response)
    arrived = assert_delivered(delivery_target, f"the result of {generation_id}")
    about = [_generation_of(delivery) for delivery in arrived]
    if generation_id not in about:
        events = [event_of(delivery) for delivery in arrived]
        fail(f"expected an event about {generation_id} at the target, saw {events} about {about}")


def _generation_of(delivery: Delivery) -> object:
    """The generation an event reports (its data.generation_id), None if it names none."""
    try:
        data = delivery.json().get("data")
    except (ValueError, AttributeError):
        return None
    return data.get("generation_id") if isinstance(data, dict) else None
