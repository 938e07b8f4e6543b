"""The OpenAPI document against the spec: every operation of spec §4 with its scope and
stated answers, the 429 contract of §7, the delivery list parameters, the deliveries of
§6, and extensions marked as such."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import pytest
from spec_artifacts import deref

import genapi_spec

DOCUMENT = genapi_spec.openapi_document()
METHODS = {"get", "post", "put", "patch", "delete"}


class Operation(NamedTuple):
    method: str
    path: str
    operation_id: str
    scope: str | None  # x-required-scope; None: any key (or a console session)
    statuses: frozenset[str]  # answers the spec states (401 is an interpretation, added)


def op(method: str, path: str, operation_id: str, scope: str | None, *statuses: str) -> Any:
    return pytest.param(
        Operation(method, path, operation_id, scope, frozenset(statuses)),
        id=f"{method}-{path}",
    )


SUBMIT = ("202", "400", "401", "403", "404", "429")
#: Spec §4: the eight /v1 operations (the brief said "nine"; the spec lists eight).
V1 = [
    op("post", "/v1/images/generate", "generateImage", "images:generate", *SUBMIT),
    op("post", "/v1/images/edit", "editImage", "images:edit", *SUBMIT),
    op("post", "/v1/videos/generate", "generateVideo", "videos:generate", *SUBMIT),
    op("get", "/v1/generations/{id}", "getGeneration", None, "200", "401", "429"),
    op("get", "/v1/generations/{id}/deliveries", "listGenerationDeliveries", None, "200", "429"),
    op("get", "/v1/webhooks/{id}/deliveries", "listWebhookDeliveries", None, "200", "400", "429"),
    op(
        "post",
        "/v1/webhooks/deliveries/{id}/redeliver",
        "redeliverDelivery",
        None,
        *("200", "400", "429"),
    ),
    op("get", "/v1/account/tier", "getAccountTier", None, "200", "401", "429"),
]
#: Spec §4, console endpoints: the five /api operations (statuses not shown; 401 assumed).
CONSOLE = [
    op("post", "/api/webhooks", "createWebhook", None, "2XX", "401"),
    op("get", "/api/webhooks", "listWebhooks", None, "200", "401"),
    op("post", "/api/webhooks/{id}/test", "testWebhook", None, "2XX", "401"),
    op("delete", "/api/webhooks/{id}", "deleteWebhook", None, "2XX", "401"),
    op("get", "/api/tier", "getConsoleTier", None, "200", "401"),
]
#: ARCHITECTURE.md, paths beyond the spec: the reference's extensions.
EXTENSIONS = {
    ("post", "/api/session"),
    ("post", "/api/keys"),
    ("get", "/api/keys"),
    ("get", "/api/keys/{id}"),
    ("delete", "/api/keys/{id}"),
    ("post", "/v1/audio/generate"),
    ("post", "/v1/agents/run"),
    ("get", "/v1/account/usage"),
    ("get", "/outputs/{name}"),
    ("get", "/healthz"),
}


def operations() -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method, path): operation
        for path, item in DOCUMENT["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    }


def spec_operations() -> set[tuple[str, str]]:
    """The operations spec §4 lists, read from the spec text itself: the ``### METHOD
    /path`` headings and the rows of the console table."""
    text = genapi_spec.spec_text()
    section = text[text.index("## 4. Endpoints") : text.index("## 5. Authentication")]
    headings = re.findall(r"^### (GET|POST|DELETE|PUT|PATCH) (/\S+)$", section, re.M)
    rows = re.findall(r"^\| (GET|POST|DELETE|PUT|PATCH) \| (/api/\S+) \|", section, re.M)
    return {(method.lower(), path) for method, path in headings + rows}


def test_table_matches_the_spec_text() -> None:
    """The tables here are the spec's list: 8 /v1 operations and 5 console operations."""
    table = {(p.values[0].method, p.values[0].path) for p in V1 + CONSOLE}
    assert spec_operations() == table
    assert (len(V1), len(CONSOLE)) == (8, 5)


