"""Faults of events, envelopes, delivery headers and signatures (spec §2, §4, §5.6, §6).

The suite's event checks (``conformance/checks/test_events_*.py``, ``test_envelope_*``,
``test_delivery_headers.py``, ``test_signature_*``) must catch each of these; each names
the requirement id it breaks. The service asks :func:`active` first, so with none of them
on nothing here runs.

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

from reference.fault import Fault, Faults, declared_in

__all__ = [
    "DECLARED",
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

# Which events are sent (spec §6 Events).
CANCELLED_NEVER_SENT = Fault(
    "cancelled-never-sent",
    "EVT-CANCEL-02",
    "generation.cancelled is never sent, even when subscribed",
)
COMPLETED_NOT_SENT_BY_DEFAULT = Fault(
    "completed-not-sent-by-default",
    "EVT-DEFAULT-01",
    "without an events field, generation.completed is not sent",
)
FAILED_NOT_SENT_BY_DEFAULT = Fault(
    "failed-not-sent-by-default",
    "EVT-DEFAULT-02",
    "without an events field, generation.failed is not sent",
)
IMAGE_EVENTS_NOT_SENT = Fault(
    "image-events-not-sent",
    "EVT-APPLY-02",
    "image generations send no events",
)
VIDEO_EVENTS_NOT_SENT = Fault(
    "video-events-not-sent",
    "EVT-APPLY-01",
    "video generations send no events",
)
EDIT_EVENTS_NOT_SENT = Fault(
    "edit-events-not-sent",
    "EVT-APPLY-03",
    "image edits send no events",
)
EVENTS_ADDED_TO_DEFAULTS = Fault(
    "events-added-to-defaults",
    "EVT-SUB-01",
    "listed events are sent in addition to completed and failed",
)
UNKNOWN_EVENT_NAMES_ACCEPTED = Fault(
    "unknown-event-names-accepted",
    "EVT-SUB-02",
    "unknown names in webhook.events are dropped silently",
)

# The envelope and its data (spec §2 Event envelope, §9).
API_VERSION_NOT_STRING = Fault(
    "api-version-not-string",
    "EVT-ENV-04",
    "the envelope's api_version is an integer",
)
API_VERSION_VARIES = Fault(
    "api-version-varies",
    "VER-ENV-03",
    "generation.failed envelopes carry another api_version",
)
API_VERSION_WRONG = Fault(
    "api-version-wrong",
    "VER-ENV-02",
    "the envelope's api_version is 2025-01-01",
)
CREDITS_USED_NOT_INTEGER = Fault(
    "credits-used-not-integer",
    "EVT-DATA-09",
    "data.credits_used is a string",
)
DATA_GENERATION_ID_WRONG = Fault(
    "data-generation-id-wrong",
    "EVT-DATA-01",
    "data.generation_id is not the submit's id",
)
DATA_MODEL_NOT_STRING = Fault(
    "data-model-not-string",
    "EVT-DATA-04",
    "data.model is null",
)
DATA_NOT_OBJECT = Fault(
    "data-not-object",
    "EVT-ENV-07",
    "the envelope's data is a string",
)
DATA_STATUS_WRONG = Fault(
    "data-status-wrong",
    "EVT-DATA-02",
    "a successful generation's data.status is 'succeeded'",
)
DATA_TYPE_WRONG = Fault(
    "data-type-wrong",
    "EVT-DATA-03",
    "data.type is 'image' for every generation, video too",
)
ERROR_MESSAGE_EMPTY_ON_FAILURE = Fault(
    "error-message-empty-on-failure",
    "EVT-DATA-08",
    "a failed generation's data.error_message is empty",
)
ERROR_MESSAGE_ON_SUCCESS = Fault(
    "error-message-on-success",
    "EVT-DATA-07",
    "a successful generation's data.error_message is set",
)
EVENT_FIELD_WRONG = Fault(
    "event-field-wrong",
    "EVT-ENV-02",
    "the envelope's event drops the generation. prefix",
)
EVENT_ID_NOT_EVT_HEX = Fault(
    "event-id-not-evt-hex",
    "EVT-ENV-01",
    "event ids have the form event-<hex>",
)
OUTPUT_URL_NULL_ON_SUCCESS = Fault(
    "output-url-null-on-success",
    "EVT-DATA-05",
    "a successful generation's data.output_url is null",
)
WEBHOOK_ID_NULL_REGISTERED = Fault(
    "webhook-id-null-registered",
    "EVT-ENV-06",
    "webhook.id deliveries carry webhook_id null",
)
FAILED_STATUS_WRONG = Fault(
    "failed-status-wrong",
    "GEN-STATE-01",
    "generation.failed carries data.status 'error'",
)
CANCELLED_STATUS_WRONG = Fault(
    "cancelled-status-wrong",
    "EVT-CANCEL-03",
    "generation.cancelled carries data.status 'canceled'",
)
CREDITS_USED_MISREPORTED = Fault(
    "credits-used-misreported",
    "CREDIT-PRICE-01",
    "a completed generation's data.credits_used is one more than the credits it spent",
)
FAILED_CREDITS_NOT_ZERO = Fault(
    "failed-credits-not-zero",
    "EVT-DATA-10",
    "a failed generation's data.credits_used is not 0",
)
OUTPUT_URL_RELATIVE = Fault(
    "output-url-relative",
    "EVT-DATA-11",
    "data.output_url is a path, not an absolute URL",
)

# Body shapes (spec §4 rule 2, §6 Delivery request).
BODY_NOT_JSON_OBJECT = Fault(
    "body-not-json-object",
    "DLV-BODY-01",
    "the delivery body is a JSON array holding the envelope",
)
CALLBACK_BODY_WITHOUT_WEBHOOK_ID = Fault(
    "callback-body-without-webhook-id",
    "TARGET-FLAT-01",
    "callback_url bodies lack the envelope's webhook_id",
)
INLINE_BODY_FLATTENED = Fault(
    "inline-body-flattened",
    "TARGET-INLINE-01",
    "webhook.url bodies have the data fields copied to the top",
)
OUTPUT_URL_MISSING_IN_CALLBACK_DATA = Fault(
    "output-url-missing-in-callback-data",
    "TARGET-OUTPUT-01",
    "callback_url bodies lack data.output_url",
)
REGISTERED_BODY_FLATTENED = Fault(
    "registered-body-flattened",
    "TARGET-FLAT-03",
    "webhook.id bodies have the data fields copied to the top",
)

# The delivery request (spec §6 Delivery request).
ATTEMPT_HEADER_CONSTANT = Fault(
    "attempt-header-constant",
    "DLV-HDR-05",
    "every attempt carries X-Service-Attempt: 1",
)
ATTEMPT_HEADER_FROM_ZERO = Fault(
    "attempt-header-from-zero",
    "DLV-HDR-04",
    "X-Service-Attempt counts from 0",
)
CONTENT_TYPE_TEXT_PLAIN = Fault(
    "content-type-text-plain",
    "DLV-HDR-01",
    "deliveries carry Content-Type: text/plain",
)
DELIVERY_METHOD_PUT = Fault(
    "delivery-method-put",
    "DLV-METHOD-01",
    "deliveries are sent with PUT",
)
EVENT_HEADER_MISMATCH = Fault(
    "event-header-mismatch",
    "DLV-HDR-02",
    "X-Service-Event is generation.completed whatever the event",
)
GENERATION_HEADER_MISMATCH = Fault(
    "generation-header-mismatch",
    "DLV-HDR-06",
    "X-Service-Generation is not the generation id",
)
SIGNATURE_HEADER_REORDERED = Fault(
    "signature-header-reordered",
    "DLV-HDR-07",
    "X-Service-Signature is v1=<hex>,t=<unix>",
)
HEADERS_BRANDED = Fault(
    "headers-branded",
    "DLV-HDR-08",
    "delivery headers are named X-Acme-* instead of X-Service-*",
)

# Signatures and secrets (spec §5.6, §6 Signature).
PER_KEY_SECRET_ROTATES = Fault(
    "per-key-secret-rotates",
    "SIG-KEY-02",
    "a key's later deliveries are signed with another secret",
)
PER_KEY_SECRET_SHARED = Fault(
    "per-key-secret-shared",
    "SIG-KEY-03",
    "every key signs with the per-key secret of its account's first key",
)
REGISTERED_SIGNED_WITH_KEY_SECRET = Fault(
    "registered-signed-with-key-secret",
    "SIG-HOOK-01",
    "registered-webhook deliveries are signed with the per-key secret",
)
RETRIES_SIGNED_WRONGLY = Fault(
    "retries-signed-wrongly",
    "SIG-HMAC-02",
    "retries carry a signature that does not verify",
)
SIGNATURE_HMAC_SHA512 = Fault(
    "signature-hmac-sha512",
    "SIG-HMAC-01",
    "v1 is HMAC-SHA512 cut to 64 hex digits, not HMAC-SHA256",
)
SIGNATURE_HEX_UPPERCASE = Fault(
    "signature-hex-uppercase",
    "SIG-HEX-01",
    "the v1 hex digest is uppercase",
)
SIGNATURE_STANDARD_WEBHOOKS_KEYING = Fault(
    "signature-standard-webhooks-keying",
    "SIG-HMAC-03",
    "the HMAC key is the base64-decoded secret after whsec_",
)
SIGNATURE_TIMESTAMP_MILLISECONDS = Fault(
    "signature-timestamp-milliseconds",
    "SIG-TS-01",
    "the signature's t is in milliseconds",
)
RETRY_TIMESTAMP_STALE = Fault(
    "retry-timestamp-stale",
    "SIG-TS-02",
    "every attempt is signed with the t of the first",
)


#: Every fault above (what :func:`active` asks about).
DECLARED: Final = declared_in(globals())


def active(faults: Faults) -> bool:
    """Whether any fault of this module is on (one set intersection)."""
    return faults.any_on(DECLARED)


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
    if faults.on(EDIT_EVENTS_NOT_SENT) and operation == "images.edit":
        return True
    if faults.on(IMAGE_EVENTS_NOT_SENT) and generation_type == "image":
        return True
    if faults.on(VIDEO_EVENTS_NOT_SENT) and generation_type == "video":
        return True
    if faults.on(CANCELLED_NEVER_SENT) and event == "generation.cancelled":
        return True
    if default and faults.on(COMPLETED_NOT_SENT_BY_DEFAULT):
        return event == "generation.completed"
    if default and faults.on(FAILED_NOT_SENT_BY_DEFAULT):
        return event == "generation.failed"
    return False


def sent_anyway(faults: Faults, event: str, events: tuple[str, ...]) -> bool:
    """Whether a fault sends an event the binding did not subscribe to: the listed events
    added to the defaults instead of replacing them."""
    defaults = ("generation.completed", "generation.failed")
    return faults.on(EVENTS_ADDED_TO_DEFAULTS) and event in defaults


def known_events_only(faults: Faults, value: Any, known: tuple[str, ...]) -> Any:
    """An events field with unknown names silently dropped (under its fault)."""
    if faults.on(UNKNOWN_EVENT_NAMES_ACCEPTED) and isinstance(value, list):
        kept = [item for item in value if item in known]
        return kept or None
    return value


def event_id(faults: Faults, honest: str) -> str:
    """The event (and delivery) id: not of the evt_<hex> form under its fault."""
    if faults.on(EVENT_ID_NOT_EVT_HEX):
        return "event-" + honest.removeprefix("evt_")
    return honest


# -- the envelope ------------------------------------------------------------------------


def envelope(faults: Faults, built: dict[str, Any], mode: str) -> dict[str, Any]:
    """The envelope with the on faults applied (spec §2 Event envelope, §9)."""
    changed = dict(built)
    data = dict(changed["data"])
    failed = data.get("status") == "failed"
    completed = data.get("status") == "completed"
    if faults.on(EVENT_FIELD_WRONG):
        changed["event"] = str(changed["event"]).removeprefix("generation.")
    if faults.on(API_VERSION_NOT_STRING):
        changed["api_version"] = 20260801
    if faults.on(API_VERSION_WRONG):
        changed["api_version"] = "2025-01-01"
    if faults.on(API_VERSION_VARIES) and failed:
        changed["api_version"] = "2026-09-01"
    if faults.on(WEBHOOK_ID_NULL_REGISTERED) and mode == "registered":
        changed["webhook_id"] = None
    if faults.on(DATA_GENERATION_ID_WRONG):
        data["generation_id"] = "gen_" + secrets.token_hex(12)
    if faults.on(DATA_STATUS_WRONG) and completed:
        data["status"] = "succeeded"
    if faults.on(DATA_TYPE_WRONG):
        data["type"] = "image"
    if faults.on(DATA_MODEL_NOT_STRING):
        data["model"] = None
    if faults.on(OUTPUT_URL_NULL_ON_SUCCESS) and completed:
        data["output_url"] = None
    if faults.on(ERROR_MESSAGE_ON_SUCCESS) and completed:
        data["error_message"] = "no error"
    if faults.on(ERROR_MESSAGE_EMPTY_ON_FAILURE) and failed:
        data["error_message"] = ""
    if faults.on(FAILED_STATUS_WRONG) and failed:
        data["status"] = "error"
    if faults.on(CANCELLED_STATUS_WRONG) and data.get("status") == "cancelled":
        data["status"] = "canceled"
    if faults.on(CREDITS_USED_MISREPORTED) and completed:
        data["credits_used"] = int(data.get("credits_used") or 0) + 1
    if faults.on(FAILED_CREDITS_NOT_ZERO) and failed:
        data["credits_used"] = max(1, int(data.get("credits_used") or 0))
    if faults.on(OUTPUT_URL_RELATIVE) and isinstance(data.get("output_url"), str):
        data["output_url"] = "/" + str(data["output_url"]).split("/", 3)[-1]
    if faults.on(CREDITS_USED_NOT_INTEGER):
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
    if faults.on(INLINE_BODY_FLATTENED) and mode == "inline":
        result = flatten(built)
    if faults.on(CALLBACK_BODY_WITHOUT_WEBHOOK_ID) and mode == "callback":
        result.pop("webhook_id", None)
    if faults.on(OUTPUT_URL_MISSING_IN_CALLBACK_DATA) and mode == "callback":
        data = dict(result["data"])
        data.pop("output_url", None)
        result["data"] = data
    if faults.on(REGISTERED_BODY_FLATTENED) and mode == "registered":
        result = flatten(built)
    if faults.on(DATA_NOT_OBJECT):  # after flattening, which reads data as an object
        data = result["data"]
        result["data"] = " ".join(f"{k}={v}" for k, v in data.items())
    if faults.on(BODY_NOT_JSON_OBJECT):
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


#: The t of each delivery's first attempt (for RETRY_TIMESTAMP_STALE).
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
    if faults.on(DELIVERY_METHOD_PUT):
        method = "PUT"
    if faults.on(CONTENT_TYPE_TEXT_PLAIN):
        changed["Content-Type"] = "text/plain"
    if faults.on(EVENT_HEADER_MISMATCH):
        changed["X-Service-Event"] = "generation.completed"
    if faults.on(ATTEMPT_HEADER_FROM_ZERO):
        changed["X-Service-Attempt"] = str(attempt - 1)
    if faults.on(ATTEMPT_HEADER_CONSTANT):
        changed["X-Service-Attempt"] = "1"
    if faults.on(GENERATION_HEADER_MISMATCH):
        changed["X-Service-Generation"] = "gen_" + secrets.token_hex(12)
    timestamp = int(time.time())
    if faults.on(SIGNATURE_STANDARD_WEBHOOKS_KEYING):
        key = _standard_webhooks_key(secret_value)
        changed["X-Service-Signature"] = _signature(key, timestamp, body)
    if faults.on(SIGNATURE_TIMESTAMP_MILLISECONDS):
        millis = int(time.time() * 1000)
        changed["X-Service-Signature"] = _signature(secret_value, millis, body)
    if faults.on(RETRY_TIMESTAMP_STALE):
        first = _FIRST_T.setdefault(delivery_id, timestamp - 10)
        changed["X-Service-Signature"] = _signature(secret_value, first, body)
    if faults.on(SIGNATURE_HEX_UPPERCASE):
        t_part, v1_part = changed["X-Service-Signature"].split(",")
        changed["X-Service-Signature"] = f"{t_part},{v1_part.upper().replace('V1=', 'v1=')}"
    if faults.on(SIGNATURE_HMAC_SHA512):
        changed["X-Service-Signature"] = _signature(secret_value, timestamp, body, "sha512")
    if faults.on(RETRIES_SIGNED_WRONGLY) and attempt > 1:
        changed["X-Service-Signature"] = _signature(secret_value + "-retry", timestamp, body)
    if faults.on(SIGNATURE_HEADER_REORDERED):
        t_part, v1_part = changed["X-Service-Signature"].split(",")
        changed["X-Service-Signature"] = f"{v1_part},{t_part}"
    if faults.on(HEADERS_BRANDED):
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

#: Keys that have signed a delivery, per running service (for PER_KEY_SECRET_ROTATES).
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
        return per_key(key_id) if faults.on(REGISTERED_SIGNED_WITH_KEY_SECRET) else honest
    if faults.on(PER_KEY_SECRET_SHARED):
        return per_key(first_key_of_account(key_id))
    if faults.on(PER_KEY_SECRET_ROTATES):
        signed = _SIGNED.setdefault(faults, set())
        if key_id in signed:
            return hashlib.sha256(f"{honest}:rotated".encode()).hexdigest()
        signed.add(key_id)
    return honest
