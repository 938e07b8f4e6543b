"""The shared assertion helpers: what passes, what fails, and what a failure says."""

from __future__ import annotations

import httpx
import pytest

from conformance.judge.asserts import (
    DeliveryTarget,
    accepted_generation_id,
    answer_or_fail,
    assert_delivered,
    assert_not_refused_for_auth,
    assert_refused,
    assert_status,
    assert_status_in,
    assert_webhook_list,
    credits_used_today,
    describe,
    generation_id_of,
    json_values,
)
from conformance.observe.receiver import DeliveryTimeout
from conformance.observe.timing import delivery_deadline
from conformance.target.adapter_declaration import parse_declaration
from conformance.target.client import ApiClient, Recorder
from conformance.target.profile import CapabilityMissing, parse_profile
from conformance.target.setup import SetupFailed

#: The declaration of a profile without [adapter]: the spec's webhook paths.
UNDECLARED = parse_declaration(None)[0]


def response(
    status: int, body: str = "", method: str = "GET", path: str = "/v1/x"
) -> httpx.Response:
    return httpx.Response(
        status, text=body, request=httpx.Request(method, f"http://127.0.0.1:9{path}")
    )


def test_describe_quotes_status_and_a_short_body() -> None:
    assert describe(response(401, '{"detail":"no"}')) == '401 \'{"detail":"no"}\''
    assert describe(response(204)) == "204"
    long = describe(response(400, "x" * 1000))
    assert long.endswith("...'") and len(long) < 230


def test_assert_status_names_requirement_request_expected_and_seen() -> None:
    assert_status(response(403), 403, "SCOPE-DENY-01")
    with pytest.raises(AssertionError) as caught:
        assert_status(response(202, '{"id":"g"}', "POST", "/v1/images/generate"), 403, "SCOPE-X")
    message = str(caught.value)
    assert "SCOPE-X" in message and "POST /v1/images/generate" in message
    assert "expected 403" in message and "saw 202" in message


def test_assert_status_in_accepts_any_listed_status() -> None:
    assert_status_in(response(401), {401, 403}, "CONSOLE-KEY-06")
    assert_status_in(response(403), {401, 403}, "CONSOLE-KEY-06")
    with pytest.raises(AssertionError, match="expected 401 or 403, saw 404"):
        assert_status_in(response(404), {403, 401}, "CONSOLE-KEY-06")


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422, 429])
def test_assert_refused_accepts_every_4xx(status: int) -> None:
    assert_refused(response(status), "no key", rule="AUTH-KEY-01")


@pytest.mark.parametrize("status", [200, 202, 204, 302, 500, 503])
def test_assert_refused_rejects_success_redirect_and_server_error(status: int) -> None:
    with pytest.raises(AssertionError, match=r"AUTH-KEY-01: GET /v1/x with no key: expected"):
        assert_refused(response(status), "no key", rule="AUTH-KEY-01")


@pytest.mark.parametrize("status", [200, 202, 204, 400, 404, 409, 422])
def test_assert_not_refused_for_auth_accepts_what_is_not_about_credentials(status: int) -> None:
    assert_not_refused_for_auth(response(status), "the primary key", rule="AUTH-BEARER-01")


@pytest.mark.parametrize("status", [401, 403, 500, 502])
def test_assert_not_refused_for_auth_rejects_auth_refusals_and_server_errors(status: int) -> None:
    with pytest.raises(AssertionError, match=f"AUTH-BEARER-01: .* saw {status}"):
        assert_not_refused_for_auth(response(status), "the primary key", rule="AUTH-BEARER-01")


@pytest.mark.parametrize(
    "body",
    [
        '[{"id": "wh_1", "url": "http://h/"}]',
        '{"webhooks": [{"id": "wh_1", "url": "http://h/"}], "total": 1}',
        '{"data": [{"id": "wh_1", "url": "http://h/"}]}',
    ],
    ids=["array", "webhooks-object", "data-object"],
)
def test_assert_webhook_list_accepts_an_array_or_an_object_holding_one(body: str) -> None:
    listing = UNDECLARED.operations["list_webhooks"]
    items = assert_webhook_list(
        response(200, body, path="/api/webhooks"), listing, "CONSOLE-HOOK-02"
    )
    assert [(item.id, item.url) for item in items] == [("wh_1", "http://h/")]


@pytest.mark.parametrize(
    ("status", "body"), [(200, '{"total": 0}'), (200, "not json"), (401, "[]")]
)
def test_assert_webhook_list_rejects_what_is_not_a_list(status: int, body: str) -> None:
    with pytest.raises(AssertionError, match="CONSOLE-HOOK-02"):
        assert_webhook_list(
            response(status, body, path="/api/webhooks"),
            UNDECLARED.operations["list_webhooks"],
            "CONSOLE-HOOK-02",
        )


_USAGE_PROFILE = """
base_url = "http://127.0.0.1:9"
[keys.primary]
key = "gk_ASSERTScanary0primary0key00001"
scopes = ["images:generate"]
[keys.low-limit]
key = "gk_ASSERTScanary0limited0key00002"
account = "low-limit"
scopes = ["images:generate"]
[usage]
path = "/v1/account/usage"
field = "credits_used_today"
"""


def _usage_client(status: int, body: str, *, usage: bool = True) -> tuple[ApiClient, list[str]]:
    """A client whose every request is answered *status* *body*; the paths it was sent to."""
    text = _USAGE_PROFILE if usage else _USAGE_PROFILE.split("[usage]")[0]
    profile = parse_profile(text, env={})
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.url.path} {request.headers['authorization'][-5:]}")
        return httpx.Response(status, text=body, headers={"content-type": "application/json"})

    transport = httpx.MockTransport(handler)
    client = ApiClient(profile, Recorder(profile.redactor()), transport=transport)
    return client, seen


