"""The shared assertion helpers: what passes, what fails, and what a failure says."""

from __future__ import annotations

import httpx
import pytest

from conformance.asserts import (
    assert_not_refused_for_auth,
    assert_refused,
    assert_status,
    assert_status_in,
    assert_webhook_list,
    describe,
)


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
    assert_refused(response(status), "AUTH-KEY-01", "no key")


@pytest.mark.parametrize("status", [200, 202, 204, 302, 500, 503])
def test_assert_refused_rejects_success_redirect_and_server_error(status: int) -> None:
    with pytest.raises(AssertionError, match=r"AUTH-KEY-01: GET /v1/x with no key: expected"):
        assert_refused(response(status), "AUTH-KEY-01", "no key")


@pytest.mark.parametrize("status", [200, 202, 204, 400, 404, 409, 422])
def test_assert_not_refused_for_auth_accepts_what_is_not_about_credentials(status: int) -> None:
    assert_not_refused_for_auth(response(status), "AUTH-BEARER-01", "the primary key")


@pytest.mark.parametrize("status", [401, 403, 500, 502])
def test_assert_not_refused_for_auth_rejects_auth_refusals_and_server_errors(status: int) -> None:
    with pytest.raises(AssertionError, match=f"AUTH-BEARER-01: .* saw {status}"):
        assert_not_refused_for_auth(response(status), "AUTH-BEARER-01", "the primary key")


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
    items = assert_webhook_list(response(200, body, path="/api/webhooks"), "CONSOLE-HOOK-02")
    assert items == [{"id": "wh_1", "url": "http://h/"}]


@pytest.mark.parametrize(
    ("status", "body"), [(200, '{"total": 0}'), (200, "not json"), (401, "[]")]
)
def test_assert_webhook_list_rejects_what_is_not_a_list(status: int, body: str) -> None:
    with pytest.raises(AssertionError, match="CONSOLE-HOOK-02"):
        assert_webhook_list(response(status, body, path="/api/webhooks"), "CONSOLE-HOOK-02")
