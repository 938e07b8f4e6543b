"""Faults of delivery behaviour, delivery records and redeliver (spec §2, §3, §4, §6).

The suite's delivery checks (``conformance/checks/test_delivery_retries.py``,
``test_delivery_timeout.py``, ``test_delivery_redirects.py``, ``test_delivery_records.py``,
``test_delivery_lists.py``, ``test_redeliver.py``) must catch each of these; each names
the requirement id it breaks. The service asks :func:`active` first, so with none of them
on nothing here runs.

Where one statement cannot be broken alone (a new delivery id on each retry also changes
the retried body), the fault breaks its own requirement first and the others only as a
consequence.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from reference.fault import Fault, Faults, declared_in

from . import envelopes
from .sender import DeliveryRequest

__all__ = ["DECLARED", "active", "list_answer", "per_attempt"]

# What each attempt carries (spec §6 Behaviour: at-least-once, dedupe ids).
DELIVERY_ID_PER_ATTEMPT = Fault(
    "delivery-id-per-attempt",
    "DLV-ID-01",
    "each retry carries a new delivery id (body id and X-Service-Delivery)",
)
RETRY_BODY_CHANGES = Fault(
    "retry-body-changes",
    "DLV-ID-03",
    "each retry carries a body with a new created_at",
)
SHARED_DELIVERY_ID = Fault(
    "shared-delivery-id",
    "DLV-ID-02",
    "every delivery carries the same id (body id and X-Service-Delivery)",
)

# The fields of a delivery record (spec §2 Delivery record).
ATTEMPT_AT_MISSING = Fault(
    "attempt-at-missing",
    "REC-ATTEMPT-02",
    "delivery record attempts have no at",
)
ATTEMPT_ERROR_MISSING = Fault(
    "attempt-error-missing",
    "REC-ATTEMPT-06",
    "delivery record attempts have no error field",
)
ATTEMPT_MS_FLOAT = Fault(
    "attempt-ms-float",
    "REC-ATTEMPT-05",
    "delivery record attempts give ms as float seconds",
)
ATTEMPT_N_FROM_ZERO = Fault(
    "attempt-n-from-zero",
    "REC-ATTEMPT-01",
    "delivery records number their attempts from 0",
)
ATTEMPT_STATUS_OF_LAST = Fault(
    "attempt-status-of-last",
    "REC-ATTEMPT-04",
    "every attempt of a record shows the last attempt's status",
)
EVENT_TYPE_SHORT = Fault(
    "event-type-short",
    "REC-FIELD-01",
    "delivery records give event_type without the generation. prefix",
)
OUTCOME_SUCCESS_WORD = Fault(
    "outcome-success-word",
    "REC-FIELD-02",
    "delivered records show outcome success",
)
RECORD_DROPS_FIRST_ATTEMPT = Fault(
    "record-drops-first-attempt",
    "REC-GEN-03",
    "delivery records leave out their first attempt",
)
RECORD_KEEPS_LAST_ATTEMPT = Fault(
    "record-keeps-last-attempt",
    "REC-FIELD-06",
    "a delivery record's attempts hold only the latest attempt",
)
STATUS_CODE_STRING = Fault(
    "status-code-string",
    "REC-FIELD-03",
    "delivery records give status_code as a string",
)
TARGET_URL_ORIGIN_ONLY = Fault(
    "target-url-origin-only",
    "REC-FIELD-05",
    "delivery records give target_url without its path",
)

# The list responses (spec §2 list shape, §4).
CALLBACK_UNLISTED = Fault(
    "callback-unlisted",
    "REC-GEN-05",
    "a generation's delivery list leaves out callback_url deliveries",
)
DUPLICATE_RECORDS = Fault(
    "duplicate-records",
    "REC-GEN-02",
    "a generation's delivery list shows each record twice",
)
GENERATION_LIST_TOTAL_MISSING = Fault(
    "generation-list-total-missing",
    "REC-GEN-07",
    "a generation's delivery list has no total",
)
INLINE_UNLISTED = Fault(
    "inline-unlisted",
    "REC-GEN-04",
    "a generation's delivery list leaves out webhook.url (inline) deliveries",
)
LIST_TOTAL_STRING = Fault(
    "list-total-string",
    "REC-LIST-01",
    "delivery lists give total as a string",
)
REGISTERED_UNLISTED = Fault(
    "registered-unlisted",
    "REC-GEN-06",
    "a generation's delivery list leaves out registered-webhook deliveries",
)
WEBHOOK_LIST_EMPTY = Fault(
    "webhook-list-empty",
    "REC-HOOK-02",
    "a webhook's delivery list is always empty",
)
WEBHOOK_LIST_TOTAL_MISSING = Fault(
    "webhook-list-total-missing",
    "REC-HOOK-10",
    "a webhook's delivery list has no total",
)


#: Every fault above (what :func:`active` asks about).
DECLARED: Final = declared_in(globals())
#: The faults that leave one target mode's deliveries out of a generation's list.
_UNLISTED: Final = {
    "inline": INLINE_UNLISTED,
    "callback": CALLBACK_UNLISTED,
    "registered": REGISTERED_UNLISTED,
}

#: A delivery id shared by every delivery under SHARED_DELIVERY_ID.
SHARED_ID: Final = "evt_" + "0" * 32

Listing = Literal["generation", "webhook"]


def active(faults: Faults) -> bool:
    """Whether any fault of this module is on (the only cost when none is)."""
    return faults.any_on(DECLARED)


def per_attempt(faults: Faults) -> Callable[[DeliveryRequest], DeliveryRequest] | None:
    """How an attempt's request is changed before it is sent, or None (honest)."""
    if faults.on(SHARED_DELIVERY_ID):
        return lambda request: _with_body(request, id=SHARED_ID)
    if faults.on(DELIVERY_ID_PER_ATTEMPT):
        return lambda request: (
            _with_body(request, id=envelopes.new_event_id()) if request.attempt > 1 else request
        )
    if faults.on(RETRY_BODY_CHANGES):
        return lambda request: (
            _with_body(request, created_at=envelopes.timestamp_now())
            if request.attempt > 1
            else request
        )
    return None


