"""API keys on /v1: 401 for missing, malformed, unknown and revoked keys; 403 outside scope."""

from __future__ import annotations

import pytest
from running_reference import RunningReference, bearer

from reference.auth import SCOPES

# Each scope and an endpoint that needs it, with a valid body (spec §4).
SCOPED = {
    "images:generate": "/v1/images/generate",
    "images:edit": "/v1/images/edit",
    "videos:generate": "/v1/videos/generate",
    "audio:generate": "/v1/audio/generate",
    "agent:run": "/v1/agents/run",
}


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="missing"),
        pytest.param({"Authorization": "gk_abc"}, id="no-bearer-scheme"),
        pytest.param({"Authorization": "Bearer"}, id="empty-bearer"),
        pytest.param({"Authorization": "Basic dXNlcjpwYXNz"}, id="basic-scheme"),
        pytest.param({"Authorization": "Bearer not-a-key"}, id="malformed"),
        pytest.param({"Authorization": "Bearer gk_" + "A" * 43}, id="unknown"),
    ],
)
def test_v1_without_a_valid_key_is_401_with_detail(
    reference_server: RunningReference, headers: dict[str, str]
) -> None:
    client = reference_server.client()
    response = client.get("/v1/account/tier", headers=headers)
    assert response.status_code == 401
    assert isinstance(response.json()["detail"], str) and response.json()["detail"]


def test_revoked_key_is_401(reference_server: RunningReference) -> None:
    client = reference_server.client()
    response = client.get("/v1/account/tier", headers=bearer(reference_server.key("revoked")))
    assert response.status_code == 401
    assert "revoked" in response.json()["detail"]


def test_console_token_does_not_open_v1(reference_server: RunningReference) -> None:
    client = reference_server.client()
    response = client.get("/v1/account/tier", headers=bearer(reference_server.session()))
    assert response.status_code == 401


@pytest.mark.parametrize("scope", SCOPES)
def test_key_without_scope_gets_403(reference_server: RunningReference, scope: str) -> None:
    role = "without-" + scope.replace(":", "-")
    client = reference_server.client()
    response = client.post(
        SCOPED[scope], headers=bearer(reference_server.key(role)), json={"prompt": "a lighthouse"}
    )
    assert response.status_code == 403
    assert scope in response.json()["detail"]


@pytest.mark.parametrize("scope", SCOPES)
def test_key_with_scope_gets_202(reference_server: RunningReference, scope: str) -> None:
    # Every without-* key still holds the other scopes: the matrix's positive half.
    other = next(s for s in SCOPES if s != scope)
    role = "without-" + other.replace(":", "-")
    client = reference_server.client()
    response = client.post(
        SCOPED[scope], headers=bearer(reference_server.key(role)), json={"prompt": "a lighthouse"}
    )
    assert response.status_code == 202, response.text


def test_key_values_have_the_prefix(reference_server: RunningReference) -> None:
    for role, entry in reference_server.profile["keys"].items():
        assert entry["key"].startswith("gk_"), role


def test_signing_secrets_are_distinct_per_key(reference_server: RunningReference) -> None:
    secrets = [entry["signing_secret"] for entry in reference_server.profile["keys"].values()]
    assert len(set(secrets)) == len(secrets)


def test_no_v1_answer_contains_the_signing_secret(reference_server: RunningReference) -> None:
    client = reference_server.client()
    key = reference_server.key("primary")
    secret = reference_server.profile["keys"]["primary"]["signing_secret"]
    submitted = client.post("/v1/images/generate", headers=bearer(key), json={"prompt": "x"})
    read = client.get(f"/v1/generations/{submitted.json()['id']}", headers=bearer(key))
    tier = client.get("/v1/account/tier", headers=bearer(key))
    usage = client.get("/v1/account/usage", headers=bearer(key))
    for response in (submitted, read, tier, usage):
        assert secret not in response.text