def test_credits_used_today_reads_the_usage_field_with_the_roles_key() -> None:
    client, seen = _usage_client(200, '{"credits_used_today": 7, "requests_today": 3}')
    assert credits_used_today(client, "low-limit") == 7
    assert seen == ["/v1/account/usage 00002"]


def test_credits_used_today_without_usage_table_is_a_missing_capability() -> None:
    client, seen = _usage_client(200, "{}", usage=False)
    with pytest.raises(CapabilityMissing, match="usage"):
        credits_used_today(client)
    assert seen == []


@pytest.mark.parametrize(
    ("status", "body"),
    [
        pytest.param(500, '{"detail": "down"}', id="not-200"),
        pytest.param(200, '{"credits_used_today": "7"}', id="string"),
        pytest.param(200, '{"credits_used_today": true}', id="boolean"),
        pytest.param(200, "[7]", id="not-an-object"),
        pytest.param(200, "not json", id="not-json"),
    ],
)
def test_credits_used_today_unusable_answer_is_a_setup_error(status: int, body: str) -> None:
    client, _ = _usage_client(status, body)
    with pytest.raises(SetupFailed, match="setup: "):
        credits_used_today(client)


def test_answer_or_fail_returns_the_answer_whatever_its_status() -> None:
    client, seen = _usage_client(500, '{"detail": "down"}')
    response = answer_or_fail(client, "GET /v1/x: expected 400", "GET", "/v1/x")
    assert (response.status_code, seen) == (500, ["/v1/x 00001"])


@pytest.mark.parametrize(
    "error",
    [httpx.ReadTimeout("timed out"), httpx.RemoteProtocolError("peer closed the connection")],
)
def test_answer_or_fail_fails_the_check_when_no_answer_comes(error: httpx.HTTPError) -> None:
    profile = parse_profile(_USAGE_PROFILE, env={})

    def handler(request: httpx.Request) -> httpx.Response:
        raise error

    client = ApiClient(
        profile, Recorder(profile.redactor()), transport=httpx.MockTransport(handler)
    )
    with pytest.raises(AssertionError, match=r"GET /v1/x: expected 400: no answer came \("):
        answer_or_fail(client, "GET /v1/x: expected 400", "GET", "/v1/x")


def test_json_values_finds_values_wherever_they_sit() -> None:
    body = '{"webhooks": [{"id": "wh_1", "url": "http://x/"}], "meta": {"n": 1}}'
    found = json_values(response(200, body))
    assert found[0] == {"webhooks": [{"id": "wh_1", "url": "http://x/"}], "meta": {"n": 1}}
    assert "wh_1" in found and "http://x/" in found and 1 in found
    # Keys are not values: a field name never counts as a listed id.
    assert "webhooks" not in found and "id" not in found


def test_json_values_of_a_body_that_is_not_json_is_empty() -> None:
    assert json_values(response(200, "<html>wh_1</html>")) == []
    assert json_values(response(204)) == []


def test_accepted_generation_id_reads_the_string_id_of_the_answer() -> None:
    accepted = response(202, '{"id": "gen_1", "status": "queued"}', "POST", "/v1/images/generate")
    assert accepted_generation_id(accepted, "GEN-IMAGE-08") == "gen_1"
    assert generation_id_of(response(202, '["gen_1"]')) is None


@pytest.mark.parametrize("body", ['{"id": 7}', '{"status": "queued"}', "[]", "not json", ""])
def test_accepted_generation_id_without_a_string_id_fails_naming_the_request(body: str) -> None:
    with pytest.raises(AssertionError) as caught:
        accepted_generation_id(response(202, body, "POST", "/v1/videos/generate"), "GEN-VIDEO-07")
    message = str(caught.value)
    assert message.startswith("GEN-VIDEO-07") and "POST /v1/videos/generate" in message
    assert "expected the accepted submit to carry the generation id" in message


class _Endpoint:
    """Stands in for a receiver endpoint: what it was asked to wait for, and its answer."""

    name = "x"

    def __init__(self, arrived: list[str] | None) -> None:
        self.arrived = arrived
        self.waits: list[tuple[int, float]] = []

    def wait_for(self, count: int, timeout: float) -> list[str]:
        self.waits.append((count, timeout))
        if self.arrived is None:
            raise DeliveryTimeout("endpoint 'x': expected 1 deliveries within 1 s, got 0: []")
        return self.arrived


def test_assert_delivered_waits_for_one_event_within_the_delivery_deadline() -> None:
    profile = parse_profile(_USAGE_PROFILE, env={})
    endpoint = _Endpoint(["a delivery"])
    assert assert_delivered(DeliveryTarget(endpoint, profile), "the result of gen_1") == [
        "a delivery"
    ]
    assert endpoint.waits == [(1, delivery_deadline(profile))]


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (None, "expected an event"),
        ("generation.failed", "expected generation.failed"),
    ],
)
def test_assert_delivered_fails_naming_what_was_submitted_and_the_event(
    event: str | None, expected: str
) -> None:
    profile = parse_profile(_USAGE_PROFILE, env={})
    target = DeliveryTarget(_Endpoint(None), profile)
    with pytest.raises(AssertionError) as caught:
        assert_delivered(target, "POST /v1/images/generate", event=event, rule="GEN-IMAGE-05")
    message = str(caught.value)
    assert message.startswith(f"GEN-IMAGE-05: POST /v1/images/generate: {expected} at the target")
    assert "expected" in message.split("at the target: ", 1)[1]  # what the wait saw
