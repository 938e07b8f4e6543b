"""Reference responses validate against the project's JSON Schemas (schemas/)."""

from __future__ import annotations

from typing import Any

import pytest
from running_reference import RunningReference, bearer, wait_for_status

from genapi_spec import validator


def assert_schema(name: str, document: Any) -> None:
    errors = sorted(validator(name).iter_errors(document), key=lambda e: list(e.path))
    assert not errors, f"{name}: " + "; ".join(e.message for e in errors)


def test_submit_and_generation_bodies(reference_server: RunningReference) -> None:
    client = reference_server.client()
    key = reference_server.key("primary")
    # The extensions too: their records report type audio / agent (schemas/generation.json).
    paths = ("/v1/images/generate", "/v1/videos/generate", "/v1/audio/generate", "/v1/agents/run")
    for path in paths:
        accepted = client.post(path, headers=bearer(key), json={"prompt": "schema"})
        assert_schema("generation-accepted", accepted.json())
        done = wait_for_status(client, key, accepted.json()["id"])
        assert_schema("generation", done)


def test_tier_and_usage_bodies(reference_server: RunningReference) -> None:
    client = reference_server.client()
    key = bearer(reference_server.key("primary"))
    assert_schema("tier-record", client.get("/v1/account/tier", headers=key).json())
    assert_schema("usage", client.get("/v1/account/usage", headers=key).json())
    session = bearer(reference_server.session())
    assert_schema("tier-record", client.get("/api/tier", headers=session).json())


def test_console_key_bodies(reference_server: RunningReference) -> None:
    client = reference_server.client()
    entry = reference_server.profile["sessions"]["second"]
    login = client.post(
        "/api/session", json={"email": entry["email"], "password": entry["password"]}
    )
    assert_schema("session-login-response", login.json())
    session = bearer(login.json()["token"])
    created = client.post("/api/keys", headers=session, json={"name": "s", "scopes": ["agent:run"]})
    try:
        assert_schema("api-key-created", created.json())
        assert_schema("api-key-list", client.get("/api/keys", headers=session).json())
        detail = client.get(f"/api/keys/{created.json()['id']}", headers=session)
        assert_schema("api-key-detail", detail.json())
    finally:
        client.delete(f"/api/keys/{created.json()['id']}", headers=session)


@pytest.mark.parametrize(
    ("method", "path", "role"),
    [
        ("GET", "/v1/account/tier", None),
        ("GET", "/v1/generations/gen_nope", "primary"),
        ("POST", "/v1/images/generate", "primary"),
        ("GET", "/nowhere", None),
    ],
)
def test_error_bodies(
    reference_server: RunningReference, method: str, path: str, role: str | None
) -> None:
    headers = bearer(reference_server.key(role)) if role else {}
    response = reference_server.client().request(method, path, headers=headers, json=[])
    assert 400 <= response.status_code < 500
    assert_schema("error", response.json())
    assert isinstance(response.json()["detail"], str)
