"""Model categories of a tier (spec §1: a tier sets "the model categories it may use";
§2 tier record ``allowed_model_types``).

Uses the optional ``restricted-models`` key role: a key of an account whose tier lacks a
model category. The categories it lacks are read from its own tier record; only the
categories whose submit path the spec shows are checked (image: POST
/v1/images/generate, video: POST /v1/videos/generate). The key holds the scope of the
path, so a refusal cannot be the scope's 403 (spec §5.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import httpx
import pytest

from conformance.judge.asserts import assert_status, describe, json_object
from conformance.observe.receiver import Endpoint
from conformance.target.client import ApiClient
from conformance.target.profile import Profile
from conformance.target.setup import IMAGES_PATH, SUBMIT_PROMPT, VIDEOS_PATH, SetupFailed

ROLE: Final = "restricted-models"
TIER_PATH: Final = "/v1/account/tier"
#: Spec §4: the submit path and scope of each category whose path is shown.
SUBMITS: Final = {
    "image": (IMAGES_PATH, "images:generate"),
    "video": (VIDEOS_PATH, "videos:generate"),
}


def _lacking(api: ApiClient, profile: Profile) -> tuple[str, str, str]:
    """(category, path, scope) of a shown category the role's tier lacks; else a skip."""
    key = profile.key(ROLE)
    response = api.request("GET", TIER_PATH, role=ROLE)
    tier = json_object(response)
    allowed = tier.get("allowed_model_types") if tier is not None else None
    if response.status_code != 200 or not isinstance(allowed, list):
        raise SetupFailed(f"setup: GET {TIER_PATH} ({ROLE}) answered {describe(response)}")
    for category, (path, scope) in SUBMITS.items():
        if category not in allowed and key.has_scope(scope):
            return category, path, scope
    pytest.skip(
        f"needs a {ROLE} key whose tier lacks image or video and that holds that scope; "
        f"its tier allows {allowed} and the key has scopes {list(key.scopes)}"
    )


@dataclass(frozen=True)
class OutsideTier:
    """A submit with the restricted key for a category its tier lacks, and its answer."""

    category: str
    path: str
    response: httpx.Response


@pytest.fixture
def outside_tier(api: ApiClient, profile: Profile, endpoint: Endpoint) -> OutsideTier:
    """The submit both checks judge: a category the role's tier lacks, with a target on the
    receiver (so the refusal is not for a missing target)."""
    category, path, _ = _lacking(api, profile)
    body = {"prompt": SUBMIT_PROMPT, "webhook": {"url": endpoint.url}}
    return OutsideTier(category, path, api.request("POST", path, role=ROLE, json=body))


@pytest.mark.requirement("TIER-MODEL-01")
def test_submit_for_category_outside_tier_is_not_accepted(outside_tier: OutsideTier) -> None:
    """A submit for a model category the key's tier does not allow is not accepted."""
    response = outside_tier.response
    assert not 200 <= response.status_code < 300, (
        f"TIER-MODEL-01: POST {outside_tier.path} with a key whose tier lacks "
        f"{outside_tier.category!r}: expected a refusal (no 202, no generation), "
        f"saw {describe(response)}"
    )


@pytest.mark.requirement("TIER-MODEL-02")
def test_submit_for_category_outside_tier_answers_403(outside_tier: OutsideTier) -> None:
    """The refusal of a model category outside the tier is a 403 (as for a scope)."""
    assert_status(outside_tier.response, 403)
