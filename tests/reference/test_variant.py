"""The variant (``serve --variant``): each switch of ``reference.config.Choices`` takes the
other legitimate side of its open choice, over HTTP against the real process.

One test (or two) per switch; the delivery switches are in
``tests/reference/webhooks/test_variant_deliveries.py``. Run through ``bash scripts/test``
(a loopback-only network namespace): the tests start the reference.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import fields
from typing import Any

import httpx
import pytest
from running_reference import ReferenceFactory, RunningReference, bearer, start_reference

from conformance.catalog import load_catalog
from conformance.target.profile import load_profile
from reference.auth import SESSION_COOKIE
from reference.config import VARIANT, VARIANT_TIMER_SLACK_S, Choices
from reference.errors import error_response
from reference.tiers import load_tiers

# Its tests wait on real deliveries and processes: CI starts them early (tests/conftest.py).
pytestmark = pytest.mark.slow

#: Nothing listens on the discard port: a target there is valid and never answers.
SILENT_TARGET = "http://127.0.0.1:9/variant"


@pytest.fixture(scope="module")
def variant(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningReference]:
    """One variant service for the tests that neither spend limits nor wait on timing."""
    running = start_reference(tmp_path_factory.mktemp("variant"), args=["--variant"])
    try:
        yield running
    finally:
        running.stop()


def _login(running: RunningReference, name: str = "primary") -> httpx.Client:
    """A client holding the variant's session cookie after its log-in (choice console-api)."""
    session = running.profile["sessions"][name]
    client = running.client()
    response = client.post(
        "/api/auth/login", json={"username": session["email"], "passphrase": session["password"]}
    )
    assert response.status_code == 200, response.text
    assert SESSION_COOKIE in client.cookies
    return client


def _submit(
    client: httpx.Client, key: str, body: dict[str, Any], path: str = "/v1/images/generate"
) -> httpx.Response:
    return client.post(path, json=body, headers=bearer(key))


def _generation(client: httpx.Client, key: str, generation_id: str) -> dict[str, Any]:
    response = client.get(f"/v1/generations/{generation_id}", headers=bearer(key))
    assert response.status_code == 200, response.text
    record: dict[str, Any] = response.json()["generation"]
    return record