def test_document_has_nothing_beyond_spec_and_extensions() -> None:
    """Every operation is either in spec §4 or a declared extension."""
    assert set(operations()) == spec_operations() | EXTENSIONS


def _effective_security(operation: dict[str, Any]) -> list[dict[str, list[str]]]:
    security: list[dict[str, list[str]]] = operation.get("security", DOCUMENT["security"])
    return security


@pytest.mark.parametrize("expected", V1)
def test_v1_operation_present_with_scope_and_answers(expected: Operation) -> None:
    """Spec §4 and §5: the operation, its scope, API-key auth, the answers stated."""
    operation = operations()[(expected.method, expected.path)]
    assert operation["operationId"] == expected.operation_id
    assert operation["x-required-scope"] == expected.scope
    assert _effective_security(operation) == [{"apiKey": []}]
    assert expected.statuses <= set(operation["responses"])
    assert "x-extension" not in operation
    assert operation["summary"] and operation["tags"]


@pytest.mark.parametrize("expected", CONSOLE)
def test_console_operation_needs_a_session(expected: Operation) -> None:
    """Spec §4: console operations take a signed-in session, never an API key."""
    operation = operations()[(expected.method, expected.path)]
    assert operation["operationId"] == expected.operation_id
    assert _effective_security(operation) == [{"consoleSession": []}]
    assert "x-required-scope" not in operation
    assert expected.statuses <= set(operation["responses"])
    assert "x-extension" not in operation


@pytest.mark.parametrize("key", sorted(EXTENSIONS), ids=lambda k: f"{k[0]}-{k[1]}")
def test_extension_marked_and_disclaimed(key: tuple[str, str]) -> None:
    """Reference-only operations carry ``x-extension: true`` and say they are not
    requirements of the spec."""
    operation = operations()[key]
    assert operation["x-extension"] is True
    assert "not a requirement of the spec" in operation["description"].lower()
    assert operation["tags"] == ["extensions"]


@pytest.mark.parametrize(
    ("key", "scope"),
    [(("post", "/v1/audio/generate"), "audio:generate"), (("post", "/v1/agents/run"), "agent:run")],
    ids=["audio", "agents"],
)
def test_extension_generation_scopes(key: tuple[str, str], scope: str) -> None:
    """Spec §5.2 scopes audio:generate and agent:run guard the reference's extensions."""
    assert operations()[key]["x-required-scope"] == scope


def test_every_v1_operation_may_answer_429() -> None:
    """Spec §7, §8: rate limits are per key on every /v1 request."""
    for (_, path), operation in operations().items():
        if path.startswith("/v1/"):
            assert "429" in operation["responses"], path


def _response(operation: dict[str, Any], status: str) -> dict[str, Any]:
    resolved: dict[str, Any] = deref(DOCUMENT, operation["responses"][status])
    return resolved


def _body_ref(response: dict[str, Any]) -> str:
    ref: str = response["content"]["application/json"]["schema"]["$ref"]
    return ref


@pytest.mark.parametrize("expected", V1[:3])
def test_submit_answers_202_with_generation_accepted(expected: Operation) -> None:
    """Spec §4: a submit call answers 202 with the generation's id."""
    operation = operations()[(expected.method, expected.path)]
    assert _body_ref(_response(operation, "202")) == "../schemas/generation-accepted.json"


def test_429_answer_has_the_four_headers_and_a_detail_body() -> None:
    """Spec §7: Retry-After, X-RateLimit-Limit/-Remaining/-Reset and a `detail` body."""
    for (_, path), operation in operations().items():
        if "429" not in operation["responses"]:
            continue
        response = _response(operation, "429")
        headers = {name: deref(DOCUMENT, header) for name, header in response["headers"].items()}
        assert set(headers) == {
            "Retry-After",
            "X-RateLimit-Limit",
            "X-RateLimit-Remaining",
            "X-RateLimit-Reset",
        }, path
        for name, header in headers.items():
            assert header["required"] is True, name
            assert header["schema"]["type"] == "integer", name
        assert _body_ref(response) == "../schemas/rate-limit-error.json", path


