"""Registered webhooks through the console (spec §2 "Registered webhook", §4 Console endpoints:
POST/GET /api/webhooks, POST /api/webhooks/{id}/test, DELETE /api/webhooks/{id}).

Each check sends the console request under test by hand with the primary session and
cleans up the webhooks it made. Console payloads are not shown (§4): each request is the
profile's adapter declaration (``[adapter.create_webhook]`` …; undeclared, the suite
sends ``{"url", "events"}`` and reads ``id``, ``secret`` to set up, HOOK-CREATE-01), but
the checks of what the table states (create, list, delete) look for an id or a secret
wherever it appears in the answer; that the list holds items with id and url where the
declaration points (undeclared: a JSON array, or an object holding one) is
CONSOLE-PAYLOAD-01. Every target is the check's own receiver endpoint.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator

import httpx
import pytest

from conformance.findings import fail
from conformance.judge.asserts import (
    assert_status,
    assert_webhook_list,
    describe,
    json_values,
)
from conformance.observe.events import COMPLETED
from conformance.observe.receiver import Endpoint
from conformance.observe.signatures import verify_delivery
from conformance.secrets import Secret
from conformance.target.adapter_declaration import Listed
from conformance.target.adapters import console_request, declared
from conformance.target.client import ApiClient
from conformance.target.setup import IMAGES_PATH, SUBMIT_PROMPT, SetupFailed
from conformance.target.webhooks import RegisteredWebhook, delete_webhook, register_webhook

pytestmark = pytest.mark.console


def _assert_2xx(response: httpx.Response, rule: str) -> None:
    request = response.request
    if not 200 <= response.status_code < 300:
        fail(
            f"{request.method} {request.url.path} with the primary session: expected 2xx, "
            f"saw {describe(response)}",
            rule=rule,
        )


def _signing_secret(response: httpx.Response, api: ApiClient) -> str | None:
    """The secret in a creation answer: where the declaration points (by default its
    ``secret`` field), else any string starting with whsec_ (the field name is not shown;
    the prefix is how the spec names it)."""
    values = json_values(response)
    declared_secret = declared(api.profile, "create_webhook").read(
        values[0] if values else None, "secret"
    )
    if isinstance(declared_secret, str) and declared_secret:
        return declared_secret
    return next((v for v in values if isinstance(v, str) and v.startswith("whsec_")), None)


def _listed(api: ApiClient, rule: str, session: str = "primary") -> list[Listed]:
    """The session's webhooks as the console lists them (the declared list request)."""
    response = console_request(api, "list_webhooks", session=session)
    return assert_webhook_list(response, declared(api.profile, "list_webhooks"), rule)


@pytest.fixture
def webhook(api: ApiClient, endpoint: Endpoint) -> Iterator[RegisteredWebhook]:
    """A webhook of the primary account at the check's endpoint, deleted afterwards."""
    created = register_webhook(api, endpoint.url)
    yield created
    delete_webhook(api, created)


@contextlib.contextmanager
def _created(
    api: ApiClient, url: str, events: list[str] | None = None
) -> Iterator[tuple[httpx.Response, object, str | None]]:
    """POST /api/webhooks (the declared create) for *url* with the primary session: the
    answer, its JSON body (None if it has none) and the id it names where the declaration
    says (None if it names none), the webhook deleted afterwards when it does."""
    response = console_request(api, "create_webhook", session="primary", url=url, events=events)
    values = json_values(response)
    body = values[0] if values else None
    made = declared(api.profile, "create_webhook").read_id(body)
    try:
        yield response, body, made
    finally:
        if made is not None:
            delete_webhook(api, RegisteredWebhook(made, Secret(""), "primary"))


@pytest.mark.requirement("CONSOLE-HOOK-01", "HOOK-SECRET-01")
def test_webhook_create_with_session_returns_whsec_secret(
    api: ApiClient, endpoint: Endpoint
) -> None:
    """POST /api/webhooks with a session creates a webhook and returns its whsec_ secret."""
    with _created(api, endpoint.url) as (response, body, _):
        _assert_2xx(response, "CONSOLE-HOOK-01")
        secret = _signing_secret(response, api)
        if secret is None:
            fields = sorted(body) if isinstance(body, dict) else []
            fail(
                "expected the creation to return the signing secret (a `secret` field or a "
                f"whsec_ value); fields seen: {fields}",
                rule="CONSOLE-HOOK-01",
            )
        if not secret.startswith("whsec_"):
            fail("expected the signing secret to start with 'whsec_'", rule="HOOK-SECRET-01")


@pytest.mark.requirement("HOOK-CREATE-01")
def test_webhook_create_with_url_and_events_returns_id_and_secret(
    api: ApiClient, endpoint: Endpoint
) -> None:
    """A webhook created from its url and the optional events (generation.completed) is
    answered with its id and its secret."""
    with _created(api, endpoint.url, events=[COMPLETED]) as (response, _, made):
        what = f"POST /api/webhooks with a url and events [{COMPLETED!r}]"
        if not 200 <= response.status_code < 300:
            fail(f"{what}: expected 2xx, saw {describe(response)}")
        if made is None or _signing_secret(response, api) is None:
            fail(f"{what}: expected the answer to carry the webhook's id and secret")