def _wait_status(
    client: httpx.Client, key: str, generation_id: str, timeout_s: float = 15.0
) -> dict[str, Any]:
    """Poll the (wrapped) generation until it is finished; bounded by the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        record = _generation(client, key, generation_id)
        if record["status"] in ("completed", "failed", "cancelled"):
            return record
        assert time.monotonic() < deadline, record
        time.sleep(0.05)  # polling interval; the deadline bounds the wait


# -- the switches as a whole -------------------------------------------------------------


def test_variant_differs_on_every_choice_and_each_is_catalogued() -> None:
    """Every switch has a catalog choice of the same name, and the variant flips each."""
    names = [f.name for f in fields(Choices)]
    assert Choices().differing(VARIANT) == names
    catalogued = {choice.id for choice in load_catalog().choices}
    assert {name.replace("_", "-") for name in names} <= catalogued


def test_variant_profile_says_it_is_the_variant(variant: RunningReference) -> None:
    assert variant.profile["name"] == "reference variant (embedded)"
    assert "--timer-slack" in variant.stderr_text()


def test_variant_profile_declares_its_choices(variant: RunningReference) -> None:
    """The provisioned profile is one the suite loads, declaring the variant's console
    (paths, field names, the session cookie), brand word, keying and counted requests."""
    profile = load_profile(variant.directory / "profile.toml")
    assert profile.wire.header_brand == "Acme"
    assert profile.wire.secret_keying == "base64-after-prefix"
    assert profile.rate.request == "submits"
    declared = variant.profile["adapter"]
    assert declared["credential"] == {"scheme": "cookie", "cookie": SESSION_COOKIE}
    assert declared["login"]["path"] == "/api/auth/login"
    assert declared["create_webhook"]["body"] == {
        "endpoint_url": "{url}",
        "event_types": "{events}",
    }


def test_variant_timer_slack_is_on_unless_said_otherwise(
    reference_factory: ReferenceFactory,
) -> None:
    """--variant makes delivery timers fire up to 1 s late; --timer-slack 0 keeps them on time."""
    on_time = reference_factory(args=["--variant", "--timer-slack", "0"], provision=False)
    assert "--timer-slack" not in on_time.stderr_text()
    assert VARIANT_TIMER_SLACK_S == 1.0


# -- errors and authentication ------------------------------------------------------------


def test_variant_error_body_is_an_error_object(variant: RunningReference) -> None:
    """error-body: errors other than 429 are {"error": {"message", "status"}}."""
    response = variant.client().get("/v1/generations/nope", headers=bearer(variant.key("primary")))
    assert response.status_code == 404
    assert set(response.json()) == {"error"}
    assert response.json()["error"]["status"] == 404 and response.json()["error"]["message"]


def test_variant_error_body_of_429_keeps_detail() -> None:
    """error-body: a 429 keeps {"detail"}, which spec §7 states."""
    assert error_response(429, "slow down", shape="error-object").body == b'{"detail":"slow down"}'
    assert b'"error"' in error_response(400, "bad", shape="error-object").body


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="missing"),
        pytest.param({"Authorization": "Bearer gk_" + "A" * 43}, id="unknown"),
        pytest.param({"Authorization": "Basic abc"}, id="malformed"),
    ],
)
def test_variant_bad_key_status_is_403(variant: RunningReference, headers: dict[str, str]) -> None:
    """bad-key-status: a missing, unknown or malformed key gets 403."""
    assert variant.client().get("/v1/account/tier", headers=headers).status_code == 403


def test_variant_revoked_key_gets_403(variant: RunningReference) -> None:
    client = variant.client()
    assert client.get("/v1/account/tier", headers=bearer(variant.key("revoked"))).status_code == 403


def test_variant_bearer_scheme_is_exact(variant: RunningReference) -> None:
    """bearer-scheme-case: only "Bearer" as written opens /v1."""
    client, key = variant.client(), variant.key("primary")
    assert client.get("/v1/account/tier", headers={"Authorization": f"Bearer {key}"}).is_success
    lower = client.get("/v1/account/tier", headers={"Authorization": f"bearer {key}"})
    assert lower.status_code == 403


def test_variant_invalid_body_status_is_422(variant: RunningReference) -> None:
    """invalid-body-status: a body refused for itself gets 422; a bad callback keeps 400."""
    client, key = variant.client(), variant.key("primary")
    assert _submit(client, key, {"size": "1K"}).status_code == 422
    bad_target = _submit(client, key, {"prompt": "p", "callback_url": "ftp://127.0.0.1:9/x"})
    assert bad_target.status_code == 400


def test_variant_body_content_type_is_assumed(variant: RunningReference) -> None:
    """body-content-type: a JSON body without Content-Type is read all the same."""
    response = variant.client().post(
        "/v1/images/generate",
        content=b'{"prompt": "no content type", "webhook": {"url": "'
        + SILENT_TARGET.encode()
        + b'"}}',
        headers=bearer(variant.key("primary")),
    )
    assert response.status_code == 202, response.text


@pytest.mark.parametrize(
    ("body", "path"),
    [
        pytest.param({"prompt": "p", "size": "large"}, "/v1/images/generate", id="size-label"),
        pytest.param(
            {"prompt": "p", "size": "1K", "model": "m"}, "/v1/images/generate", id="model"
        ),
        pytest.param({"prompt": "p", "duration": 5.5}, "/v1/videos/generate", id="duration"),
        pytest.param({"prompt": "p", "resolution": "hd"}, "/v1/videos/generate", id="resolution"),
        pytest.param({"prompt": "p" * 4001}, "/v1/videos/generate", id="prompt-length"),
    ],
)
def test_variant_body_values_and_unknown_fields_refused(
    variant: RunningReference, body: dict[str, Any], path: str
) -> None:
    """body-values and unknown-body-fields: narrower values, no field the spec does not show."""
    assert _submit(variant.client(), variant.key("primary"), body, path).status_code == 422


def test_variant_model_category_outside_the_tier_is_400(variant: RunningReference) -> None:
    """model-category-status: a video submit on a tier without video is refused with 400."""
    key = variant.key("restricted-models")
    assert _submit(variant.client(), key, {"prompt": "p"}, "/v1/videos/generate").status_code == 400


def test_variant_body_values_shown_in_the_spec_are_accepted(variant: RunningReference) -> None:
    client, key = variant.client(), variant.key("primary")
    body = {"prompt": "p", "duration": 5, "resolution": "720p"}
    assert _submit(client, key, body, "/v1/videos/generate").status_code == 202


# -- generations -------------------------------------------------------------------------


def test_variant_image_without_target_is_answered_finished(variant: RunningReference) -> None:
    """image-without-target and generation-body: 200 with the finished generation, wrapped."""
    response = _submit(variant.client(), variant.key("primary"), {"prompt": "now", "size": "1K"})
    assert response.status_code == 200, response.text
    record = response.json()["generation"]
    assert record["status"] == "completed" and record["output_url"]
    uuid.UUID(record["id"])  # id-form: a generation id is a UUID


def test_variant_accepted_body_holds_the_id_only(variant: RunningReference) -> None:
    """accepted-body: the 202 is {"id"}; generation-body: the read wraps the record."""
    client, key = variant.client(), variant.key("primary")
    response = _submit(client, key, {"prompt": "p", "webhook": {"url": SILENT_TARGET}})
    assert response.status_code == 202 and list(response.json()) == ["id"]
    record = _wait_status(client, key, response.json()["id"])
    assert record["id"] == response.json()["id"]


def test_variant_failed_and_cancelled_records(variant: RunningReference) -> None:
    """failed-credits-used: a failed generation shows its price; cancelled-error-message:
    a cancelled one has a null error_message."""
    client, key = variant.client(), variant.key("primary")
    failed = _submit(client, key, {"prompt": "[sandbox:fail]", "webhook": {"url": SILENT_TARGET}})
    cancelled = _submit(
        client, key, {"prompt": "[sandbox:cancel]", "webhook": {"url": SILENT_TARGET}}
    )
    failed_record = _wait_status(client, key, failed.json()["id"])
    assert failed_record["status"] == "failed" and failed_record["credits_used"] == 1
    cancelled_record = _wait_status(client, key, cancelled.json()["id"])
    assert cancelled_record["status"] == "cancelled" and cancelled_record["error_message"] is None


def test_variant_foreign_generation_is_403_unknown_is_404(variant: RunningReference) -> None:
    """foreign-resource-status: another account's generation is 403; an unknown id 404."""
    client = variant.client()
    created = _submit(client, variant.key("primary"), {"prompt": "p", "size": "1K"})
    generation_id = created.json()["generation"]["id"]
    foreign = bearer(variant.key("foreign"))
    assert client.get(f"/v1/generations/{generation_id}", headers=foreign).status_code == 403
    assert client.get(f"/v1/generations/{uuid.uuid4()}", headers=foreign).status_code == 404
    deliveries = client.get(f"/v1/generations/{generation_id}/deliveries", headers=foreign)
    assert deliveries.status_code == 403


