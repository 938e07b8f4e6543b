"""Submitting generations (spec §1, §2 Generation, §4 submit endpoints, §8 limits).

A submit answers HTTP 202 with the id of the generation; clients persist that id and
read the result later (spec §1, §2). Each accepted submit here names a delivery target on
the suite's receiver, the form in which images are asynchronous (spec §9), and uses the
``primary`` key (every scope, a generous tier).

§4 gives a size label's form ("a digit followed by K"), a resolution's ("a number
followed by p") and says of a duration "the value shown is an integer", without listing
the allowed values; what a malformed or over-long body gets is not shown either, nor
whether "Bodies are JSON" covers the answers too. The checks of those are
INTERPRETATIONS: a failure only warns. They judge the status: whether the generation then
runs is judged by the checks of generations and their events.

§4 does not show a submit's other body fields, nor a video's input fields, so an
implementation may require one. A MUST judged on a submit of shown fields therefore
reads a refusal with care: the same submit is sent again with §4's optional fields
filled in (``_control``). Accepted, the refusal was of what the first submit left out,
and the MUST judges it; refused too, only the interpretation that the shown fields
suffice (GEN-IMAGE-09, GEN-VIDEO-08) warns, and the MUST is not judged.
"""

from __future__ import annotations

import json
from typing import Any, Final

import httpx
import pytest

from conformance.findings import fail
from conformance.judge.asserts import (
    accepted_generation_id,
    answer_or_fail,
    assert_refused,
    assert_status,
    describe,
    generation_id_of,
)
from conformance.observe.receiver import Endpoint
from conformance.target.client import ApiClient
from conformance.target.setup import (
    EDIT_PATH,
    IMAGES_PATH,
    SUBMIT_PROMPT,
    TIER_PATH,
    VIDEOS_PATH,
    SetupFailed,
    submit_generation,
    submitted_id,
)

#: Text beyond ASCII for a prompt: JSON exchanged between systems is UTF-8 (RFC 8259
#: §8.1), and the spec puts no rule on a prompt's characters (§4: "Text prompt.").
NON_ASCII: Final = "un carré rouge, 赤い四角"
#: A prompt of one million characters (GEN-SIZE-01: "an over-long prompt (1 MB)"): far
#: beyond any prompt a model takes, and still under the 1 MiB a body limit usually is, so
#: that what is refused is the prompt.
LONG_PROMPT_CHARS: Final = 1_000_000
#: The media type of JSON (spec §4: "Bodies are JSON (Content-Type: application/json)").
JSON_MEDIA_TYPE: Final = "application/json"
#: §4's optional fields of each submit, filled in with the forms §4 shows: the control
#: sent when a submit of fewer fields is refused.
SHOWN_OPTIONAL: Final[dict[str, dict[str, Any]]] = {
    IMAGES_PATH: {"size": "1K"},
    VIDEOS_PATH: {"duration": 5, "resolution": "720p"},
}
#: The interpretation a submit of shown fields alone rests on, per endpoint.
SHOWN_FIELDS_SUFFICE: Final = {IMAGES_PATH: "GEN-IMAGE-09", VIDEOS_PATH: "GEN-VIDEO-08"}
#: A generation id no implementation has made (its read is a 404 with a body).
UNKNOWN_ID: Final = "gen_conformance_bodies_unknown"


def _submit(api: ApiClient, path: str, endpoint: Endpoint, **fields: Any) -> httpx.Response:
    """POST a minimal valid submit: a prompt, *fields* and an inline target on the receiver."""
    body: dict[str, Any] = {"prompt": SUBMIT_PROMPT, **fields, "webhook": {"url": endpoint.url}}
    return api.request("POST", path, json=body)


def _refused(response: httpx.Response) -> bool:
    return 400 <= response.status_code < 500


def _control(
    api: ApiClient, path: str, body: dict[str, Any], refused: httpx.Response
) -> httpx.Response:
    """After *refused*, a 4xx to a submit of fields §4 shows: *body* sent with §4's optional
    fields filled in as well. Its answer when accepted, so the check judges the refusal
    (or, for the status of an accepted submit, the control itself).

    Refused too, the implementation requires a body field §4 does not show ("Other body
    fields of this request: not shown", "Text-or-image input fields for video: not
    shown"). No rule of the check is then broken but the interpretation that the shown
    fields suffice: it warns, and the check judges nothing else. Neither accepted nor
    refused (a 5xx), the control tells nothing: a set-up error.
    """
    control = api.request("POST", path, json={**body, **SHOWN_OPTIONAL[path]})
    if _refused(control):
        fail(
            f"POST {path} with only fields §4 shows was refused ({describe(refused)}), and "
            f"again with its optional fields {SHOWN_OPTIONAL[path]} ({describe(control)}): "
            "the implementation requires a body field §4 does not show",
            rule=SHOWN_FIELDS_SUFFICE[path],
        )
    if not 200 <= control.status_code < 300:
        raise SetupFailed(
            f"setup: POST {path} was refused ({describe(refused)}); its control, with the "
            f"optional fields {SHOWN_OPTIONAL[path]}, answered {describe(control)}, so "
            "what the refusal was of cannot be told"
        )
    return control