@pytest.mark.requirement("HOOK-SECRET-03")
def test_two_webhooks_get_different_secrets(
    api: ApiClient, webhook: RegisteredWebhook, make_endpoint: Callable[..., Endpoint]
) -> None:
    """Two webhooks one account registers get two different signing secrets."""
    second = register_webhook(api, make_endpoint().url)
    try:
        assert webhook.secret != second.secret, (
            f"the webhooks {webhook.id!r} and {second.id!r} of one account were given the "
            "same signing secret"
        )
    finally:
        delete_webhook(api, second)


@pytest.mark.requirement("CONSOLE-HOOK-02")
def test_webhook_list_with_session_includes_new_webhook(
    api: ApiClient, webhook: RegisteredWebhook
) -> None:
    """GET /api/webhooks with a session lists a webhook just created."""
    response = console_request(api, "list_webhooks", session="primary")
    _assert_2xx(response, "CONSOLE-HOOK-02")
    assert webhook.id in json_values(response), (
        f"CONSOLE-HOOK-02: expected the new webhook's id {webhook.id} in the list, saw "
        f"{describe(response)}"
    )


@pytest.mark.requirement("HOOK-SECRET-02")
def test_webhook_list_never_shows_the_secret(api: ApiClient, webhook: RegisteredWebhook) -> None:
    """The whsec_ secret is returned once: the webhook list does not contain it."""
    response = console_request(api, "list_webhooks", session="primary")
    listing = declared(api.profile, "list_webhooks")
    if response.status_code not in {200, *listing.status}:
        raise SetupFailed(
            f"setup: the webhook list answered {describe(response)}: no list to look in "
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
    response = console_request(api, "test_webhook", session="primary", id=webhook.id)
    _assert_2xx(response, "CONSOLE-HOOK-03")
    endpoint.wait_for(1, timeout=15.0)  # one attempt, within the 10 s timeout (§6)


@pytest.mark.requirement("CONSOLE-HOOK-04")
def test_webhook_test_delivery_is_a_signed_envelope(
    api: ApiClient, endpoint: Endpoint, webhook: RegisteredWebhook
) -> None:
    """A test delivery is a POST with the §6 headers, signed with the webhook's secret."""
    console_request(api, "test_webhook", session="primary", id=webhook.id)
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
    response = console_request(api, "delete_webhook", session="primary", id=created.id)
    try:
        _assert_2xx(response, "CONSOLE-HOOK-05")
        listing = console_request(api, "list_webhooks", session="primary")
        _assert_2xx(listing, "CONSOLE-HOOK-05")
        assert created.id not in json_values(listing), (
            f"CONSOLE-HOOK-05: expected the deleted webhook {created.id} gone from the list, "
            f"saw {describe(listing)}"
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
        IMAGES_PATH,
        json={"prompt": SUBMIT_PROMPT, "webhook": {"id": created.id}},
    )
    assert_status(response, 404)


@pytest.mark.requirement("CONSOLE-HOOK-07")
def test_other_account_session_cannot_see_test_or_delete_a_webhook(
    api: ApiClient, webhook: RegisteredWebhook, endpoint: Endpoint
) -> None:
    """The second account's session neither lists, tests nor deletes the primary's webhook."""
    ids = [item.id for item in _listed(api, "CONSOLE-HOOK-07", session="second")]
    tested = console_request(api, "test_webhook", session="second", id=webhook.id)
    deleted = console_request(api, "delete_webhook", session="second", id=webhook.id)
    seen = {"listed": webhook.id in ids, "test": tested.status_code, "delete": deleted.status_code}
    assert seen == {"listed": False, "test": 404, "delete": 404}, (
        f"CONSOLE-HOOK-07: expected not listed, test 404, delete 404; saw {seen}"
    )
    assert not endpoint.deliveries, "CONSOLE-HOOK-07: the foreign test request sent a delivery"
    assert webhook.id in [item.id for item in _listed(api, "CONSOLE-HOOK-07")], (
        "CONSOLE-HOOK-07: the foreign delete removed the primary account's webhook"
    )


@pytest.mark.requirement("CONSOLE-PAYLOAD-01")
def test_console_webhook_payloads_are_json_with_id_and_url(
    api: ApiClient, webhook: RegisteredWebhook, endpoint: Endpoint
) -> None:
    """The webhook list is JSON (an array, or an object holding one) of items with id and url."""
    listing = declared(api.profile, "list_webhooks")
    response = console_request(api, "list_webhooks", session="primary")
    assert "json" in response.headers.get("content-type", ""), (
        f"CONSOLE-PAYLOAD-01: expected a JSON list, saw {response.headers.get('content-type')!r}"
    )
    items = assert_webhook_list(response, listing)
    mine = [item for item in items if item.id == webhook.id]
    assert mine and mine[0].url == endpoint.url, (
        f"CONSOLE-PAYLOAD-01: expected an item with id {webhook.id} at "
        f"{listing.where('item_id')} and url {endpoint.url} at {listing.where('item_url')}; "
        f"saw {json.dumps([item.item for item in mine])[:300]}"
    )