def test_delivery_list_filters() -> None:
    """Spec §4: outcome is one of four values (400 otherwise); limit is at most 100."""
    operation = operations()[("get", "/v1/webhooks/{id}/deliveries")]
    parameters = {p["name"]: p for p in (deref(DOCUMENT, p) for p in operation["parameters"])}
    assert parameters["outcome"]["in"] == "query"
    assert parameters["outcome"]["schema"] == {"$ref": "../schemas/delivery-outcome.json"}
    assert genapi_spec.schema("delivery-outcome")["enum"] == [
        "delivered",
        "failed",
        "pending_retry",
        "exhausted",
    ]
    assert parameters["limit"]["in"] == "query"
    assert parameters["limit"]["schema"]["type"] == "integer"
    assert parameters["limit"]["schema"]["maximum"] == 100
    assert _body_ref(_response(operation, "200")) == "../schemas/delivery-list.json"


def test_callback_url_limit_reaches_every_submit_body() -> None:
    """Spec §4, §8: callback_url (and webhook.url) at most 2048 characters, http(s)."""
    assert genapi_spec.schema("callback-url")["maxLength"] == 2048
    for name in ("image-generate-request", "image-edit-request", "video-generate-request"):
        properties = genapi_spec.schema(name)["properties"]
        assert properties["callback_url"]["$ref"] == "callback-url.json", name
        assert properties["webhook"]["$ref"] == "webhook-binding.json", name
    assert genapi_spec.schema("webhook-binding")["properties"]["url"] == {
        "$ref": "callback-url.json"
    }


DELIVERY_HEADERS = {
    "X-Service-Event",
    "X-Service-Delivery",
    "X-Service-Attempt",
    "X-Service-Generation",
    "X-Service-Signature",
}
WEBHOOKS = {
    "generation.completed": "strict-event-envelope",
    "generation.failed": "strict-event-envelope",
    "generation.cancelled": "strict-event-envelope",
    "generation.completed (callback_url)": "callback-body",
    "generation.failed (callback_url)": "callback-body",
    "generation.cancelled (callback_url)": "callback-body",
}


def test_deliveries_listed_under_webhooks() -> None:
    """Spec §6: three events, each as the strict envelope and as the callback body."""
    assert set(DOCUMENT["webhooks"]) == set(WEBHOOKS)


@pytest.mark.parametrize(("name", "body"), sorted(WEBHOOKS.items()))
def test_delivery_request_headers_and_body(name: str, body: str) -> None:
    """Spec §6: a POST with the five X-Service headers and the envelope as JSON body;
    success is any 2xx; deliveries are authenticated by signature, not a bearer token."""
    operation = DOCUMENT["webhooks"][name]["post"]
    parameters = [deref(DOCUMENT, p) for p in operation["parameters"]]
    assert {p["name"] for p in parameters} == DELIVERY_HEADERS
    assert all(p["in"] == "header" and p["required"] for p in parameters)
    content = operation["requestBody"]["content"]
    assert content["application/json"]["schema"] == {"$ref": f"../schemas/{body}.json"}
    assert set(operation["responses"]) == {"2XX"}
    assert operation["security"] == []


def test_signature_header_pattern() -> None:
    """Spec §6: ``t=<unix_timestamp>,v1=<hex_digest>``, an HMAC-SHA256 hex digest."""
    parameter = deref(DOCUMENT, {"$ref": "#/components/parameters/SignatureHeader"})
    assert parameter["schema"] == {"$ref": "../schemas/signature-header.json"}
    assert genapi_spec.schema("signature-header")["pattern"] == r"^t=\d+,v1=[0-9a-f]{64}$"