def test_variant_pending_status_and_queued_concurrency(reference_factory: ReferenceFactory) -> None:
    """pending-status and concurrency: beyond concurrent_limit (2) a submit is queued, not
    refused, and waits for a slot; an unfinished generation reads "pending"."""
    running = reference_factory(args=["--variant", "--latency-ms", "1500"])
    client, key = running.client(), running.key("low-limit")
    body = {"prompt": "p", "webhook": {"url": SILENT_TARGET}}
    answers = [_submit(client, key, body) for _ in range(3)]
    assert [a.status_code for a in answers] == [202, 202, 202]
    first, second, third = (a.json()["id"] for a in answers)
    assert _generation(client, key, third)["status"] == "pending"
    _wait_status(client, key, first)
    _wait_status(client, key, second)
    # The third started when a slot freed: it is still running 1.5 s after the others.
    assert _generation(client, key, third)["status"] == "pending"
    assert _wait_status(client, key, third)["status"] == "completed"


def test_variant_credit_cap_refuses_at_cap_and_prices(reference_factory: ReferenceFactory) -> None:
    """credit-cap: a video (3 credits, the variant's price) is admitted while the credits
    used are below the cap of 8, and refused once they reach it; prices: 3 per video."""
    running = reference_factory(args=["--variant"])
    client, key = running.client(), running.key("low-limit")
    statuses = [
        _submit(client, key, {"prompt": "p"}, "/v1/videos/generate").status_code for _ in range(4)
    ]
    assert statuses == [202, 202, 202, 429]
    usage = client.get("/v1/account/usage", headers=bearer(key)).json()
    assert usage["credits_used_today"] == 9
    assert load_tiers("variant-prices").prices["video"] == 3


