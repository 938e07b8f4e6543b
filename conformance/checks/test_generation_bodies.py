"""Submit bodies whose values the spec shows by example but does not pin, and JSON on the
wire (spec §4 body tables, "Bodies are JSON"; §8 limits).

§4 gives a size label's form ("a digit followed by K"), a resolution's ("a number
followed by p") and says of a duration "the value shown is an integer", without listing
the allowed values; what a malformed or over-long body gets is not shown either. So every
requirement here is an INTERPRETATION: a check that fails only warns. Each sends one
body, by hand, and judges the status: whether the generation then runs is judged by the
checks of generations and their events.
"""

from __future__ import annotations

import json
from typing import Any, Final

import httpx
import pytest

from conformance.findings import fail
from conformance.judge.asserts import (
    answer_or_fail,
    assert_status,
    describe,
    generation_id_of,
)
from conformance.observe.receiver import Endpoint
from conformance.target.client import ApiClient
from conformance.target.setup import (
    IMAGES_PATH,
    SUBMIT_PROMPT,
    TIER_PATH,
    VIDEOS_PATH,
    SetupFailed,
)

#: A prompt of one million characters (GEN-SIZE-01: "an over-long prompt (1 MB)"): far
#: beyond any prompt a model takes, and still under the 1 MiB a body limit usually is, so
#: that what is refused is the prompt.
LONG_PROMPT_CHARS: Final = 1_000_000
#: The media type of JSON (spec §4: "Bodies are JSON (Content-Type: application/json)").
JSON_MEDIA_TYPE: Final = "application/json"
#: A generation id no implementation has made (its read is a 404 with a body).
UNKNOWN_ID: Final = "gen_conformance_bodies_unknown"


def _submit(api: ApiClient, path: str, endpoint: Endpoint, **fields: Any) -> httpx.Response:
    body = {"prompt": SUBMIT_PROMPT, **fields, "webhook": {"url": endpoint.url}}
    return api.request("POST", path, json=body)


@pytest.mark.requirement("GEN-IMAGE-04")
def test_image_submit_with_size_1k_answers_202(api: ApiClient, endpoint: Endpoint) -> None:
    """An image submit with size "1K", the form §4 shows (a digit followed by K), is
    answered 202."""
    assert_status(_submit(api, IMAGES_PATH, endpoint, size="1K"), 202)


@pytest.mark.requirement("GEN-VIDEO-03")
def test_video_submit_with_integer_duration_answers_202(api: ApiClient, endpoint: Endpoint) -> None:
    """A video submit with duration 5, an integer number of seconds (the form §4 shows),
    is answered 202."""
    assert_status(_submit(api, VIDEOS_PATH, endpoint, duration=5), 202)


@pytest.mark.requirement("GEN-VIDEO-05")
def test_video_submit_with_resolution_720p_answers_202(api: ApiClient, endpoint: Endpoint) -> None:
    """A video submit with resolution "720p", the form §4 shows (a number followed by p),
    is answered 202."""
    assert_status(_submit(api, VIDEOS_PATH, endpoint, resolution="720p"), 202)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(b'{"prompt": "conformance suite: a red square"', id="unclosed-object"),
        pytest.param(b"prompt=conformance", id="form-encoded-text"),
    ],
)
@pytest.mark.requirement("GEN-JSON-03")
def test_submit_with_malformed_json_is_refused_with_4xx(api: ApiClient, text: bytes) -> None:
    """A submit whose body, sent as ``application/json``, is not valid JSON is refused with
    a 4xx status: neither accepted nor a server error."""
    what = f"POST {IMAGES_PATH} with the body {text!r} (not JSON): expected a 4xx"
    headers = {"Content-Type": JSON_MEDIA_TYPE}
    response = answer_or_fail(api, what, "POST", IMAGES_PATH, content=text, headers=headers)
    if not 400 <= response.status_code < 500:
        fail(f"{what}, saw {describe(response)}")


@pytest.mark.requirement("GEN-SIZE-01")
def test_submit_with_one_megabyte_prompt_is_refused_with_4xx(api: ApiClient) -> None:
    """A submit whose prompt is a million characters long is refused with a 4xx status
    (400, 413 or 422), not accepted and not a server error."""
    body = {"prompt": "a" * LONG_PROMPT_CHARS}
    what = f"POST {IMAGES_PATH} with a prompt of {LONG_PROMPT_CHARS} characters: expected a 4xx"
    response = answer_or_fail(api, what, "POST", IMAGES_PATH, json=body)
    if not 400 <= response.status_code < 500:
        fail(f"{what}, saw {describe(response)}")


def _not_json(response: httpx.Response) -> str | None:
    """Why *response*'s body is not JSON as §4 shows it, or None when it is."""
    content_type = response.headers.get("content-type", "")
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type != JSON_MEDIA_TYPE and not media_type.endswith("+json"):
        return f"Content-Type {content_type or 'missing'!r}"
    try:
        json.loads(response.content)
    except ValueError:
        return "a body that is not JSON"
    return None


@pytest.mark.requirement("GEN-JSON-02")
def test_v1_responses_with_a_body_carry_json(api: ApiClient, endpoint: Endpoint) -> None:
    """The /v1 answers that have a body (a submit's 202, a generation's read and delivery
    list, the tier record, a 404) carry JSON with ``Content-Type: application/json``."""
    submitted = _submit(api, IMAGES_PATH, endpoint)
    generation_id = generation_id_of(submitted)
    if submitted.status_code != 202 or not isinstance(generation_id, str):
        raise SetupFailed(
            f"setup (a generation to read): POST {IMAGES_PATH} answered "
            f"{describe(submitted)}, expected 202 with an id"
        )
    answers = [submitted] + [
        api.request("GET", path)
        for path in (
            TIER_PATH,
            f"/v1/generations/{generation_id}",
            f"/v1/generations/{generation_id}/deliveries",
            f"/v1/generations/{UNKNOWN_ID}",
        )
    ]
    wrong = [
        f"{response.request.method} {response.request.url.path} answered "
        f"{response.status_code} with {why}"
        for response in answers
        if response.content and (why := _not_json(response)) is not None
    ]
    assert not wrong, f"expected JSON (Content-Type: {JSON_MEDIA_TYPE}), saw: {wrong}"
