"""Faults of events, envelopes, delivery headers and signatures (spec §2, §4, §5.6, §6).

The suite's event checks (``conformance/checks/test_events_*.py``, ``test_envelope_*``,
``test_delivery_headers.py``, ``test_signature_*``) must catch each of these;
``reference/faults.py`` registers them with the requirement id each one breaks. The
service asks :func:`active` first, so with none of them on nothing here runs.

Where one statement cannot be broken alone (an envelope without a JSON object for
``data`` also lacks every data field), the fault breaks its own requirement first and
the others only as a consequence.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any, Final
from weakref import WeakKeyDictionary

from reference.faults import Faults

__all__ = [
    "NAMES",
    "active",
    "body",
    "envelope",
    "event_id",
    "known_events_only",
    "rewrite_request",
    "secret",
    "sent_anyway",
    "suppressed",
]

#: Every fault this module implements (each registered in reference/faults.py).
NAMES: Final = frozenset(
    {
        # which events are sent (spec §6 Events)
        "cancelled-never-sent",
        "completed-not-sent-by-default",
        "failed-not-sent-by-default",
        "image-events-not-sent",
        "video-events-not-sent",
        "edit-events-not-sent",
        "events-added-to-defaults",
        "unknown-event-names-accepted",
        # the envelope and its data (spec §2 Event envelope, §9)
        "api-version-not-string",
        "api-version-varies",
        "api-version-wrong",
        "credits-used-not-integer",
        "data-generation-id-wrong",
        "data-model-not-string",
        "data-not-object",
        "data-status-wrong",
        "data-type-wrong",
        "error-message-empty-on-failure",
        "error-message-on-success",
        "event-field-wrong",
        "event-id-not-evt-hex",
        "output-url-null-on-success",
        "webhook-id-null-registered",
        "cancelled-status-wrong",
        "failed-credits-not-zero",
        "output-url-relative",
        # body shapes (spec §4 rule 2, §6 Delivery request)
        "body-not-json-object",
        "callback-body-without-webhook-id",
        "inline-body-flattened",
        "output-url-missing-in-callback-data",
        "registered-body-flattened",
        # the delivery request (spec §6 Delivery request)
        "attempt-header-constant",
        "attempt-header-from-zero",
        "content-type-text-plain",
        "delivery-method-put",
        "event-header-mismatch",
        "generation-header-mismatch",
        "signature-header-reordered",
        "headers-branded",
        # signatures and secrets (spec §5.6, §6 Signature)
        "per-key-secret-rotates",
        "per-key-secret-shared",
        "registered-signed-with-key-secret",
        "retries-signed-wrongly",
        "signature-hmac-sha512",
        "signature-hex-uppercase",
        "signature-standard-webhooks-keying",
        "signature-timestamp-milliseconds",
        "retry-timestamp-stale",
    }
)


def active(faults: Faults) -> bool:
    """Whether any fault of this module is on (one set intersection)."""
    return bool(faults.enabled & NAMES)


# -- which events are sent ---------------------------------------------------------------


def suppressed(
    faults: Faults,
    event: str,
    generation_type: str,
    events: tuple[str, ...],
    default: bool,
    operation: str = "",
) -> bool:
    """Whether a fault drops this event. *default*: the binding named no events."""
    if faults.on("edit-events-not-sent") and operation == "images.edit":
        return True
    if faults.on("image-events-not-sent") and generation_type == "image":
        return True
    if faults.on("video-events-not-sent") and generation_type == "video":
        return True
    if faults.on("cancelled-never-sent") and event == "generation.cancelled":
        return True
    if default and faults.on("completed-not-sent-by-default"):
        return event == "generation.completed"
    if default and faults.on("failed-not-sent-by-default"):
        return event == "generation.failed"
    return False


def sent_anyway(faults: Faults, event: str, events: tuple[str, ...]) -> bool:
    """Whether a fault sends an event the binding did not subscribe to: the listed events
    added to the defaults instead of replacing them."""
    defaults = ("generation.completed", "generation.failed")
    return faults.on("events-added-to-defaults") and event in defaults


def known_events_only(faults: Faults, value: Any, known: tuple[str, ...]) -> Any:
    """An events field with unknown names silently dropped (under its fault)."""
    if faults.on("unknown-event-names-accepted") and isinstance(value, list):
        kept = [item for item in value if item in known]
        return kept or None
    return value


def event_id(faults: Faults, honest: str) -> str:
    """The event (and delivery) id: not of the evt_<hex> form under its fault."""
    if faults.on("event-id-not-evt-hex"):
        return "event-" + honest.removeprefix("evt_")
    return honest


# -- the envelope ------------------------------------------------------------------------


def envelope(faults: Faults, built: dict[str, Any], mode: str) -> dict[str, Any]:
    """The envelope with the on faults applied (spec §2 Event envelope, §9)."""
    changed = dict(built)
    data = dict(changed["data"])
    failed = data.get("status") == "failed"
    completed = data.get("status") == "completed"
    if faults.on("event-field-wrong"):
        changed["event"] = str(changed["event"]).removeprefix("generation.")
    if faults.on("api-version-not-string"):
        changed["api_version"] = 20260801
    if faults.on("api-version-wrong"):
        changed["api_version"] = "2025-01-01"
    if faults.on("api-version-varies") and failed:
        changed["api_version"] = "2026-09-01"
    if faults.on("webhook-id-null-registered") and mode == "registered":
        changed["webhook_id"] = None
    if faults.on("data-generation-id-wrong"):
        data["generation_id"] = "gen_" + secrets.token_hex(12)
    if faults.on("data-status-wrong") and completed:
        data["status"] = "succeeded"
    if faults.on("data-type-wrong"):
        data["type"] = "image"
    if faults.on("data-model-not-string"):
        data["model"] = None
    if faults.on("output-url-null-on-success") and completed:
        data["output_url"] = None
    if faults.on("error-message-on-success") and completed:
        data["error_message"] = "no error"
    if faults.on("error-message-empty-on-failure") and failed:
        data["error_message"] = ""
    if faults.on("cancelled-status-wrong") and data.get("status") == "cancelled":
        data["status"] = "canceled"
    if faults.on("failed-credits-not-zero") and failed:
        data["credits_used"] = max(1, int(data.get("credits_used") or 0))
    if faults.on("output-url-relative") and isinstance(data.get("output_url"), str):
        data["output_url"] = "/" + str(data["output_url"]).split("/", 3)[-1]
    if faults.on("credits-used-not-integer"):
        data["credits_used"] = str(data.get("credits_used"))
    changed["data"] = data
    return changed


def body(
    faults: Faults,
    built: dict[str, Any],
    honest: Mapping[str, Any],
    mode: str,
    flatten: Callable[[Mapping[str, Any]], dict[str, Any]],
) -> Any:
    """The delivered body with the on faults applied (spec §4 rule 2, §6)."""
    result: Any = dict(honest)
    if faults.on("inline-body-flattened") and mode == "inline":
        result = flatten(built)
    if faults.on("callback-body-without-webhook-id") and mode == "callback":
        result.pop("webhook_id", None)
    if faults.on("output-url-missing-in-callback-data") and mode == "callback":
        data = dict(result["data"])
        data.pop("output_url", None)
        result["data"] = data
    if faults.on("registered-body-flattened") and mode == "registered":
        result = flatten(built)
    if faults.on("data-not-object"):  # after flattening, which reads data as an object
        data = result["data"]
        result["data"] = " ".join(f"{k}={v}" for k, v in data.items())
    if faults.on("body-not-json-object"):
        result = [result]
    return result


# -- the delivery request ----------------------------------------------------------------


def _signature(
    secret_value: str | bytes, timestamp: int | str, raw: bytes, algorithm: str = "sha256"
) -> str:
    key = secret_value if isinstance(secret_value, bytes) else secret_value.encode("utf-8")
    digest = hmac.new(key, f"{timestamp}.".encode("ascii") + raw, algorithm).hexdigest()[:64]
    return f"t={timestamp},v1={digest}"


def _standard_webhooks_key(secret_value: str) -> bytes:
    """The Standard Webhooks keying: strip whsec_ and base64-decode the rest (either
    alphabet, padding restored); the stripped text when it does not decode."""
    rest = secret_value.removeprefix("whsec_")
    padded = rest + "=" * (-len(rest) % 4)
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            return decode(padded.encode("ascii"))
        except (binascii.Error, ValueError):
            continue
    return rest.encode("utf-8")


#: The t of each delivery's first attempt (for retry-timestamp-stale).
_FIRST_T: dict[str, int] = {}


def rewrite_request(
    faults: Faults,
    method: str,
    headers: dict[str, str],
    *,
    attempt: int,
    body: bytes,
    secret_value: str,
    delivery_id: str = "",
) -> tuple[str, dict[str, str]]:
    """The method and headers of one attempt with the on faults applied (spec §6)."""
    changed = dict(headers)
    if faults.on("delivery-method-put"):
        method = "PUT"
    if faults.on("content-type-text-plain"):
        changed["Content-Type"] = "text/plain"
    if faults.on("event-header-mismatch"):
        changed["X-Service-Event"] = "generation.completed"
    if faults.on("attempt-header-from-zero"):
        changed["X-Service-Attempt"] = str(attempt - 1)
    if faults.on("attempt-header-constant"):
        changed["X-Service-Attempt"] = "1"
    if faults.on("generation-header-mismatch"):
        changed["X-Service-Generation"] = "gen_" + secrets.token_hex(12)
    timestamp = int(time.time())
    if faults.on("signature-standard-webhooks-keying"):
        key = _standard_webhooks_key(secret_value)
        changed["X-Service-Signature"] = _signature(key, timestamp, body)
    if faults.on("signature-timestamp-milliseconds"):
        millis = int(time.time() * 1000)
        changed["X-Service-Signature"] = _signature(secret_value, millis, body)
    if faults.on("retry-timestamp-stale"):
        first = _FIRST_T.setdefault(delivery_id, timestamp - 10)
        changed["X-Service-Signature"] = _signature(secret_value, first, body)
    if faults.on("signature-hex-uppercase"):
        t_part, v1_part = changed["X-Service-Signature"].split(",")
        changed["X-Service-Signature"] = f"{t_part},{v1_part.upper().replace('V1=', 'v1=')}"
    if faults.on("signature-hmac-sha512"):
        changed["X-Service-Signature"] = _signature(secret_value, timestamp, body, "sha512")
    if faults.on("retries-signed-wrongly") and attempt > 1:
        changed["X-Service-Signature"] = _signature(secret_value + "-retry", timestamp, body)
    if faults.on("signature-header-reordered"):
        t_part, v1_part = changed["X-Service-Signature"].split(",")
        changed["X-Service-Signature"] = f"{v1_part},{t_part}"
    if faults.on("headers-branded"):
        changed = {
            (
                "X-Acme-" + name.removeprefix("X-Service-")
                if name.startswith("X-Service-")
                else name
            ): value
            for name, value in changed.items()
        }
    return method, changed


# -- secrets -----------------------------------------------------------------------------

#: Keys that have signed a delivery, per running service (for per-key-secret-rotates).
_SIGNED: WeakKeyDictionary[Faults, set[str]] = WeakKeyDictionary()


def secret(
    faults: Faults,
    *,
    honest: str,
    key_id: str | None,
    registered: bool,
    per_key: Callable[[str], str],
    first_key_of_account: Callable[[str], str],
) -> str:
    """The signing secret of a delivery with the on faults applied (spec §5.6).

    *per_key* gives a key id's per-key secret; *first_key_of_account* the oldest key id
    of the account a key id belongs to.
    """
    if key_id is None:
        return honest
    if registered:
        return per_key(key_id) if faults.on("registered-signed-with-key-secret") else honest
    if faults.on("per-key-secret-shared"):
        return per_key(first_key_of_account(key_id))
    if faults.on("per-key-secret-rotates"):
        signed = _SIGNED.setdefault(faults, set())
        if key_id in signed:
            return hashlib.sha256(f"{honest}:rotated".encode()).hexdigest()
        signed.add(key_id)
    return honest