def _with_body(request: DeliveryRequest, **changes: str) -> DeliveryRequest:
    """The request with these top-level body fields changed (and the id header with id)."""
    body = json.loads(request.body)
    body.update(changes)
    delivery_id = changes.get("id", request.delivery_id)
    return dataclasses.replace(request, body=envelopes.body_bytes(body), delivery_id=delivery_id)


def list_answer(faults: Faults, answer: dict[str, Any], listing: Listing) -> dict[str, Any]:
    """A delivery list response (``deliveries``, ``total``) as the faults show it."""
    views: list[dict[str, Any]] = [_record(faults, view) for view in answer["deliveries"]]
    total: Any = answer["total"]
    if listing == "generation":
        unlisted = {mode for mode, fault in _UNLISTED.items() if faults.on(fault)}
        if unlisted:
            views = [view for view in views if view.get("mode") not in unlisted]
            total = len(views)
        if faults.on(DUPLICATE_RECORDS):
            views = [copy for view in views for copy in (view, dict(view))]
            total = len(views)
    if listing == "webhook" and faults.on(WEBHOOK_LIST_EMPTY):
        views, total = [], 0
    shown: dict[str, Any] = {"deliveries": views, "total": total}
    if faults.on(LIST_TOTAL_STRING):
        shown["total"] = str(total)
    if (listing == "generation" and faults.on(GENERATION_LIST_TOTAL_MISSING)) or (
        listing == "webhook" and faults.on(WEBHOOK_LIST_TOTAL_MISSING)
    ):
        del shown["total"]
    return shown


def _record(faults: Faults, view: dict[str, Any]) -> dict[str, Any]:
    """One delivery record as the record faults show it."""
    view = dict(view)
    attempts = [dict(a) for a in view.get("attempts", [])]
    if faults.on(RECORD_DROPS_FIRST_ATTEMPT) and len(attempts) > 1:
        attempts = attempts[1:]
    if faults.on(RECORD_KEEPS_LAST_ATTEMPT):
        attempts = attempts[-1:]
    if faults.on(ATTEMPT_STATUS_OF_LAST) and attempts:
        last = attempts[-1]["status"]
        for attempt in attempts:
            attempt["status"] = last
    for attempt in attempts:
        if faults.on(ATTEMPT_AT_MISSING):
            attempt.pop("at", None)
        if faults.on(ATTEMPT_ERROR_MISSING):
            attempt.pop("error", None)
        if faults.on(ATTEMPT_MS_FLOAT):
            attempt["ms"] = attempt["ms"] / 1000
        if faults.on(ATTEMPT_N_FROM_ZERO):
            attempt["n"] = attempt["n"] - 1
    view["attempts"] = attempts
    if faults.on(EVENT_TYPE_SHORT):
        view["event_type"] = str(view["event_type"]).removeprefix("generation.")
    if faults.on(OUTCOME_SUCCESS_WORD) and view.get("outcome") == "delivered":
        view["outcome"] = "success"
    if faults.on(STATUS_CODE_STRING):
        view["status_code"] = str(view["status_code"])
    if faults.on(TARGET_URL_ORIGIN_ONLY):
        parts = urlsplit(str(view["target_url"]))
        view["target_url"] = f"{parts.scheme}://{parts.netloc}"
    return view
