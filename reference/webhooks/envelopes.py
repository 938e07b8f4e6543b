"""Event names and the bodies a delivery carries (spec §2 "Event envelope", §4, §6).

A body is serialized ONCE, when the event is enqueued, and the exact bytes are stored:
every automatic retry and every redelivery sends the same bytes and the same event id
(spec §3: redeliver "reuses the original payload and event id"), and the signature of
each attempt is computed over those stored bytes.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final

from genapi_spec import API_VERSION

__all__ = [
    "ALL_EVENTS",
    "DEFAULT_EVENTS",
    "EVENT_CANCELLED",
    "EVENT_COMPLETED",
    "EVENT_FAILED",
    "EVENT_FOR_STATUS",
    "TEST_EVENT",
    "body_bytes",
    "build_envelope",
    "callback_body",
    "event_data",
    "new_event_id",
    "timestamp_now",
]

EVENT_COMPLETED: Final = "generation.completed"
EVENT_FAILED: Final = "generation.failed"
EVENT_CANCELLED: Final = "generation.cancelled"
#: Sent when a binding does not name its events (spec §6: completed and failed by default).
DEFAULT_EVENTS: Final = (EVENT_COMPLETED, EVENT_FAILED)
#: Every event name a binding or a registered webhook may subscribe to.
ALL_EVENTS: Final = (EVENT_COMPLETED, EVENT_FAILED, EVENT_CANCELLED)
#: Extension (not in the spec): the event of a console test delivery.
TEST_EVENT: Final = "webhook.test"
#: Final generation status -> the event it fires.
EVENT_FOR_STATUS: Final[Mapping[str, str]] = {
    "completed": EVENT_COMPLETED,
    "failed": EVENT_FAILED,
    "cancelled": EVENT_CANCELLED,
}


def new_event_id() -> str:
    """``evt_`` followed by 32 hex digits (spec §2: form ``evt_<hex>``)."""
    return f"evt_{secrets.token_hex(16)}"


def timestamp_now(*, with_offset: bool = True, form: str = "offset-ms") -> str:
    """ISO 8601 UTC timestamp with millisecond precision and an explicit ``+00:00``, or
    for ``form="z-seconds"`` (the choice ``timestamp_form``) whole seconds and ``Z``.

    ``with_offset=False`` exists only for the fault that drops the offset (spec §2
    requires "ISO 8601 timestamp with offset").
    """
    now = datetime.now(UTC)
    if not with_offset:
        now = now.replace(tzinfo=None)
    elif form == "z-seconds":
        return now.strftime("%Y-%m-%dT%H:%M:%SZ")
    return now.isoformat(timespec="milliseconds")


def event_data(generation: Mapping[str, Any]) -> dict[str, Any]:
    """The ``data`` object of an envelope from the generation record (spec §2).

    The values are copied as the generation core recorded them (null output_url on
    failure, null error_message on success, credits_used after any refund): the envelope
    must agree with what GET /v1/generations/{id} shows.
    """
    return {
        "generation_id": str(generation["id"]),
        "status": str(generation["status"]),
        "type": str(generation["type"]),
        "model": str(generation["model"]),
        "output_url": generation.get("output_url"),
        "error_message": generation.get("error_message"),
        "credits_used": int(generation.get("credits_used") or 0),
    }


def build_envelope(
    *,
    event_id: str,
    event: str,
    data: Mapping[str, Any],
    webhook_id: str | None,
    created_at: str,
    api_version: str | None = API_VERSION,
) -> dict[str, Any]:
    """The strict event envelope (spec §2): id, event, created_at, api_version, webhook_id,
    data. ``api_version=None`` drops the field (only for a fault)."""
    envelope: dict[str, Any] = {
        "id": event_id,
        "event": event,
        "created_at": created_at,
    }
    if api_version is not None:
        envelope["api_version"] = api_version
    envelope["webhook_id"] = webhook_id
    envelope["data"] = dict(data)
    return envelope


def callback_body(envelope: Mapping[str, Any]) -> dict[str, Any]:
    """The legacy ``callback_url`` body: the envelope plus every data field copied to the
    top level (spec §4 "Target selection rules", item 2)."""
    body = dict(envelope)
    for name, value in envelope["data"].items():
        body.setdefault(name, value)
    return body


def body_bytes(body: Mapping[str, Any]) -> bytes:
    """Serialize a body once: compact separators, UTF-8, no trailing newline."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