def _judged_answer(api: ApiClient, path: str, body: dict[str, Any]) -> httpx.Response:
    """The answer to the submit *body* whose status an accepted-submit rule judges: its own,
    or, when refused, its control's (a refused submit is not an accepted one)."""
    response = api.request("POST", path, json=body)
    return _control(api, path, body, response) if _refused(response) else response


def _assert_accepted(
    api: ApiClient,
    path: str,
    body: dict[str, Any],
    *,
    rule: str,
    control_is: str,
    plain: dict[str, Any] | None = None,
) -> None:
    """*body* is answered 202, which *rule* states. A refusal breaks *rule* only when the
    control (*plain*, default *body*, with §4's optional fields: :func:`_control`) is
    accepted; *control_is* says how it differs, for the message."""
    response = api.request("POST", path, json=body)
    if _refused(response):
        control = _control(api, path, body if plain is None else plain, response)
        fail(
            f"POST {path}: expected 202, saw {describe(response)}; the same submit "
            f"{control_is} was accepted ({describe(control)})",
            rule=rule,
        )
    assert_status(response, 202, rule)


@pytest.mark.requirement("GEN-IMAGE-07", "GEN-IMAGE-09")
def test_image_submit_answers_202(api: ApiClient, endpoint: Endpoint) -> None:
    """An accepted image submit is answered with exactly HTTP 202 (spec §1, §4). A refused
    one is not an accepted one: the control (:func:`_control`) is judged instead."""
    body = {"prompt": SUBMIT_PROMPT, "webhook": {"url": endpoint.url}}
    assert_status(_judged_answer(api, IMAGES_PATH, body), 202, "GEN-IMAGE-07")


@pytest.mark.requirement("GEN-EDIT-02")
def test_edit_submit_with_prompt_and_target_answers_202(api: ApiClient, endpoint: Endpoint) -> None:
    """An edit submit of an instruction (prompt) and a delivery target is answered 202."""
    response = _submit(api, EDIT_PATH, endpoint)
    assert_status(response, 202)


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(IMAGES_PATH, id="images-generate"),
        pytest.param(EDIT_PATH, id="images-edit"),
        pytest.param(VIDEOS_PATH, id="videos-generate"),
    ],
)
@pytest.mark.requirement("GEN-ID-01")
def test_submit_2xx_body_carries_nonempty_string_id(
    api: ApiClient, endpoint: Endpoint, path: str
) -> None:
    """The 202 answering a submit carries the generation id as a non-empty string ``id``."""
    response = _submit(api, path, endpoint)
    if response.status_code != 202:
        # The id is stated for the 202; the status of a submit is judged by the checks of
        # each endpoint (an edit body, for one, is not shown in full).
        pytest.skip(f"POST {path} was not answered 202 ({response.status_code}): no 202 body")
    seen = generation_id_of(response)
    assert isinstance(seen, str) and seen.strip(), (
        f"GEN-ID-01: POST {path}: expected a non-empty string 'id' in the body, "
        f"saw {describe(response)}"
    )


@pytest.mark.parametrize(
    "with_target", [pytest.param(True, id="with-target"), pytest.param(False, id="no-target")]
)
@pytest.mark.requirement("GEN-VIDEO-07", "GEN-VIDEO-08")
def test_video_submit_answers_202_with_id(
    api: ApiClient, endpoint: Endpoint, with_target: bool
) -> None:
    """An accepted video submit answers 202 with an id, with or without a delivery target.
    A refused one is not an accepted one: the control (:func:`_control`) is judged instead."""
    body: dict[str, Any] = {"prompt": SUBMIT_PROMPT}
    if with_target:
        body["webhook"] = {"url": endpoint.url}
    response = _judged_answer(api, VIDEOS_PATH, body)
    assert_status(response, 202, "GEN-VIDEO-07")
    accepted_generation_id(response, rule="GEN-VIDEO-07")


@pytest.mark.requirement("GEN-IMAGE-08")
def test_image_submit_without_target_answers_202_with_id(api: ApiClient) -> None:
    """An image submit with a prompt and no delivery target is also answered 202 with an id."""
    response = api.request("POST", IMAGES_PATH, json={"prompt": SUBMIT_PROMPT})
    assert_status(response, 202)
    accepted_generation_id(response)


