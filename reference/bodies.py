"""Reading request bodies safely: JSON objects only, bounded in size.

Every handler that takes a body (core and webhooks) reads it through
:func:`read_json_object`, so a bad body always gets a 4xx with a useful ``detail`` and
never a 5xx: wrong or missing content type → 415 (unless the choice
``body_content_type`` assumes JSON), more than ``max_body_bytes`` → 413
(checked on Content-Length first, then while streaming, so a chunked body cannot get
around it), undecodable or non-JSON → 400, a JSON value that is not an object → 400.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import ClientDisconnect, Request

from reference.errors import ApiError

__all__ = ["DEFAULT_MAX_BODY_BYTES", "read_json_object"]

DEFAULT_MAX_BODY_BYTES = 1024 * 1024


def _limit(request: Request) -> int:
    config = getattr(request.app.state, "config", None)
    limit: int = getattr(config, "max_body_bytes", DEFAULT_MAX_BODY_BYTES)
    return limit


def _content_type_assumed(request: Request) -> bool:
    """The choice ``body_content_type = "assumed"``: any body is read as JSON."""
    config = getattr(request.app.state, "config", None)
    return config is not None and config.choices.body_content_type == "assumed"


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"request body too large: the limit is {limit} bytes")


async def read_json_object(request: Request) -> dict[str, Any]:
    """The request body as a JSON object, or an :class:`ApiError` (400, 413, 415)."""
    content_type = request.headers.get("content-type", "")
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type != "application/json" and not _content_type_assumed(request):
        shown = media_type or "none"
        raise ApiError(
            415, f"send the body as JSON with `Content-Type: application/json` (got {shown})"
        )
    limit = _limit(request)
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
    except ClientDisconnect as exc:
        raise ApiError(400, "the client closed the connection before the body arrived") from exc
    raw = b"".join(chunks)
    if not raw.strip():
        raise ApiError(400, "the request body is empty: send a JSON object")
    try:
        # JSON text must be UTF-8 (RFC 8259 §8.1); json.loads also accepts UTF-16/32.
        text = raw.decode("utf-8")
        body = json.loads(text)
    except UnicodeDecodeError as exc:
        raise ApiError(400, "the request body is not valid UTF-8") from exc
    except json.JSONDecodeError as exc:
        raise ApiError(
            400, f"malformed JSON body: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    except RecursionError as exc:
        raise ApiError(400, "malformed JSON body: nested too deeply") from exc
    except ValueError as exc:
        # e.g. an integer literal beyond Python's int/str conversion limit (4300 digits).
        raise ApiError(400, f"unacceptable JSON body: {exc}") from exc
    if not isinstance(body, dict):
        raise ApiError(400, f"the body must be a JSON object, not {type(body).__name__}")
    return body
