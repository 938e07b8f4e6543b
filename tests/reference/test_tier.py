"""The tier record (spec §2) on GET /v1/account/tier and GET /api/tier."""

from __future__ import annotations

from running_reference import RunningReference, bearer

FIELDS = {
    "plan_code": str,
    "requests_per_minute": int,
    "requests_per_day": int,
    "concurrent_limit": int,
    "max_credits_per_day": int,
    "allowed_model_types": list,
}


def test_tier_record_has_every_field_with_its_type(reference_server: RunningReference) -> None:
    response = reference_server.client().get(
        "/v1/account/tier", headers=bearer(reference_server.key("primary"))
    )
    assert response.status_code == 200
    record = response.json()
    assert set(record) == set(FIELDS)
    for field, kind in FIELDS.items():
        assert type(record[field]) is kind, field
    assert set(record["allowed_model_types"]) <= {"image", "video", "audio", "agent"}


def test_console_tier_is_the_same_data(reference_server: RunningReference) -> None:
    client = reference_server.client()
    v1 = client.get("/v1/account/tier", headers=bearer(reference_server.key("primary")))
    console = client.get("/api/tier", headers=bearer(reference_server.session("primary")))
    assert console.status_code == 200
    assert console.json() == v1.json()


def test_tiers_differ_by_account(reference_server: RunningReference) -> None:
    client = reference_server.client()
    plans = {
        role: client.get("/v1/account/tier", headers=bearer(reference_server.key(role))).json()
        for role in ("primary", "low-limit", "restricted-models")
    }
    assert plans["low-limit"]["requests_per_minute"] < plans["primary"]["requests_per_minute"]
    assert "video" not in plans["restricted-models"]["allowed_model_types"]


def test_usage_counts_requests_and_credits(reference_server: RunningReference) -> None:
    client = reference_server.client()
    key = bearer(reference_server.key("foreign"))
    before = client.get("/v1/account/usage", headers=key).json()
    client.post("/v1/images/generate", headers=key, json={"prompt": "u"})
    after = client.get("/v1/account/usage", headers=key).json()
    assert after["requests_today"] == before["requests_today"] + 2
    assert after["credits_used_today"] > before["credits_used_today"]
    assert after["credits_remaining_today"] < before["credits_remaining_today"]