@pytest.mark.parametrize(
    "spelling",
    [
        pytest.param("compact", id="compact"),
        pytest.param("indented", id="indented"),
        pytest.param("utf-8", id="utf-8-text"),
    ],
)
@pytest.mark.requirement("GEN-JSON-01")
def test_submit_json_body_with_json_content_type_accepted(
    api: ApiClient, endpoint: Endpoint, spelling: str
) -> None:
    """A valid submit sent as JSON with ``Content-Type: application/json`` is accepted
    (2xx), however the JSON text is spelt: compact, indented, or with UTF-8 text."""
    prompt = f"{SUBMIT_PROMPT}: {NON_ASCII}" if spelling == "utf-8" else SUBMIT_PROMPT
    body = {"prompt": prompt, "webhook": {"url": endpoint.url}}
    indent = 2 if spelling == "indented" else None
    separators = (",", ":") if spelling == "compact" else None
    text = json.dumps(body, indent=indent, separators=separators, ensure_ascii=False)
    response = api.request(
        "POST",
        IMAGES_PATH,
        content=text.encode("utf-8"),
        headers={"Content-Type": "application/json"},
    )
    assert 200 <= response.status_code < 300, (
        f"GEN-JSON-01: POST {IMAGES_PATH} with a {spelling} JSON body and Content-Type: "
        f"application/json: expected it accepted (2xx), saw {describe(response)}"
    )


@pytest.mark.requirement("GEN-IMAGE-03", "GEN-IMAGE-09")
def test_image_submit_without_size_answers_202(api: ApiClient, endpoint: Endpoint) -> None:
    """An image submit of a prompt and a delivery target, with no size (an optional
    field, §4), is answered 202. A refusal is one of the missing size only when the same
    submit with a size is accepted (:func:`_control`)."""
    body = {"prompt": SUBMIT_PROMPT, "webhook": {"url": endpoint.url}}
    _assert_accepted(api, IMAGES_PATH, body, rule="GEN-IMAGE-03", control_is="with a size")


@pytest.mark.parametrize(
    "events",
    [
        pytest.param(None, id="url-only"),
        pytest.param(["generation.completed"], id="url-and-events"),
    ],
)
@pytest.mark.requirement("GEN-IMAGE-06", "GEN-IMAGE-09")
def test_image_submit_with_webhook_binding_answers_202(
    api: ApiClient, endpoint: Endpoint, events: list[str] | None
) -> None:
    """An image submit whose ``webhook`` object holds a url, with or without the optional
    events (generation.completed, the name §2 gives as an example), is answered 202. A
    refusal breaks it when a submit of the url alone, with §4's optional fields, is
    accepted (:func:`_control`)."""
    binding: dict[str, Any] = {"url": endpoint.url}
    if events is not None:
        binding["events"] = events
    _assert_accepted(
        api,
        IMAGES_PATH,
        {"prompt": SUBMIT_PROMPT, "webhook": binding},
        rule="GEN-IMAGE-06",
        control_is="with the url alone in its webhook object, and a size",
        plain={"prompt": SUBMIT_PROMPT, "webhook": {"url": endpoint.url}},
    )


@pytest.mark.requirement("GEN-VIDEO-02", "GEN-VIDEO-08")
def test_video_submit_without_duration_or_resolution_answers_202(
    api: ApiClient, endpoint: Endpoint
) -> None:
    """A video submit of a prompt and a delivery target, with neither duration nor
    resolution (both optional, §4), is answered 202. A refusal is one of the missing
    fields only when the same submit with them is accepted (:func:`_control`)."""
    body = {"prompt": SUBMIT_PROMPT, "webhook": {"url": endpoint.url}}
    _assert_accepted(
        api, VIDEOS_PATH, body, rule="GEN-VIDEO-02", control_is="with duration and resolution"
    )


@pytest.mark.requirement("GEN-ID-02")
def test_two_identical_submits_answer_distinct_ids(api: ApiClient, endpoint: Endpoint) -> None:
    """Two submits of the very same body are two generations: their 202s carry two
    different ids (each is the id GET /v1/generations/{id} reads one generation by)."""
    body = {"prompt": SUBMIT_PROMPT, "webhook": {"url": endpoint.url}}
    first, second = (
        submit_generation(api, IMAGES_PATH, body, context=f"submit {n} of 2 of one body")
        for n in (1, 2)
    )
    assert first != second, (
        f"GEN-ID-02: two submits of one body to {IMAGES_PATH} both answered the id {first!r}"
    )


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
    what = f"the body {text!r} (not JSON)"
    headers = {"Content-Type": JSON_MEDIA_TYPE}
    response = answer_or_fail(
        api,
        f"POST {IMAGES_PATH} with {what}: expected a 4xx",
        "POST",
        IMAGES_PATH,
        content=text,
        headers=headers,
    )
    assert_refused(response, what)


@pytest.mark.requirement("GEN-SIZE-01")
def test_submit_with_one_megabyte_prompt_is_refused_with_4xx(api: ApiClient) -> None:
    """A submit whose prompt is a million characters long is refused with a 4xx status
    (400, 413 or 422), not accepted and not a server error."""
    body = {"prompt": "a" * LONG_PROMPT_CHARS}
    what = f"a prompt of {LONG_PROMPT_CHARS} characters"
    response = answer_or_fail(
        api, f"POST {IMAGES_PATH} with {what}: expected a 4xx", "POST", IMAGES_PATH, json=body
    )
    assert_refused(response, what)


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
    generation_id = submitted_id(api, submitted, context="a generation to read")
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
