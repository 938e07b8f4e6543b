"""The webhook side over HTTP, against the reference running as a process (spec §4, §6).

Uses ``reference_server`` (shared, provisioned, 127.0.0.1/32 allowlisted) from
``tests/reference/conftest.py`` and the scripted loopback receiver. Run through
``bash scripts/test tests/reference/webhooks``.
"""

from __future__ import annotations

import base64

import pytest
from running_reference import RunningReference, bearer, submit_image, wait_for_delivery
from scripted_target import Receiver, Reply
from webhook_harness import assert_schema, parse_body, verify_signature


def test_console_webhook_lifecycle(reference_server: RunningReference, receiver: Receiver) -> None:
    client = reference_server.client()
    session = bearer(reference_server.session("primary"))
    other = bearer(reference_server.session("second"))
    created = client.post("/api/webhooks", json={"url": receiver.url("/console")}, headers=session)
    assert created.status_code == 201, created.text
    hook = created.json()
    assert_schema("registered-webhook-created", hook)
    assert hook["secret"].startswith("whsec_")
    listed = client.get("/api/webhooks", headers=session)
    assert listed.status_code == 200
    assert_schema("registered-webhook-list", listed.json())
    assert hook["id"] in [w["id"] for w in listed.json()["webhooks"]]
    assert hook["secret"] not in listed.text
    # An API key does not open console paths; another account's session sees nothing.
    assert (
        client.get("/api/webhooks", headers=bearer(reference_server.key("primary"))).status_code
        == 401
    )
    assert hook["id"] not in client.get("/api/webhooks", headers=other).text
    assert client.post(f"/api/webhooks/{hook['id']}/test", headers=other).status_code == 404
    assert client.delete(f"/api/webhooks/{hook['id']}", headers=other).status_code == 404
    tested = client.post(f"/api/webhooks/{hook['id']}/test", headers=session)
    assert tested.status_code == 200, tested.text
    assert_schema("webhook-test-response", tested.json())
    assert tested.json()["outcome"] == "delivered"
    (arrival,) = receiver.wait_for("/console", 1, timeout_s=5)
    verify_signature(arrival.header("x-service-signature"), hook["secret"], arrival.body)
    assert client.delete(f"/api/webhooks/{hook['id']}", headers=session).status_code == 204
    assert hook["id"] not in client.get("/api/webhooks", headers=session).text
    refused = client.post("/api/webhooks", json={"url": "http://10.0.0.1:9/"}, headers=session)
    assert refused.status_code == 400
    assert refused.json()["detail"]


def test_inline_delivery_listed_and_signed_with_key_secret(
    reference_server: RunningReference, receiver: Receiver
) -> None:
    client = reference_server.client()
    key = reference_server.key("primary")
    secret = reference_server.profile["keys"]["primary"]["signing_secret"]
    generation_id = submit_image(
        client, key, {"prompt": "a cat", "webhook": {"url": receiver.url("/h")}}
    )
    (arrival,) = receiver.wait_for("/h", 1, timeout_s=10)
    body = parse_body(arrival.body)
    assert_schema("strict-event-envelope", body)
    assert body["data"]["generation_id"] == generation_id
    verify_signature(arrival.header("x-service-signature"), secret, arrival.body)
    record = wait_for_delivery(client, key, generation_id, "delivered")
    assert_schema("delivery-record", record)
    assert record["mode"] == "inline" and record["id"] == body["id"]
    foreign = bearer(reference_server.key("foreign"))
    response = client.get(f"/v1/generations/{generation_id}/deliveries", headers=foreign)
    assert response.status_code == 404
    shown = client.get(f"/v1/generations/{generation_id}", headers=bearer(key))
    assert shown.json()["webhook"]["mode"] == "inline"
    assert secret not in shown.text


