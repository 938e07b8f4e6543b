"""Tier endpoints (spec §2 tier record, §4 GET /v1/account/tier and console GET /api/tier)."""

from __future__ import annotations

import httpx
import pytest

import genapi_spec
from conformance.client import ApiClient


def _schema_errors(body: object) -> list[str]:
    validator = genapi_spec.validator("tier-record")
    return [
        f"{'/'.join(str(p) for p in error.absolute_path) or '(body)'}: {error.message}"
        for error in validator.iter_errors(body)
    ]


def _json(response: httpx.Response) -> object:
    try:
        return response.json()
    except ValueError:
        pytest.fail(
            f"expected a JSON body, saw {response.headers.get('content-type')!r}: "
            f"{response.text[:200]!r}"
        )


@pytest.mark.requirement(
    "TIER-READ-01",
    "TIER-FIELD-01",
    "TIER-FIELD-02",
    "TIER-FIELD-03",
    "TIER-FIELD-04",
    "TIER-FIELD-05",
    "TIER-FIELD-06",
)
def test_tier_with_api_key_returns_tier_record(api: ApiClient) -> None:
    """GET /v1/account/tier with an API key answers 2xx with a valid tier record."""
    response = api.request("GET", "/v1/account/tier")
    assert 200 <= response.status_code < 300, (
        f"TIER-READ-01: expected 2xx with the tier record, saw {response.status_code}"
    )
    errors = _schema_errors(_json(response))
    assert not errors, "TIER-FIELD-*: the tier record breaks the schema:\n" + "\n".join(errors)


@pytest.mark.requirement("TIER-FIELD-07")
def test_tier_allowed_model_types_are_known_categories(api: ApiClient) -> None:
    """Every allowed_model_types value is one of the categories the spec names."""
    body = _json(api.request("GET", "/v1/account/tier"))
    assert isinstance(body, dict), f"expected a JSON object, saw {body!r}"
    seen = body.get("allowed_model_types")
    assert isinstance(seen, list), f"expected allowed_model_types to be a list, saw {seen!r}"
    unknown = sorted(str(v) for v in seen if v not in {"image", "video", "audio", "agent"})
    assert not unknown, f"TIER-FIELD-07: expected only image, video, audio, agent; saw {unknown}"


@pytest.mark.console
@pytest.mark.requirement("CONSOLE-TIER-01")
def test_console_tier_with_session_matches_api_tier(api: ApiClient) -> None:
    """GET /api/tier with the primary session gives the same data as GET /v1/account/tier."""
    by_key = api.request("GET", "/v1/account/tier")
    by_session = api.request("GET", "/api/tier", role="none", session="primary")
    assert by_key.status_code == 200, (
        f"expected 200 from /v1/account/tier, saw {by_key.status_code}"
    )
    assert by_session.status_code == 200, (
        f"CONSOLE-TIER-01: expected 200 from /api/tier with a session, saw {by_session.status_code}"
    )
    assert _json(by_session) == _json(by_key), (
        "CONSOLE-TIER-01: expected /api/tier to equal /v1/account/tier; "
        f"saw {by_session.text[:500]!r} vs {by_key.text[:500]!r}"
    )
