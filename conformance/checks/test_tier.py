"""Tier endpoints (spec §2 tier record, §4 GET /v1/account/tier and console GET /api/tier).

The model for a check module: each check sends its request by hand through ``api``,
cites the requirement ids it proves, and says in its assertion message what was expected
and what was seen. One check per field, so that one wrong field fails one requirement.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from conformance.findings import fail
from conformance.judge.asserts import is_json_integer, json_values
from conformance.target.client import ApiClient
from conformance.target.setup import SetupFailed

TIER_PATH = "/v1/account/tier"
FIELDS = (
    "plan_code",
    "requests_per_minute",
    "requests_per_day",
    "concurrent_limit",
    "max_credits_per_day",
    "allowed_model_types",
)
NUMERIC = FIELDS[1:5]


def _object(response: httpx.Response) -> dict[str, Any]:
    """The JSON object of a response (the check fails, with what was seen, if it is not one)."""
    try:
        body = response.json()
    except ValueError:
        fail(
            f"expected a JSON body, saw "
            f"{response.headers.get('content-type')!r}: {response.text[:200]!r}"
        )
    if not isinstance(body, dict):
        fail(f"expected a JSON object, saw {body!r:.200}")
    return body


def _tier(api: ApiClient) -> dict[str, Any]:
    """The tier record; a read that is not served is a set-up error for the field checks
    (TIER-READ-01 judges the read)."""
    response = api.request("GET", TIER_PATH)
    if not 200 <= response.status_code < 300:
        raise SetupFailed(
            f"setup: GET {TIER_PATH} answered {response.status_code}: no tier record to "
            "examine (TIER-READ-01 judges the read)"
        )
    return _object(response)


@pytest.mark.requirement("TIER-READ-01")
def test_tier_with_api_key_returns_2xx_with_all_fields(api: ApiClient) -> None:
    """GET /v1/account/tier with an API key answers 2xx with all six tier record fields."""
    response = api.request("GET", TIER_PATH)
    assert 200 <= response.status_code < 300, (
        f"TIER-READ-01: expected 2xx with the tier record, saw {response.status_code}"
    )
    missing = [name for name in FIELDS if name not in _object(response)]
    assert not missing, f"TIER-READ-01: expected all of {list(FIELDS)}, missing {missing}"


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.requirement(f"TIER-FIELD-0{n}"), id=name)
        for n, name in enumerate(NUMERIC, start=2)
    ],
)
def test_tier_numeric_field_is_integer(api: ApiClient, name: str) -> None:
    """Each numeric field of the tier record is a JSON integer."""
    value = _tier(api).get(name)
    if not is_json_integer(value):
        fail(f"expected {name} to be an integer, saw {value!r}")


@pytest.mark.requirement("TIER-FIELD-01")
def test_tier_plan_code_is_string(api: ApiClient) -> None:
    """plan_code (the tier name) is a string."""
    value = _tier(api).get("plan_code")
    assert isinstance(value, str), f"TIER-FIELD-01: expected a string plan_code, saw {value!r}"


@pytest.mark.requirement("TIER-FIELD-06")
def test_tier_allowed_model_types_is_array_of_strings(api: ApiClient) -> None:
    """allowed_model_types is an array of strings."""
    value = _tier(api).get("allowed_model_types")
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), (
        f"TIER-FIELD-06: expected an array of strings, saw {value!r}"
    )


@pytest.mark.requirement("TIER-FIELD-07")
def test_tier_allowed_model_types_are_known_categories(api: ApiClient) -> None:
    """Every allowed_model_types value is one of the categories the spec names."""
    seen = _tier(api).get("allowed_model_types")
    assert isinstance(seen, list), (
        f"TIER-FIELD-07: expected allowed_model_types to be a list, saw {seen!r}"
    )
    unknown = sorted(str(v) for v in seen if v not in {"image", "video", "audio", "agent"})
    assert not unknown, f"TIER-FIELD-07: expected only image, video, audio, agent; saw {unknown}"


@pytest.mark.requirement("TIER-FIELD-08")
def test_tier_numeric_fields_are_positive(api: ApiClient) -> None:
    """The limits of the tier record are positive (a limit of 0 would block everything)."""
    tier = _tier(api)
    not_positive = {
        n: tier.get(n) for n in NUMERIC if not (is_json_integer(tier.get(n)) and tier[n] > 0)
    }
    assert not not_positive, f"TIER-FIELD-08: expected positive integers, saw {not_positive}"


def _same_value(expected: object, seen: object) -> bool:
    """One tier value and one value of the console's answer are the same data (a list of
    model categories in any order; an integer is not a bool or a float)."""
    if isinstance(expected, list) and isinstance(seen, list):
        return sorted(map(json.dumps, expected)) == sorted(map(json.dumps, seen))
    return type(expected) is type(seen) and expected == seen


@pytest.mark.console
@pytest.mark.requirement("CONSOLE-TIER-01")
def test_console_tier_with_session_has_same_data_as_api_tier(api: ApiClient) -> None:
    """GET /api/tier with the primary session is served and carries every value of the
    tier record GET /v1/account/tier gives (console payloads are not shown, so each value
    is looked for wherever it sits in the answer)."""
    by_key = _tier(api)
    by_session = api.request("GET", "/api/tier", role="none", session="primary")
    assert 200 <= by_session.status_code < 300, (
        f"CONSOLE-TIER-01: expected 2xx from /api/tier with a session, saw {by_session.status_code}"
    )
    values = json_values(by_session)
    missing = {
        name: by_key.get(name)
        for name in FIELDS
        if not any(_same_value(by_key.get(name), seen) for seen in values)
    }
    assert not missing, (
        f"CONSOLE-TIER-01: expected the data of {TIER_PATH} in /api/tier; these values are "
        f"not in it: {missing}; saw {by_session.text[:500]!r}"
    )


@pytest.mark.console
@pytest.mark.requirement("CONSOLE-TIER-02")
def test_console_tier_with_session_is_the_tier_record(api: ApiClient) -> None:
    """GET /api/tier with the primary session answers the same JSON object as GET
    /v1/account/tier."""
    by_key = _tier(api)
    by_session = api.request("GET", "/api/tier", role="none", session="primary")
    assert _object(by_session) == by_key, (
        f"CONSOLE-TIER-02: expected /api/tier to equal {TIER_PATH}; "
        f"saw {by_session.text[:500]!r} vs {by_key!r:.500}"
    )