def test_redeliver_over_http(reference_server: RunningReference, receiver: Receiver) -> None:
    client = reference_server.client()
    key = reference_server.key("primary")
    receiver.script("/r", [Reply(500), Reply(500), Reply(500)])
    generation_id = submit_image(client, key, {"prompt": "x", "callback_url": receiver.url("/r")})
    record = wait_for_delivery(client, key, generation_id, "exhausted", timeout_s=15)
    foreign = bearer(reference_server.key("foreign"))
    path = f"/v1/webhooks/deliveries/{record['id']}/redeliver"
    assert client.post(path, headers=foreign).status_code == 404
    answer = client.post(path, headers=bearer(key))
    assert answer.status_code == 200, answer.text
    assert_schema("redeliver-response", answer.json())
    assert (answer.json()["outcome"], answer.json()["status_code"]) == ("delivered", 200)
    arrivals = receiver.wait_for("/r", 4, timeout_s=5)
    assert arrivals[3].body == arrivals[0].body
    assert client.post(path, headers=bearer(key)).status_code == 409


@pytest.mark.parametrize(
    ("query", "status"),
    [
        pytest.param("outcome=delivered&limit=100", 200, id="delivered-100-ok"),
        pytest.param("outcome=pending_retry", 200, id="pending_retry-ok"),
        pytest.param("outcome=success", 400, id="unknown-outcome-400"),
        pytest.param("outcome=", 400, id="empty-outcome-400"),
        pytest.param("limit=101", 400, id="limit-101-400"),
        pytest.param("limit=0", 400, id="limit-0-400"),
    ],
)
def test_webhook_delivery_list_query(
    reference_server: RunningReference, receiver: Receiver, query: str, status: int
) -> None:
    client = reference_server.client()
    session = bearer(reference_server.session("primary"))
    hook = client.post("/api/webhooks", json={"url": receiver.url("/q")}, headers=session).json()
    response = client.get(
        f"/v1/webhooks/{hook['id']}/deliveries?{query}",
        headers=bearer(reference_server.key("primary")),
    )
    assert response.status_code == status, response.text
    if status == 200:
        assert_schema("delivery-list", response.json())
    else:
        assert response.json()["detail"]
    foreign = client.get(
        f"/v1/webhooks/{hook['id']}/deliveries", headers=bearer(reference_server.key("foreign"))
    )
    assert foreign.status_code == 404


def test_credentials_in_a_target_url_are_sent_as_basic_auth_and_never_echoed(
    reference_server: RunningReference, receiver: Receiver
) -> None:
    """A target URL with userinfo: the delivery carries it as Basic auth, and every echo of
    the URL (the 202 body, the generation read, the delivery record, the registered
    webhook) shows it masked."""
    client = reference_server.client()
    key = reference_server.key("primary")
    password = "s3cret-in-the-url"
    url = receiver.url("/creds").replace("://", f"://hook-user:{password}@", 1)
    masked = receiver.url("/creds").replace("://", "://***@", 1)
    submitted = client.post(
        "/v1/images/generate", json={"prompt": "a cat", "callback_url": url}, headers=bearer(key)
    )
    assert submitted.status_code == 202, submitted.text
    generation_id = submitted.json()["id"]
    (arrival,) = receiver.wait_for("/creds", 1, timeout_s=10)
    basic = base64.b64encode(f"hook-user:{password}".encode()).decode()
    assert arrival.header("authorization") == f"Basic {basic}"
    record = wait_for_delivery(client, key, generation_id, "delivered")
    assert record["target_url"] == masked
    shown = client.get(f"/v1/generations/{generation_id}", headers=bearer(key))
    listing = client.get(f"/v1/generations/{generation_id}/deliveries", headers=bearer(key))
    session = bearer(reference_server.session("primary"))
    created = client.post("/api/webhooks", json={"url": url}, headers=session)
    assert created.status_code == 201, created.text
    assert created.json()["url"] == masked
    listed = client.get("/api/webhooks", headers=session)
    for echo in (submitted, shown, listing, created, listed):
        assert password not in echo.text and "hook-user" not in echo.text, echo.text
    client.delete(f"/api/webhooks/{created.json()['id']}", headers=session)
