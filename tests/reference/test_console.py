"""Console paths: sessions, key creation/listing/detail/revocation, the 10-key limit."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest
from running_reference import RunningReference, bearer

from reference.auth import SCOPES


def test_login_gives_a_working_session(reference_server: RunningReference) -> None:
    client = reference_server.client()
    entry = reference_server.profile["sessions"]["primary"]
    response = client.post(
        "/api/session", json={"email": entry["email"], "password": entry["password"]}
    )
    assert response.status_code == 200
    token = response.json()["token"]
    assert response.json()["expires_at"]
    assert client.get("/api/keys", headers=bearer(token)).status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"email": "primary@reference.invalid", "password": "wrong"}, id="wrong-pw"),
        pytest.param({"email": "nobody@reference.invalid", "password": "x"}, id="no-account"),
        # Accounts the profile does not sign in to have no password: none opens them.
        pytest.param({"email": "low-limit@reference.invalid", "password": "!"}, id="no-pw-mark"),
        pytest.param({"email": "low-limit@reference.invalid", "password": ""}, id="no-pw-empty"),
    ],
)
def test_login_with_bad_credentials_is_401(
    reference_server: RunningReference, body: dict[str, str]
) -> None:
    response = reference_server.client().post("/api/session", json=body)
    assert response.status_code == 401


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/api/keys"), ("POST", "/api/keys"), ("GET", "/api/tier"), ("GET", "/api/webhooks")],
)
def test_api_key_never_opens_a_console_path(
    reference_server: RunningReference, method: str, path: str
) -> None:
    client = reference_server.client()
    response = client.request(
        method, path, headers=bearer(reference_server.key("primary")), json={"name": "x"}
    )
    assert response.status_code == 401


@pytest.mark.parametrize(
    "token", [pytest.param("", id="missing"), pytest.param("eyJhbGciOi.x.y", id="forged")]
)
def test_console_without_a_session_is_401(reference_server: RunningReference, token: str) -> None:
    headers = bearer(token) if token else {}
    response = reference_server.client().get("/api/keys", headers=headers)
    assert response.status_code == 401


def test_created_key_is_shown_once_and_stored_hashed(reference_server: RunningReference) -> None:
    client = reference_server.client()
    session = bearer(reference_server.session("second"))
    created = client.post(
        "/api/keys", headers=session, json={"name": "shown once", "scopes": ["images:generate"]}
    )
    assert created.status_code == 201
    value, key_id = created.json()["key"], created.json()["id"]
    try:
        assert value.startswith("gk_")
        detail = client.get(f"/api/keys/{key_id}", headers=session)
        listing = client.get("/api/keys", headers=session)
        assert value not in detail.text and value not in listing.text
        assert detail.json()["signing_secret"]
        assert detail.json()["scopes"] == ["images:generate"]
        # The store holds the sha256 of the key, never the key.
        with sqlite3.connect(reference_server.db_path) as db:
            stored = db.execute("SELECT key_hash FROM api_keys WHERE id = ?", (key_id,)).fetchone()
        assert stored[0] == hashlib.sha256(value.encode()).hexdigest()
        dump = reference_server.db_path.read_bytes()
        assert value.encode() not in dump
        # The new key works at once.
        assert client.get("/v1/account/tier", headers=bearer(value)).status_code == 200
    finally:
        client.delete(f"/api/keys/{key_id}", headers=session)


def test_revocation_takes_effect_on_the_next_request(reference_server: RunningReference) -> None:
    client = reference_server.client()
    session = bearer(reference_server.session("second"))
    created = client.post("/api/keys", headers=session, json={"name": "r", "scopes": list(SCOPES)})
    value, key_id = created.json()["key"], created.json()["id"]
    assert client.get("/v1/account/tier", headers=bearer(value)).status_code == 200
    revoked = client.delete(f"/api/keys/{key_id}", headers=session)
    assert revoked.status_code == 204
    detail = client.get(f"/api/keys/{key_id}", headers=session)
    assert detail.json()["revoked"] is True and detail.json()["revoked_at"]
    assert client.get("/v1/account/tier", headers=bearer(value)).status_code == 401


def test_eleventh_active_key_is_refused(reference_server: RunningReference) -> None:
    client = reference_server.client()
    session = bearer(reference_server.session("second"))
    active = [
        k for k in client.get("/api/keys", headers=session).json()["keys"] if not k["revoked"]
    ]
    made: list[str] = []
    try:
        for n in range(10 - len(active)):
            response = client.post(
                "/api/keys", headers=session, json={"name": f"fill {n}", "scopes": list(SCOPES)}
            )
            assert response.status_code == 201, response.text
            made.append(response.json()["id"])
        refused = client.post(
            "/api/keys", headers=session, json={"name": "eleventh", "scopes": list(SCOPES)}
        )
        assert refused.status_code == 409
        assert "10" in refused.json()["detail"]
        # Revoking one frees a slot.
        client.delete(f"/api/keys/{made.pop()}", headers=session)
        again = client.post(
            "/api/keys", headers=session, json={"name": "x", "scopes": ["agent:run"]}
        )
        assert again.status_code == 201
        made.append(again.json()["id"])
    finally:
        for key_id in made:
            client.delete(f"/api/keys/{key_id}", headers=session)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"name": "x"}, id="no-scopes"),
        pytest.param({"name": "x", "scopes": []}, id="empty-scopes"),
        pytest.param({"name": "x", "scopes": ["images:fly"]}, id="unknown-scope"),
        pytest.param({"name": 5, "scopes": ["agent:run"]}, id="name-not-string"),
    ],
)
def test_key_creation_with_a_bad_body_is_400(
    reference_server: RunningReference, body: dict[str, object]
) -> None:
    client = reference_server.client()
    response = client.post("/api/keys", headers=bearer(reference_server.session()), json=body)
    assert response.status_code == 400
    assert response.json()["detail"]


def test_foreign_key_detail_is_404(reference_server: RunningReference) -> None:
    client = reference_server.client()
    foreign_id = reference_server.key_id("foreign")
    response = client.get(f"/api/keys/{foreign_id}", headers=bearer(reference_server.session()))
    assert response.status_code == 404
    response = client.delete(f"/api/keys/{foreign_id}", headers=bearer(reference_server.session()))
    assert response.status_code == 404


def test_key_detail_signing_secret_matches_the_profile(reference_server: RunningReference) -> None:
    client = reference_server.client()
    detail = client.get(
        f"/api/keys/{reference_server.key_id('primary')}",
        headers=bearer(reference_server.session()),
    )
    expected = reference_server.profile["keys"]["primary"]["signing_secret"]
    assert detail.json()["signing_secret"] == expected
