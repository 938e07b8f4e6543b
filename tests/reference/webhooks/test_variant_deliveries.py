"""The variant's delivery switches (``serve --variant``, ``reference.config.Choices``),
over HTTP against the real process and the scripted loopback receiver.

Run through ``bash scripts/test tests/reference/webhooks`` (a loopback-only namespace).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re

import httpx
import pytest
from running_reference import (
    ReferenceFactory,
    RunningReference,
    bearer,
    generation_deliveries,
    wait_for_delivery,
)
from scripted_target import Arrival, Receiver, Reply

from reference.auth import SESSION_COOKIE

# Its tests wait on real deliveries and processes: CI starts them early (tests/conftest.py).
pytestmark = pytest.mark.slow

#: The variant's delivery headers (choice header-brand).
BRAND = "x-acme-"
#: Form of the variant's timestamps (choice timestamp-form).
Z_SECONDS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


def _variant(factory: ReferenceFactory, *args: str) -> tuple[RunningReference, httpx.Client]:
    running = factory(args=["--variant", *args])
    return running, running.client()


def _session(running: RunningReference) -> dict[str, str]:
    """The Cookie header of the primary console session (choice console-credential)."""
    return {"Cookie": f"{SESSION_COOKIE}={running.profile['sessions']['primary']['token']}"}


def _verified_t(arrival: Arrival, secret: str) -> int:
    """The t of the variant's signature, after checking its v1 (choices hmac-keying and
    signature-hex-case): HMAC keyed with the base64 after ``whsec_``, upper-case hex."""
    parts = dict(part.split("=", 1) for part in arrival.header(BRAND + "signature").split(","))
    key = base64.b64decode(secret.removeprefix("whsec_"))
    digest = hmac.new(key, parts["t"].encode() + b"." + arrival.body, hashlib.sha256).hexdigest()
    assert parts["v1"] == digest.upper()
    return int(parts["t"])


def test_variant_delivery_headers_signature_and_ids(
    reference_factory: ReferenceFactory, receiver: Receiver
) -> None:
    """header-brand, hmac-keying, signature-hex-case, id-form (evt_ and 20 hex digits) and
    timestamp-form (created_at with Z), on an inline delivery signed with the per-key
    secret (whsec_ and base64 in the variant)."""
    running, client = _variant(reference_factory)
    key = running.key("primary")
    secret = running.profile["keys"]["primary"]["signing_secret"]
    assert secret.startswith("whsec_")
    response = client.post(
        "/v1/images/generate",
        json={"prompt": "p", "webhook": {"url": receiver.url("/brand")}},
        headers=bearer(key),
    )
    assert response.status_code == 202, response.text
    (arrival,) = receiver.wait_for("/brand", 1, 15.0)
    body = json.loads(arrival.body)
    assert arrival.header(BRAND + "event") == body["event"] == "generation.completed"
    assert arrival.header(BRAND + "delivery") == body["id"]
    assert re.fullmatch(r"evt_[0-9a-f]{20}", body["id"])
    assert arrival.header(BRAND + "attempt") == "1"
    assert arrival.header(BRAND + "generation") == response.json()["id"]
    assert arrival.header("x-service-signature") is None
    assert Z_SECONDS.fullmatch(body["created_at"])
    _verified_t(arrival, secret)


def test_variant_retries_keep_their_first_signing_time(
    reference_factory: ReferenceFactory, receiver: Receiver
) -> None:
    """signature-time: every retry carries the t of the delivery's first signing;
    timestamp-form: each attempt's at has whole seconds and Z."""
    running, client = _variant(reference_factory)
    key = running.key("primary")
    receiver.script("/retry", [Reply(500), Reply(500), Reply(200)])
    response = client.post(
        "/v1/images/generate",
        json={"prompt": "p", "webhook": {"url": receiver.url("/retry")}},
        headers=bearer(key),
    )
    arrivals = receiver.wait_for("/retry", 3, 20.0)
    secret = running.profile["keys"]["primary"]["signing_secret"]
    times = {_verified_t(arrival, secret) for arrival in arrivals}
    assert len(times) == 1
    assert arrivals[2].at - arrivals[0].at >= 2.5
    record = wait_for_delivery(client, key, response.json()["id"], "delivered")
    assert all(Z_SECONDS.fullmatch(attempt["at"]) for attempt in record["attempts"])


def test_variant_timed_out_attempt_recorded_504(
    reference_factory: ReferenceFactory, receiver: Receiver
) -> None:
    """no-reply-status: an attempt that got no reply in time is recorded with status 504
    (a 1 s timeout and no timer slack keep the test short)."""
    running, client = _variant(reference_factory, "--delivery-timeout", "1", "--timer-slack", "0")
    key = running.key("primary")
    receiver.script("/slow", [Reply(200, delay_s=3.0)] * 3)
    response = client.post(
        "/v1/images/generate",
        json={"prompt": "p", "webhook": {"url": receiver.url("/slow")}},
        headers=bearer(key),
    )
    record = wait_for_delivery(client, key, response.json()["id"], "exhausted", timeout_s=30.0)
    assert [attempt["status"] for attempt in record["attempts"]] == [504, 504, 504]
    assert record["status_code"] == 504


def test_variant_redelivery(reference_factory: ReferenceFactory, receiver: Receiver) -> None:
    """redeliverable: a delivered delivery can be redelivered; redeliver-answer: outcome
    and status_code only; redelivery-attempt-header: the header starts again at 1 while the
    record numbers on; redelivery-bytes: the same JSON, serialized again."""
    running, client = _variant(reference_factory)
    key = running.key("primary")
    response = client.post(
        "/v1/images/generate",
        json={"prompt": "p", "webhook": {"url": receiver.url("/again")}},
        headers=bearer(key),
    )
    (first,) = receiver.wait_for("/again", 1, 15.0)
    record = wait_for_delivery(client, key, response.json()["id"], "delivered")
    delivery_id = record["delivery_id"]
    replayed = client.post(f"/v1/webhooks/deliveries/{delivery_id}/redeliver", headers=bearer(key))
    assert replayed.status_code == 200, replayed.text
    assert replayed.json() == {"outcome": "delivered", "status_code": 200}
    second = receiver.wait_for("/again", 2, 15.0)[1]
    assert second.header(BRAND + "attempt") == "1"
    assert second.header(BRAND + "delivery") == delivery_id
    assert json.loads(second.body) == json.loads(first.body) and second.body != first.body
    after = generation_deliveries(client, key, response.json()["id"])[0]
    assert [attempt["n"] for attempt in after["attempts"]] == [1, 2]


def test_variant_console_test_delivery_is_webhook_ping(
    reference_factory: ReferenceFactory, receiver: Receiver
) -> None:
    """test-event: a console test delivery is webhook.ping, signed with the whsec_ secret
    under the variant's keying."""
    running, client = _variant(reference_factory)
    cookies = _session(running)
    body = {"endpoint_url": receiver.url("/ping")}
    hook = client.post("/api/webhooks", json=body, headers=cookies)
    assert hook.status_code == 200, hook.text
    answer = client.post(f"/api/webhooks/{hook.json()['id']}/test", headers=cookies)
    assert answer.json()["outcome"] == "delivered", answer.text
    (arrival,) = receiver.wait_for("/ping", 1, 5.0)
    assert json.loads(arrival.body)["event"] == "webhook.ping"
    _verified_t(arrival, hook.json()["signing_secret"])
