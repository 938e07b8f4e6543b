"""conformance.judge.fuzzing: the bundled document, drawn cases, and the URL-safety override.

The safety property is the point (the suite makes nothing dial off-machine): whatever
Schemathesis draws, a body sent by the fuzz checks holds no delivery target other than the
given safe URLs and the reject vectors. These tests draw many bodies of every operation
that takes one, in both modes, and look at every string in them.
No network: cases are drawn, not sent.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.judge import fuzzing
from conformance.judge.fuzzing import MODES, REJECT_URLS, Mode, make_safe, unsafe_strings
from conformance.judge.operations import operations

SAFE = ("http://127.0.0.1:5555/hooks/fuzz-0123",)
BODY_OPERATIONS = [op for op in operations(extensions=True) if op.has_body]


@pytest.fixture(scope="module")
def schema() -> Any:
    return fuzzing.load_schema("http://127.0.0.1:9")


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == "$ref"] + [
            r for v in node.values() for r in _refs(v)
        ]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def test_bundled_document_refers_only_inside_itself() -> None:
    document = fuzzing.bundled_document()
    refs = _refs(document)
    assert refs and all(ref.startswith("#/components/") for ref in refs), sorted(set(refs))[:5]
    assert "$id" not in json.dumps(document), "a $id would make a resolver fetch its host"
    assert "webhooks" not in document


def test_bundled_document_refs_all_resolve() -> None:
    document = fuzzing.bundled_document()
    for ref in set(_refs(document)):
        node: Any = document
        for part in ref.removeprefix("#/").split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        assert isinstance(node, dict), ref


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize(
    "operation", BODY_OPERATIONS, ids=[op.operation_id for op in BODY_OPERATIONS]
)
def test_drawn_bodies_hold_only_safe_delivery_targets(
    schema: Any, operation: Any, mode: Mode
) -> None:
    cases = fuzzing.draw_cases(
        schema, operation.method, operation.path, mode=mode, max_examples=30, safe_urls=SAFE
    )
    assert len(cases) >= 8, f"expected many distinct drawn cases, got {len(cases)}"
    # The coverage phase's systematic cases too (valid ones are its first).
    cases += fuzzing.coverage_cases(
        schema, operation.method, operation.path, mode=mode, safe_urls=SAFE, limit=100
    )
    for case in cases:
        assert unsafe_strings(case.body, SAFE) == [], case.body
        if case.has_body and isinstance(case.body, dict):
            for field in ("callback_url", "url"):
                value = case.body.get(field)
                assert not isinstance(value, str) or value in SAFE + REJECT_URLS, value


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("positive", set(SAFE)),
        ("negative", set(SAFE) | set(REJECT_URLS)),
    ],
    ids=["positive-safe-only", "negative-safe-and-reject"],
)
def test_drawn_submits_do_reach_the_url_fields(schema: Any, mode: Mode, expected: set[str]) -> None:
    """The override is exercised: valid bodies target only the safe URLs (so they stay
    valid); invalid ones target safe and reject URLs."""
    cases = fuzzing.draw_cases(
        schema,
        "POST",
        "/v1/images/generate",
        mode=mode,
        max_examples=60,
        safe_urls=SAFE,
    )
    targets = {
        value
        for case in cases
        if isinstance(case.body, dict)
        for value in (
            case.body.get("callback_url"),
            (case.body.get("webhook") or {}).get("url")
            if isinstance(case.body.get("webhook"), dict)
            else None,
        )
        if isinstance(value, str)
    }
    assert targets <= expected and targets & set(SAFE), targets
    if mode == "negative":
        assert targets & set(REJECT_URLS), targets


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text() | st.binary(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["callback_url", "url", "webhook", "events", "id", "prompt"])
            | st.text(max_size=5),
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)
URLISH = st.sampled_from(
    ["https://example.com/x", "http://8.8.8.8/", "//evil.test/", "evil.test", "ftp://x/"]
)


@settings(max_examples=300, derandomize=True, database=None)
@given(
    body=st.dictionaries(
        st.sampled_from(["callback_url", "webhook", "url", "prompt", "x"]),
        JSON | URLISH | st.fixed_dictionaries({"url": URLISH, "events": st.just([])}),
    ),
    seed=st.integers(0, 2**32),
)
def test_make_safe_leaves_no_unsafe_string(body: dict[str, Any], seed: int) -> None:
    safe = make_safe(body, SAFE, random.Random(seed))
    assert unsafe_strings(safe, SAFE) == []


def test_make_safe_without_reject_uses_only_safe_urls() -> None:
    body = {"callback_url": "https://example.com", "webhook": {"url": "x"}, "n": "ftp://x"}
    for seed in range(20):
        safe = make_safe(body, SAFE, random.Random(seed), reject=False)
        assert safe["callback_url"] in SAFE and safe["webhook"]["url"] in SAFE
        assert safe["n"] in REJECT_URLS  # not a target field: never the receiver


def test_coverage_cases_are_safe_and_systematic(schema: Any) -> None:
    cases = fuzzing.coverage_cases(
        schema, "POST", "/v1/videos/generate", mode="negative", safe_urls=SAFE
    )
    bodies = [case.body for case in cases if isinstance(case.body, dict)]
    assert any("prompt" not in body for body in bodies)
    assert any(not isinstance(body.get("duration", 0), int | float) for body in bodies)
    for case in cases:
        assert case.method == "POST"
        assert unsafe_strings(case.body, SAFE) == []


def test_make_safe_keeps_binding_id_and_events() -> None:
    body = {"prompt": "p", "webhook": {"id": "wh_1", "events": ["generation.failed"]}}
    assert make_safe(body, SAFE, random.Random(0)) == body


def test_make_safe_replaces_a_public_target_everywhere() -> None:
    body = {
        "callback_url": "https://hooks.example.com/x",
        "webhook": "https://hooks.example.com/y",
        "other": ["see https://example.com"],
        "raw": b"http://example.com",
    }
    safe = make_safe(body, SAFE, random.Random(1))
    assert "example.com" not in repr(safe)
    assert safe["callback_url"] in SAFE + REJECT_URLS
    assert safe["other"][0] in REJECT_URLS


def test_unsafe_strings_sees_a_public_target() -> None:
    assert unsafe_strings({"webhook": {"url": "https://example.com"}}, SAFE) == [
        "https://example.com"
    ]
    assert unsafe_strings({"note": "http://example.com"}, SAFE) == ["http://example.com"]


def test_reject_urls_aim_at_the_discard_port_or_cannot_connect() -> None:
    for url in REJECT_URLS:
        assert ":9/" in url or url.startswith("file:"), url


@pytest.mark.parametrize(
    ("operation_id", "status", "expected"),
    [
        ("generateImage", 202, "generation-accepted"),
        ("getAccountTier", 200, "tier-record"),
        ("createWebhook", 201, "registered-webhook-created"),
        ("listWebhookDeliveries", 400, "error"),
        ("getHealth", 200, None),
        ("generateImage", 500, None),
    ],
)
def test_documented_schema(operation_id: str, status: int, expected: str | None) -> None:
    assert fuzzing.documented_schema(operation_id, status) == expected


def test_send_kwargs_sends_json_or_raw_content(schema: Any) -> None:
    cases = fuzzing.draw_cases(
        schema,
        "POST",
        "/v1/videos/generate",
        mode="negative",
        max_examples=40,
        safe_urls=SAFE,
    )
    for case in cases:
        kwargs = fuzzing.send_kwargs(case)
        assert "authorization" not in {k.lower() for k in kwargs["headers"]}
        assert ("content" in kwargs) == case.has_body
        if case.has_body:
            assert kwargs["headers"]["Content-Type"] == (case.media_type or "application/json")
        for value in kwargs.get("params", {}).values():
            assert isinstance(value, str | list)


def test_send_kwargs_sends_a_json_null_body() -> None:
    fuzz = fuzzing.FuzzCase(
        label="POST /x",
        mode="negative",
        method="POST",
        path="/x",
        params={"limit": [1, 2], "outcome": None, "deep": {"a": 1}},
        headers={},
        body=None,
        has_body=True,
        media_type="application/json",
        case=None,
    )
    kwargs = fuzzing.send_kwargs(fuzz)
    assert kwargs["content"] == b"null"
    assert kwargs["headers"] == {"Content-Type": "application/json"}
    assert kwargs["params"] == {"limit": ["1", "2"], "outcome": "", "deep": '{"a": 1}'}


def test_draw_cases_without_negative_data_is_empty(schema: Any) -> None:
    cases = fuzzing.draw_cases(
        schema, "GET", "/healthz", mode="negative", max_examples=5, safe_urls=SAFE
    )
    assert cases == []
