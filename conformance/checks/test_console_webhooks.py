"""Registered webhooks through the console (spec §2 "Registered webhook", §4 Console endpoints:
POST/GET /api/webhooks, POST /api/webhooks/{id}/test, DELETE /api/webhooks/{id}).

Each check sends the console request under test by hand with the primary session and
cleans up the webhooks it made. Console payloads are not shown (§4): the suite assumes
``{"url", "events"}`` in and ``id``, ``secret`` out (HOOK-CREATE-01, CONSOLE-PAYLOAD-01),
and a list as a JSON array or an object holding one. Every target is the check's own
receiver endpoint.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from conformance.asserts import assert_status, assert_status_in, assert_webhook_list, describe
from conformance.client import ApiClient
from conformance.events import RegisteredWebhook, delete_webhook, register_webhook
from conformance.operations import SUBMIT_PROMPT, SetupFailed
from conformance.receiver import Endpoint
from conformance.secrets import Secret
from conformance.signatures import verify_delivery

pytestmark = pytest.mark.console


def _created(response: httpx.Response, requirement_id: str) -> dict[str, object]:
    try:
        body = response.json()
    except ValueError:
        body = None
    assert isinstance(body, dict), (
        f"{requirement_id}: expected a JSON object from POST /api/webhooks, saw "
        f"{describe(response)}"
    )
    return body


@pytest.fixture
def webhook(api: ApiClient, endpoint: Endpoint) -> Iterator[RegisteredWebhook]:
    """A webhook of the primary account at the check's endpoint, deleted afterwards."""
    created = register_webhook(api, endpoint.url)
    yield created
    delete_webhook(api, created)


@pytest.mark.requirement("CONSOLE-HOOK-01")
def test_webhook_create_with_session_returns_id_and_whsec_secret(
    api: ApiClient, endpoint: Endpoint
) -> None:
    """POST /api/webhooks with a session creates a webhook and returns its whsec_ secret."""
    response = api.request(
        "POST", "/api/webhooks", role="none", session="primary", json={"url": endpoint.url}
    )
    assert_status_in(response, {200, 201}, "CONSOLE-HOOK-01")
    body = _created(response, "CONSOLE-HOOK-01")
    if isinstance(body.get("id"), str) and body["id"]:
        # Registered only for cleanup; the secret may be missing (then CONSOLE-HOOK-01).
        cleanup = RegisteredWebhook(str(body["id"]), Secret(str(body.get("secret"))), "primary")
        try:
            secret = body.get("secret")
            assert isinstance(secret, str) and secret, (
                f"CONSOLE-HOOK-01: expected the creation to return the signing secret; "
                f"fields seen: {sorted(body)}"
            )
            assert secret.startswith("whsec_"), (
                "CONSOLE-HOOK-01: expected the signing secret to start with 'whsec_'"
            )
        finally:
            delete_webhook(api, cleanup)
    else:
        pytest.fail(f"CONSOLE-HOOK-01: expected a webhook id in {sorted(body)}")


def _strings(value: object) -> list[str]:
    """Every string anywhere in a JSON document."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


@pytest.mark.requirement("HOOK-SECRET-01")
def test_webhook_creation_returns_a_whsec_secret(api: ApiClient, endpoint: Endpoint) -> None:
    """The answer that creates a registered webhook carries a signing secret starting with
    whsec_ (in whichever field: the console payloads are not shown)."""
    response = api.request(
        "POST", "/api/webhooks", role="none", session="primary", json={"url": endpoint.url}
    )
    try:
        body = response.json()
    except ValueError:
        body = None
    if not 200 <= response.status_code < 300 or not isinstance(body, dict):
        raise SetupFailed(
            f"setup: POST /api/webhooks with {{'url': ...}} answered {describe(response)} "
            "(the request payload is assumed: HOOK-CREATE-01)"
        )
    if isinstance(body.get("id"), str):
        delete_webhook(api, RegisteredWebhook(body["id"], Secret(""), "primary"))
    assert any(s.startswith("whsec_") for s in _strings(body)), (
        f"HOOK-SECRET-01: expected a signing secret starting with 'whsec_' in the creation "
        f"answer; saw the fields {sorted(body)} and no such value"
    )


@pytest.mark.requirement("CONSOLE-HOOK-02")
def test_webhook_list_with_session_includes_new_webhook(
    api: ApiClient, webhook: RegisteredWebhook
) -> None:
    """GET /api/webhooks with a session lists a webhook just created."""
    response = api.request("GET", "/api/webhooks", role="none", session="primary")
    ids = [str(item.get("id")) for item in assert_webhook_list(response, "CONSOLE-HOOK-02")]
    assert webhook.id in ids, (
        f"CONSOLE-HOOK-02: expected the new webhook {webhook.id} in the list; saw {ids}"
    )


@pytest.mark.requirement("HOOK-SECRET-02")
def test_webhook_list_never_shows_the_secret(api: ApiClient, webhook: RegisteredWebhook) -> None:
    """The whsec_ secret is returned once: the webhook list does not contain it."""
    response = api.request("GET", "/api/webhooks", role="none", session="primary")
    if not 200 <= response.status_code < 300:
        raise SetupFailed(
            f"setup: GET /api/webhooks answered {describe(response)}: no list to look in "
            "(CONSOLE-HOOK-02 judges the list)"
        )
    assert webhook.secret.reveal() not in response.text, (
        "HOOK-SECRET-02: expected the whsec_ secret only in the creation response; "
        "GET /api/webhooks contains it"
    )


@pytest.mark.requirement("CONSOLE-HOOK-03")
def test_webhook_test_with_session_sends_a_delivery(
    api: ApiClient, endpoint: Endpoint, webhook: RegisteredWebhook
) -> None:
    """POST /api/webhooks/{id}/test with a session sends a delivery to the webhook's URL."""
    response = api.request(
        "POST", f"/api/webhooks/{webhook.id}/test", role="none", session="primary"
    )
    assert 200 <= response.status_code < 300, (
        f"CONSOLE-HOOK-03: expected 2xx from the test request, saw {describe(response)}"
    )
    endpoint.wait_for(1, timeout=15.0)  # one attempt, within the 10 s timeout (§6)