def test_variant_counts_only_submits_and_sends_no_rate_headers_on_success(
    reference_factory: ReferenceFactory,
) -> None:
    """rate-counted: reads do not count toward the per-minute limit (20), submits do;
    rate-headers-on-success: no X-RateLimit-* on a served answer."""
    running = reference_factory(args=["--variant"])
    client, key = running.client(), running.key("low-limit")
    reads = [client.get("/v1/account/tier", headers=bearer(key)) for _ in range(25)]
    assert {r.status_code for r in reads} == {200}
    assert not any(name.startswith("x-ratelimit") for name in reads[0].headers)
    refused = {"prompt": "p", "callback_url": "ftp://127.0.0.1:9/x"}  # 400, no credit spent
    statuses = [_submit(client, key, refused).status_code for _ in range(21)]
    assert statuses == [400] * 20 + [429]


# -- targets and events --------------------------------------------------------------------


def test_variant_events_list_adds_to_defaults_and_unknown_names_are_ignored(
    variant: RunningReference,
) -> None:
    """events-list and unknown-event-names."""
    client, key = variant.client(), variant.key("primary")
    events = ["generation.cancelled", "generation.unknown"]
    response = _submit(
        client, key, {"prompt": "p", "webhook": {"url": SILENT_TARGET, "events": events}}
    )
    assert response.status_code == 202, response.text
    bound = _generation(client, key, response.json()["id"])["webhook"]
    assert bound["events"] == ["generation.completed", "generation.failed", "generation.cancelled"]


def test_variant_losing_target_and_empty_binding_are_not_looked_at(
    variant: RunningReference,
) -> None:
    """losing-targets: an invalid callback_url behind a webhook.url is ignored;
    empty-binding: a webhook with neither id nor url is no target (a finished image)."""
    client, key = variant.client(), variant.key("primary")
    body = {"prompt": "p", "webhook": {"url": SILENT_TARGET}, "callback_url": "ftp://x/"}
    assert _submit(client, key, body).status_code == 202
    empty = _submit(client, key, {"prompt": "p", "webhook": {"events": ["generation.completed"]}})
    assert empty.status_code == 200, empty.text


# -- console ----------------------------------------------------------------------------


def test_variant_console_api_keys_lifecycle(variant: RunningReference) -> None:
    """console-api and console-credential: log in, create, list, read and revoke a key with
    the variant's paths and field names, the session in a cookie; id-form: ak_ ids."""
    client = _login(variant)
    created = client.post("/api/api-keys", json={"label": "ci", "permissions": ["images:edit"]})
    assert created.status_code == 200, created.text
    key = created.json()
    assert re.fullmatch(r"ak_[0-9a-f]{32}", key["key_id"]) and key["secret_key"].startswith("gk_")
    assert key["label"] == "ci" and key["permissions"] == ["images:edit"]
    listed = client.get("/api/api-keys")
    assert isinstance(listed.json(), list) and key["key_id"] in [k["key_id"] for k in listed.json()]
    detail = client.get(f"/api/api-keys/{key['key_id']}").json()
    assert detail["webhook_secret"].startswith("whsec_") and "secret_key" not in detail
    revoked = client.post(f"/api/api-keys/{key['key_id']}/revoke")
    assert revoked.status_code == 200 and revoked.json()["revoked"] is True
    assert client.post("/api/session", json={}).status_code == 404  # the reference's path


