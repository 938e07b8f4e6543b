"""Callback URL rules against the fixture vectors (spec §4 "Callback URL requirements", §7).

Every vector of ``fixtures/callback_urls.yaml`` that names a requirement
(:func:`conformance.judge.strategies.fixture_vectors`) goes in both fields that carry a callback
target, ``callback_url`` and ``webhook.url`` (spec §2: webhook.url "Must satisfy the
callback URL rules"). Reject vectors must be answered 400 (spec §7) and never contacted:
the canaries listen where a wrongly accepted local vector would connect. Accept vectors
point at the suite's receiver and must be answered 202. Each case is judged by the
requirement its vector names: a vector in a range the address tables rank as an
interpretation (a recent registry entry, for one) can only warn, in either field.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from conformance.findings import fail
from conformance.judge.asserts import describe
from conformance.judge.strategies import (
    FIELDS,
    UrlVector,
    case_ids,
    fixture_vectors,
    iut_on_this_machine,
)
from conformance.observe.events import TargetKind, target_body
from conformance.observe.receiver import CanaryView, Receiver
from conformance.target.client import ApiClient
from conformance.target.profile import Profile
from conformance.target.setup import IMAGES_PATH, SUBMIT_PROMPT


def _ids(vector: UrlVector, field: str) -> tuple[str, ...]:
    """The vector's requirement (from the fixture); a reject vector in webhook.url also
    breaks TARGET-BIND-03 when that requirement is a MUST."""
    return (
        case_ids(field, vector.requirement) if vector.verdict == "reject" else (vector.requirement,)
    )


def _cases(verdict: str) -> list[Any]:
    """One case per vector of *verdict* and field."""
    return [
        pytest.param(
            vector,
            field,
            id=f"{field}-{vector.case_id}",
            marks=pytest.mark.requirement(*_ids(vector, field)),
        )
        for vector in fixture_vectors()
        if vector.verdict == verdict
        for field in FIELDS
    ]


def _assert_answered(
    response: httpx.Response, expected: int, field: TargetKind, shown_url: str, about: str
) -> None:
    """The submit that carried the vector's URL (*shown_url*, for the message) in *field*
    was answered *expected*; *about* says what the vector is."""
    if response.status_code != expected:
        fail(
            f"POST {IMAGES_PATH} with {field}={shown_url!r} ({about}): expected {expected}, "
            f"saw {describe(response)}"
        )


def _canary_port(profile: Profile, canary: CanaryView) -> int | None:
    on_this_machine = iut_on_this_machine(profile.base_url, profile.receiver.public_url)
    return canary.port if on_this_machine else None


@pytest.mark.parametrize(("vector", "field"), _cases("reject"))
def test_url_vector_breaking_rule_answered_400(
    api: ApiClient,
    profile: Profile,
    receiver: Receiver,
    canary: CanaryView,
    vector: UrlVector,
    field: TargetKind,
) -> None:
    """A callback URL that breaks a callback URL rule fails the submit with 400, uncontacted."""
    url = vector.render(receiver.url_for(""), _canary_port(profile, canary))
    response = api.request(
        "POST", IMAGES_PATH, json={"prompt": SUBMIT_PROMPT, **target_body(field, url)}
    )
    _assert_answered(response, 400, field, url, vector.context())
    canary.assert_no_hits()


@pytest.mark.parametrize(("vector", "field"), _cases("accept"))
def test_url_vector_on_receiver_accepted(
    api: ApiClient, receiver: Receiver, vector: UrlVector, field: TargetKind
) -> None:
    """A callback URL on the suite's receiver that meets every rule is accepted with 202."""
    url = vector.render(receiver.url_for(""))
    response = api.request(
        "POST", IMAGES_PATH, json={"prompt": SUBMIT_PROMPT, **target_body(field, url)}
    )
    _assert_answered(response, 202, field, url[:120], vector.why)