@pytest.mark.requirement("CONSOLE-HOOK-04")
def test_webhook_test_delivery_is_a_signed_envelope(
    api: ApiClient, endpoint: Endpoint, webhook: RegisteredWebhook
) -> None:
    """A test delivery is a POST with the §6 headers, signed with the webhook's secret."""
    api.request("POST", f"/api/webhooks/{webhook.id}/test", role="none", session="primary")
    delivery = endpoint.wait_for(1, timeout=15.0)[0]
    expected = delivery.wire.delivery_headers
    missing = [name for name in expected if name not in delivery.headers]
    assert delivery.method == "POST" and not missing, (
        f"CONSOLE-HOOK-04: expected a POST with {list(expected)}; saw "
        f"{delivery.method}, missing {missing}"
    )
    verified = verify_delivery(delivery, webhook.secret, label="the webhook's whsec_ secret")
    assert verified.ok, f"CONSOLE-HOOK-04: {verified.message}"


@pytest.mark.requirement("CONSOLE-HOOK-05")
def test_webhook_delete_with_session_removes_it_from_the_list(
    api: ApiClient, endpoint: Endpoint
) -> None:
    """DELETE /api/webhooks/{id} with a session deletes it: it is no longer listed."""
    created = register_webhook(api, endpoint.url)
    response = api.request("DELETE", f"/api/webhooks/{created.id}", role="none", session="primary")
    try:
        assert 200 <= response.status_code < 300, (
            f"CONSOLE-HOOK-05: expected 2xx from the delete, saw {describe(response)}"
        )
        listing = api.request("GET", "/api/webhooks", role="none", session="primary")
        ids = [str(item.get("id")) for item in assert_webhook_list(listing, "CONSOLE-HOOK-05")]
        assert created.id not in ids, (
            f"CONSOLE-HOOK-05: expected the deleted webhook {created.id} gone from the list"
        )
    finally:
        delete_webhook(api, created)  # tolerates 404: already gone


@pytest.mark.requirement("CONSOLE-HOOK-06")
def test_submit_naming_a_deleted_webhook_returns_404(api: ApiClient, endpoint: Endpoint) -> None:
    """A submit whose webhook.id names a deleted webhook is answered 404."""
    created = register_webhook(api, endpoint.url)
    delete_webhook(api, created)
    response = api.request(
        "POST",
        "/v1/images/generate",
        json={"prompt": SUBMIT_PROMPT, "webhook": {"id": created.id}},
    )
    assert_status(response, 404, "CONSOLE-HOOK-06")


@pytest.mark.requirement("CONSOLE-HOOK-07")
def test_other_account_session_cannot_see_test_or_delete_a_webhook(
    api: ApiClient, webhook: RegisteredWebhook, endpoint: Endpoint
) -> None:
    """The second account's session neither lists, tests nor deletes the primary's webhook."""
    listing = api.request("GET", "/api/webhooks", role="none", session="second")
    ids = [str(item.get("id")) for item in assert_webhook_list(listing, "CONSOLE-HOOK-07")]
    tested = api.request("POST", f"/api/webhooks/{webhook.id}/test", role="none", session="second")
    deleted = api.request("DELETE", f"/api/webhooks/{webhook.id}", role="none", session="second")
    seen = {"listed": webhook.id in ids, "test": tested.status_code, "delete": deleted.status_code}
    assert seen == {"listed": False, "test": 404, "delete": 404}, (
        f"CONSOLE-HOOK-07: expected not listed, test 404, delete 404; saw {seen}"
    )
    assert not endpoint.deliveries, "CONSOLE-HOOK-07: the foreign test request sent a delivery"
    still = api.request("GET", "/api/webhooks", role="none", session="primary")
    assert webhook.id in [
        str(i.get("id")) for i in assert_webhook_list(still, "CONSOLE-HOOK-07")
    ], "CONSOLE-HOOK-07: the foreign delete removed the primary account's webhook"


@pytest.mark.requirement("CONSOLE-PAYLOAD-01")
def test_console_webhook_payloads_are_json_with_id_and_url(
    api: ApiClient, webhook: RegisteredWebhook, endpoint: Endpoint
) -> None:
    """The webhook list is JSON (an array, or an object holding one) of items with id and url."""
    response = api.request("GET", "/api/webhooks", role="none", session="primary")
    assert "json" in response.headers.get("content-type", ""), (
        f"CONSOLE-PAYLOAD-01: expected a JSON list, saw {response.headers.get('content-type')!r}"
    )
    items = assert_webhook_list(response, "CONSOLE-PAYLOAD-01")
    mine = [item for item in items if item.get("id") == webhook.id]
    assert mine and mine[0].get("url") == endpoint.url, (
        f"CONSOLE-PAYLOAD-01: expected an item with id {webhook.id} and url {endpoint.url}; "
        f"saw {json.dumps(mine)[:300]}"
    )