def test_variant_key_limit_refused_with_403(reference_factory: ReferenceFactory) -> None:
    """console-api: an 11th active key is refused with 403."""
    running = reference_factory(args=["--variant"])
    client = _login(running, "second")
    statuses = [
        client.post(
            "/api/api-keys", json={"label": f"k{n}", "permissions": ["agent:run"]}
        ).status_code
        for n in range(10)
    ]
    assert statuses[-1] == 403 and set(statuses[:-1]) <= {200, 403}


def test_variant_console_refuses_a_bearer_session(variant: RunningReference) -> None:
    """console-credential: the session travels as a cookie; a Bearer JWT does not open /api."""
    token = variant.profile["sessions"]["primary"]["token"]
    client = variant.client()
    assert client.get("/api/webhooks", headers=bearer(token)).status_code == 401
    cookie = {"Cookie": f"{SESSION_COOKIE}={token}"}
    assert client.get("/api/webhooks", headers=cookie).status_code == 200


def test_variant_session_opens_the_key_allowed_endpoints_only(variant: RunningReference) -> None:
    """session-on-key-endpoints: a session lists a generation's deliveries; it does not open
    other /v1 endpoints."""
    primary = variant.client()
    created = _submit(primary, variant.key("primary"), {"prompt": "p", "size": "1K"})
    generation_id = created.json()["generation"]["id"]
    session = _login(variant)
    listed = session.get(f"/v1/generations/{generation_id}/deliveries")
    assert listed.status_code == 200 and listed.json() == {"deliveries": [], "total": 0}
    assert session.get("/v1/account/tier").status_code == 403


def test_variant_console_webhook_payloads(variant: RunningReference) -> None:
    """console-webhook-payloads, id-form and hmac-keying: create from endpoint_url, 200 with
    enabled and a whsec_ base64 signing_secret, list a bare array, delete 200 with a body."""
    client = _login(variant)
    created = client.post("/api/webhooks", json={"endpoint_url": SILENT_TARGET})
    assert created.status_code == 200, created.text
    hook = created.json()
    assert hook["enabled"] is True and "created_at" not in hook
    assert re.fullmatch(r"hook_[0-9a-f]{32}", hook["id"])
    assert re.fullmatch(r"whsec_[A-Za-z0-9+/]{32}", hook["signing_secret"])
    assert hook["endpoint_url"] == SILENT_TARGET and "url" not in hook
    listed = client.get("/api/webhooks").json()
    assert isinstance(listed, list) and hook["id"] in [w["id"] for w in listed]
    deleted = client.delete(f"/api/webhooks/{hook['id']}")
    assert deleted.status_code == 200 and deleted.json() == {"id": hook["id"], "deleted": True}


def test_variant_webhook_delivery_list_limit_and_order(variant: RunningReference) -> None:
    """list-limit: 20 records without a limit, over 100 clamped, 0 taken as absent;
    list-order: oldest first; record-extras: delivery_id, no mode."""
    client = _login(variant)
    hook = client.post("/api/webhooks", json={"endpoint_url": SILENT_TARGET}).json()
    sent = [client.post(f"/api/webhooks/{hook['id']}/test").json() for _ in range(22)]
    assert all(set(answer) == {"delivery_id", "outcome", "status_code"} for answer in sent)
    key = bearer(variant.key("primary"))
    path = f"/v1/webhooks/{hook['id']}/deliveries"
    default = client.get(path, headers=key).json()
    assert default["total"] == 22 and len(default["deliveries"]) == 20
    assert [r["delivery_id"] for r in default["deliveries"]] == [
        a["delivery_id"] for a in sent[:20]
    ]
    assert "mode" not in default["deliveries"][0] and "id" not in default["deliveries"][0]
    assert len(client.get(path, headers=key, params={"limit": "500"}).json()["deliveries"]) == 22
    assert len(client.get(path, headers=key, params={"limit": "0"}).json()["deliveries"]) == 20
