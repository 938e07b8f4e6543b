"""Which key may read the tier, and whose tier it describes (spec §4 GET /v1/account/tier:
"API key. No body. Response: the tier record"; §1: "Each account has a tier").

The spec names no scope for the tier endpoint, and says a tier belongs to an account:
both readings are interpretations. The keys of low tiers are never used here (their rate
windows belong to the chains of ``low_limit.py``).
"""

from __future__ import annotations

from typing import Any, Final

import pytest

from conformance.checks.low_limit import CHAIN_ROLES
from conformance.judge.asserts import describe
from conformance.target.client import ApiClient
from conformance.target.profile import Profile
from conformance.target.setup import SetupFailed

TIER_PATH: Final = "/v1/account/tier"


def _tier(api: ApiClient, role: str) -> dict[str, Any]:
    response = api.request("GET", TIER_PATH, role=role)
    body: Any = response.json() if response.status_code == 200 else None
    if not isinstance(body, dict):
        raise SetupFailed(f"setup: GET {TIER_PATH} ({role}) answered {describe(response)}")
    return body


@pytest.mark.requirement("TIER-READ-02")
def test_tier_readable_with_every_active_key_whatever_its_scopes(
    api: ApiClient, profile: Profile
) -> None:
    """Every active key of the profile may read the tier, whichever scopes it lacks (the
    keys the rate chains exhaust left out)."""
    roles = [k.role for k in profile.keys.values() if not k.revoked and k.role not in CHAIN_ROLES]
    refused = {}
    for role in roles:
        response = api.request("GET", TIER_PATH, role=role)
        if not 200 <= response.status_code < 300:
            refused[role] = describe(response)
    assert not refused, (
        f"TIER-READ-02: expected GET {TIER_PATH} to be served for every active key "
        f"(no scope is named for it); refused: {refused}"
    )


@pytest.mark.requirement("TIER-READ-03")
def test_tier_of_restricted_account_differs_from_primary(api: ApiClient, profile: Profile) -> None:
    """Keys of two accounts whose tiers allow different model categories read different
    plan_code values: each key reads its own account's tier."""
    restricted = profile.key("restricted-models")
    if restricted.account == profile.key("primary").account:
        pytest.skip("needs a restricted-models key of another account than primary's")
    primary, other = _tier(api, "primary"), _tier(api, "restricted-models")
    categories = "allowed_model_types"
    if sorted(map(str, primary.get(categories) or [])) == sorted(
        map(str, other.get(categories) or [])
    ):
        pytest.skip("the two accounts' tiers allow the same model categories (maybe one tier)")
    assert primary.get("plan_code") != other.get("plan_code"), (
        f"TIER-READ-03: expected tiers with different {categories} to have different "
        f"plan_code values; both read {primary.get('plan_code')!r}"
    )
