"""What a submit body must hold (spec §4 "Endpoints", §8), per submit endpoint.

:data:`OPERATIONS` lists the submit endpoints with their scopes and the optional fields the
reference knows; :func:`validate_body` reads a body into prompt, model and parameters or
answers 400; :func:`faulty_body` is the same body as the body faults read it (each of them
skips one stated check of the spec's body tables).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from reference.config import Choices
from reference.errors import ApiError
from reference.fault import Fault, Faults

__all__ = ["MAX_PROMPT_CHARS", "OPERATIONS", "Operation", "faulty_body", "validate_body"]

# Faults injected here (``--fault NAME``; the registry, ``reference/faults.py``, collects them).
BLANK_PROMPT_SERVER_ERROR = Fault(
    "blank-prompt-server-error",
    "ERR-5XX-01",
    "a submit whose prompt is the empty string answers 500 instead of 400",
)
IMAGE_PROMPT_OPTIONAL = Fault(
    "image-prompt-optional",
    "GEN-IMAGE-01",
    "an image submit without prompt is accepted (with a default prompt)",
)
IMAGE_PROMPT_ANY_TYPE = Fault(
    "image-prompt-any-type",
    "GEN-IMAGE-02",
    "an image submit whose prompt is not a string is accepted (its JSON text is the prompt)",
)
VIDEO_PROMPT_OPTIONAL = Fault(
    "video-prompt-optional",
    "GEN-VIDEO-01",
    "a video submit without prompt is accepted (with a default prompt)",
)
VIDEO_DURATION_ANY_TYPE = Fault(
    "video-duration-any-type",
    "GEN-VIDEO-04",
    "a video submit whose duration is not a number is accepted (the duration ignored)",
)
JSON_BODY_ASCII_ONLY = Fault(
    "json-body-ascii-only",
    "GEN-JSON-01",
    "a submit body with non-ASCII characters is refused with 400 (the JSON read as ASCII)",
)
IMAGE_SIZE_REQUIRED = Fault(
    "image-size-required",
    "GEN-IMAGE-03",
    "an image submit without size is refused with 400",
)
IMAGE_CALLBACK_URL_REFUSED = Fault(
    "image-callback-url-refused",
    "GEN-IMAGE-05",
    "an image submit with callback_url (the legacy flat body) is refused with 400",
)
IMAGE_WEBHOOK_EVENTS_REFUSED = Fault(
    "image-webhook-events-refused",
    "GEN-IMAGE-06",
    "an image submit whose webhook object lists events is refused with 400",
)
EDIT_CALLBACK_URL_REFUSED = Fault(
    "edit-callback-url-refused",
    "GEN-EDIT-01",
    "an image edit with callback_url is refused with 400 (only webhook is taken)",
)
VIDEO_DURATION_REQUIRED = Fault(
    "video-duration-required",
    "GEN-VIDEO-02",
    "a video submit without duration is refused with 400",
)
VIDEO_WEBHOOK_REFUSED = Fault(
    "video-webhook-refused",
    "GEN-VIDEO-06",
    "a video submit with a webhook object is refused with 400 (only callback_url is taken)",
)
IMAGE_SIZE_1K_REFUSED = Fault(
    "image-size-1k-refused",
    "GEN-IMAGE-04",
    "an image submit with size 1K is refused with 400",
)
VIDEO_INTEGER_DURATION_REFUSED = Fault(
    "video-integer-duration-refused",
    "GEN-VIDEO-03",
    "a video submit whose duration is a whole number is refused with 400",
)
VIDEO_RESOLUTION_720P_REFUSED = Fault(
    "video-resolution-720p-refused",
    "GEN-VIDEO-05",
    "a video submit with resolution 720p is refused with 400",
)
IMAGE_MODEL_REQUIRED = Fault(
    "image-model-required",
    "GEN-IMAGE-09",
    "an image submit without a model field (a field §4 does not show) is refused with 400",
)
VIDEO_IMAGE_INPUT_REQUIRED = Fault(
    "video-image-input-required",
    "GEN-VIDEO-08",
    "a video submit without an input image (image_url) is refused with 400",
)
LONG_PROMPT_SERVER_ERROR = Fault(
    "long-prompt-server-error",
    "GEN-SIZE-01",
    "a submit whose prompt is over the longest accepted is answered 500",
)

#: Each body fault of the submit endpoints: the operation it acts on, and the reason it
#: refuses a body with (None lets the body through).
_BODY_REFUSALS: tuple[tuple[Fault, str, Callable[[Mapping[str, Any]], str | None]], ...] = (
    (IMAGE_SIZE_REQUIRED, "images.generate",
     lambda body: None if "size" in body else "`size` is required"),
    (IMAGE_CALLBACK_URL_REFUSED, "images.generate",
     lambda body: "callback_url is no longer accepted: use webhook.url"
     if "callback_url" in body else None),
    (IMAGE_WEBHOOK_EVENTS_REFUSED, "images.generate",
     lambda body: "webhook takes `id` or `url` only"
     if isinstance(body.get("webhook"), dict) and "events" in body["webhook"] else None),
    (EDIT_CALLBACK_URL_REFUSED, "images.edit",
     lambda body: "edits take webhook, not callback_url" if "callback_url" in body else None),
    (VIDEO_DURATION_REQUIRED, "videos.generate",
     lambda body: None if "duration" in body else "`duration` is required"),
    (VIDEO_WEBHOOK_REFUSED, "videos.generate",
     lambda body: "videos take callback_url, not webhook" if "webhook" in body else None),
    (IMAGE_SIZE_1K_REFUSED, "images.generate",
     lambda body: "size 1K is not offered" if body.get("size") == "1K" else None),
    (VIDEO_INTEGER_DURATION_REFUSED, "videos.generate",
     lambda body: "`duration` must be a decimal number of seconds"
     if type(body.get("duration")) is int else None),
    (VIDEO_RESOLUTION_720P_REFUSED, "videos.generate",
     lambda body: "resolution 720p is not offered" if body.get("resolution") == "720p" else None),
    (IMAGE_MODEL_REQUIRED, "images.generate",
     lambda body: None if "model" in body else "`model` is required"),
    (VIDEO_IMAGE_INPUT_REQUIRED, "videos.generate",
     lambda body: None if "image_url" in body else "an input image (`image_url`) is required"),
)  # fmt: skip


@dataclass(frozen=True)
class Operation:
    """One submit endpoint: its path, scope, generation type and accepted optional fields."""

    path: str
    name: str
    scope: str
    type: str
    default_model: str
    string_fields: tuple[str, ...] = ()
    number_fields: tuple[str, ...] = ()
    #: Spec §6: events apply to image and video generations; the extensions take no target.
    accepts_target: bool = True


OPERATIONS: tuple[Operation, ...] = (
    Operation("/v1/images/generate", "images.generate", "images:generate", "image", "image-1",
              string_fields=("size",)),
    Operation("/v1/images/edit", "images.edit", "images:edit", "image", "image-1",
              string_fields=("size", "image", "mask")),
    Operation("/v1/videos/generate", "videos.generate", "videos:generate", "video", "video-1",
              string_fields=("resolution", "image"), number_fields=("duration",)),
    Operation("/v1/audio/generate", "audio.generate", "audio:generate", "audio", "audio-1",
              string_fields=("voice", "format"), number_fields=("duration",),
              accepts_target=False),
    Operation("/v1/agents/run", "agents.run", "agent:run", "agent", "agent-1",
              accepts_target=False),
)  # fmt: skip


def _check_string(body: Mapping[str, Any], field: str) -> str | None:
    value = body.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(400, f"`{field}` must be a string, not {_json_type(value)}")
    if not value.strip():
        raise ApiError(400, f"`{field}` must not be empty")
    if len(value) > 2048:
        raise ApiError(400, f"`{field}` is too long (at most 2048 characters)")
    return value


def _check_number(body: Mapping[str, Any], field: str) -> float | None:
    value = body.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ApiError(400, f"`{field}` must be a number (seconds), not {_json_type(value)}")
    if not math.isfinite(value) or value <= 0 or value > 600:
        raise ApiError(400, f"`{field}` must be a positive number of seconds, at most 600")
    return value


def _json_type(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string",
             list: "an array", dict: "an object", type(None): "null"}  # fmt: skip
    return names.get(type(value), type(value).__name__)


#: The choice ``body_values = "strict"``: the label forms the spec shows (§4: "a digit
#: followed by K", "a number followed by p"), integer durations, shorter prompts.
_STRICT_LABELS = {"size": re.compile(r"[1-9][0-9]?K"), "resolution": re.compile(r"[0-9]{3,4}p")}
_STRICT_MAX_DURATION_S = 60
_STRICT_MAX_PROMPT_CHARS = 4000


def validate_body(
    operation: Operation, body: Mapping[str, Any], choices: Choices | None = None
) -> tuple[str, str, dict[str, Any]]:
    """Prompt, model and accepted optional fields of a submit body, or 400.

    Unknown fields are tolerated (the spec leaves other fields "not shown"), unless the
    choice ``unknown_body_fields`` refuses them; the fields the reference knows are
    type-checked, and with ``body_values = "strict"`` held to narrower values.
    """
    choices = choices or Choices()
    strict = choices.body_values == "strict"
    if choices.unknown_body_fields == "refuse":
        known = {"prompt", *operation.string_fields, *operation.number_fields}
        if operation.accepts_target:
            known |= {"callback_url", "webhook"}
        unknown = sorted(set(body) - known)
        if unknown:
            raise ApiError(400, f"unknown field(s) {unknown}; this endpoint takes {sorted(known)}")
    prompt = body.get("prompt")
    if prompt is None:
        raise ApiError(400, "`prompt` is required: a non-empty string")
    if not isinstance(prompt, str):
        raise ApiError(400, f"`prompt` must be a string, not {_json_type(prompt)}")
    if not prompt.strip():
        raise ApiError(400, "`prompt` must not be empty")
    longest = _STRICT_MAX_PROMPT_CHARS if strict else MAX_PROMPT_CHARS
    if len(prompt) > longest:
        raise ApiError(400, f"`prompt` is too long: at most {longest} characters")
    model = _check_string(body, "model") or operation.default_model
    params: dict[str, Any] = {}
    for field in operation.string_fields:
        text = _check_string(body, field)
        if text is not None:
            label = _STRICT_LABELS.get(field)
            if strict and label is not None and not label.fullmatch(text):
                raise ApiError(400, f"`{field}` must match {label.pattern}, not {text!r}")
            params[field] = text
    for field in operation.number_fields:
        number = _check_number(body, field)
        if number is not None:
            if strict and not (isinstance(number, int) and 1 <= number <= _STRICT_MAX_DURATION_S):
                raise ApiError(
                    400, f"`{field}` must be a whole number of seconds, 1 to 60, not {number}"
                )
            params[field] = number
    if not operation.accepts_target:
        for field in ("webhook", "callback_url"):
            if body.get(field) is not None:
                raise ApiError(
                    400,
                    f"`{field}` is not accepted here: delivery targets apply to image and "
                    "video generations (spec §6); poll GET /v1/generations/{id} instead",
                )
    return prompt, model, params


#: Longest prompt accepted (spec §8: not shown; an interpretation).
MAX_PROMPT_CHARS = 32_000


def faulty_body(faults: Faults, operation: Operation, body: dict[str, Any]) -> dict[str, Any]:
    """The submit body as a service with the body faults reads it (each of these faults
    skips one stated check of spec §4's body tables)."""
    if faults.on(BLANK_PROMPT_SERVER_ERROR) and body.get("prompt") == "":
        raise ApiError(500, "internal error")  # bad input reaching a 5xx
    prompt = body.get("prompt")
    if faults.on(LONG_PROMPT_SERVER_ERROR) and len(str(prompt)) > MAX_PROMPT_CHARS:
        raise ApiError(500, "internal error")  # a prompt past the limit reaching a 5xx
    if faults.on(JSON_BODY_ASCII_ONLY) and not json.dumps(body, ensure_ascii=False).isascii():
        raise ApiError(400, "the request body is not valid ASCII")
    for fault, name, refusal in _BODY_REFUSALS:
        reason = refusal(body) if operation.name == name and faults.on(fault) else None
        if reason is not None:
            raise ApiError(400, reason)
    if operation.name == "images.generate":
        if "prompt" not in body and faults.on(IMAGE_PROMPT_OPTIONAL):
            return {**body, "prompt": "untitled"}
        if prompt is not None and not isinstance(prompt, str):
            if faults.on(IMAGE_PROMPT_ANY_TYPE):
                return {**body, "prompt": json.dumps(prompt)}
    if operation.name == "videos.generate":
        if "prompt" not in body and faults.on(VIDEO_PROMPT_OPTIONAL):
            body = {**body, "prompt": "untitled"}
        duration = body.get("duration")
        if "duration" in body and (
            isinstance(duration, bool) or not isinstance(duration, int | float)
        ):
            if faults.on(VIDEO_DURATION_ANY_TYPE):
                body = {k: v for k, v in body.items() if k != "duration"}
    return body
