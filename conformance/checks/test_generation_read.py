"""Reading generations and their lifecycle (spec §1, §2 Generation, §3, §4 GET
/v1/generations/{id}).

The result of a submit "is read later with GET /v1/generations/{id}" using the id of the
202 (spec §1). The response body is not shown (§4), so only the status of the read is a
MUST; that the record shows the id and the state (completed, failed, cancelled: the names
§3 gives) is an interpretation, and so is every status for a read that cannot succeed.
Generations are driven to failure and cancellation with the profile's sandbox prompts.
"""

from __future__ import annotations

import time
from typing import Any, Final

import pytest

from conformance.judge.asserts import assert_status, describe, error_detail, json_object
from conformance.observe.deliveries import submit_with_target
from conformance.observe.receiver import Endpoint
from conformance.target.client import ApiClient
from conformance.target.profile import KeyProfile, Profile
from conformance.target.setup import (
    IMAGES_PATH,
    SUBMIT_PROMPT,
    VIDEOS_PATH,
    GenerationOutcome,
    outcome_prompt,
)

#: Spec §3: the names that appear as event names and status.
FINAL: Final = frozenset({"completed", "failed", "cancelled"})
#: A generation id no implementation has issued.
UNKNOWN_ID: Final = "gen_conformance_never_issued_0000"


def _settle(api: ApiClient, generation_id: str) -> tuple[dict[str, Any] | None, float]:
    """Read the generation until its status is final or the profile's
    max_generation_seconds pass; the last record read and the seconds it took."""
    limit = api.profile.sandbox.max_generation_seconds + api.profile.timing.tolerance_seconds
    start = time.monotonic()
    record: dict[str, Any] | None = None
    pause = 0.1
    while True:
        response = api.request("GET", f"/v1/generations/{generation_id}")
        record = json_object(response)
        elapsed = time.monotonic() - start
        if (record is not None and record.get("status") in FINAL) or elapsed >= limit:
            return record, elapsed
        time.sleep(min(pause, max(0.0, limit - elapsed)))  # polling interval, bounded
        pause = min(pause * 2, 1.0)


@pytest.mark.parametrize(
    "path",
    [pytest.param(IMAGES_PATH, id="image"), pytest.param(VIDEOS_PATH, id="video")],
)
@pytest.mark.requirement("GEN-READ-01")
def test_read_with_submit_id_and_key_answers_2xx(
    api: ApiClient, endpoint: Endpoint, path: str
) -> None:
    """GET /v1/generations/{id} with the id of the 202 and the submitting key is served."""
    generation_id = submit_with_target(api, endpoint.url, path=path)
    response = api.request("GET", f"/v1/generations/{generation_id}")
    assert 200 <= response.status_code < 300, (
        f"GEN-READ-01: GET /v1/generations/{generation_id} (from the 202 of POST {path}): "
        f"expected 2xx, saw {describe(response)}"
    )


@pytest.mark.requirement("GEN-READ-02")
def test_read_unknown_id_answers_404(api: ApiClient) -> None:
    """GET /v1/generations/{id} with an id never issued answers 404."""
    response = api.request("GET", f"/v1/generations/{UNKNOWN_ID}")
    assert_status(response, 404)


@pytest.mark.requirement("ERR-BODY-01")
def test_read_unknown_id_error_body_has_detail(api: ApiClient) -> None:
    """The error answer to a read of an unknown id is a JSON object with a ``detail``."""
    response = api.request("GET", f"/v1/generations/{UNKNOWN_ID}")
    detail = error_detail(response)
    assert isinstance(detail, str) and detail.strip(), (
        f"ERR-BODY-01: expected a JSON object with a non-empty 'detail' string, "
        f"saw {describe(response)}"
    )


@pytest.mark.requirement("GEN-READ-03")
def test_read_with_other_accounts_key_answers_404(
    api: ApiClient, endpoint: Endpoint, foreign: KeyProfile
) -> None:
    """Another account's key reading a generation gets 404, and nothing of it."""
    prompt = f"{SUBMIT_PROMPT} conformance-read-foreign"
    generation_id = submit_with_target(api, endpoint.url, prompt=prompt)
    response = api.request("GET", f"/v1/generations/{generation_id}", role=foreign.role)
    assert response.status_code == 404 and "conformance-read-foreign" not in response.text, (
        f"GEN-READ-03: GET /v1/generations/{generation_id} with another account's key: "
        f"expected 404 revealing nothing, saw {describe(response)}"
    )


@pytest.mark.parametrize(
    ("path", "outcome"),
    [
        pytest.param(IMAGES_PATH, "completed", id="image-completed"),
        pytest.param(VIDEOS_PATH, "completed", id="video-completed"),
        pytest.param(IMAGES_PATH, "failed", id="image-failed", marks=pytest.mark.sandbox),
        pytest.param(IMAGES_PATH, "cancelled", id="image-cancelled", marks=pytest.mark.sandbox),
    ],
)
@pytest.mark.requirement("GEN-RECORD-01", "GEN-STATE-02")
def test_read_record_reaches_final_status_in_time(
    api: ApiClient, endpoint: Endpoint, profile: Profile, path: str, outcome: GenerationOutcome
) -> None:
    """The record read shows the generation's id and reaches its final status within the
    profile's max_generation_seconds (completed; failed or cancelled by sandbox prompt)."""
    prompt = outcome_prompt(profile, outcome)
    generation_id = submit_with_target(api, endpoint.url, prompt=prompt, path=path)
    record, elapsed = _settle(api, generation_id)
    seen = None if record is None else {k: record.get(k) for k in ("id", "status")}
    assert seen == {"id": generation_id, "status": outcome}, (
        f"GEN-RECORD-01/GEN-STATE-02: expected the record of {generation_id} to read "
        f"status {outcome!r} within {profile.sandbox.max_generation_seconds:g} s; "
        f"after {elapsed:.1f} s saw {seen}"
    )
