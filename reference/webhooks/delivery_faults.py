"""Faults of delivery behaviour, delivery records and redeliver (spec §2, §3, §4, §6).

The suite's delivery checks (``conformance/checks/test_delivery_retries.py``,
``test_delivery_timeout.py``, ``test_delivery_redirects.py``, ``test_delivery_records.py``,
``test_delivery_lists.py``, ``test_redeliver.py``) must catch each of these;
``reference/faults.py`` registers them with the requirement id each one breaks. The
service asks :func:`active` first, so with none of them on nothing here runs.

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

from reference.faults import Faults

from . import envelopes
from .sender import DeliveryRequest

__all__ = ["NAMES", "active", "list_answer", "per_attempt"]

#: Every fault this module implements (each registered in reference/faults.py).
NAMES: Final = frozenset(
    {
        # what each attempt carries (spec §6 Behaviour: at-least-once, dedupe ids)
        "delivery-id-per-attempt",
        "retry-body-changes",
        "shared-delivery-id",
        # the fields of a delivery record (spec §2 Delivery record)
        "attempt-at-missing",
        "attempt-error-missing",
        "attempt-ms-float",
        "attempt-n-from-zero",
        "attempt-status-of-last",
        "event-type-short",
        "outcome-success-word",
        "record-drops-first-attempt",
        "record-keeps-last-attempt",
        "status-code-string",
        "target-url-origin-only",
        # the list responses (spec §2 list shape, §4)
        "callback-unlisted",
        "duplicate-records",
        "generation-list-total-missing",
        "inline-unlisted",
        "list-total-string",
        "registered-unlisted",
        "webhook-list-empty",
        "webhook-list-total-missing",
    }
)

#: A delivery id shared by every delivery under ``shared-delivery-id``.
SHARED_ID: Final = "evt_" + "0" * 32

Listing = Literal["generation", "webhook"]


def active(faults: Faults) -> bool:
    """Whether any fault of this module is on (the only cost when none is)."""
    return any(faults.on(name) for name in NAMES)


def per_attempt(faults: Faults) -> Callable[[DeliveryRequest], DeliveryRequest] | None:
    """How an attempt's request is changed before it is sent, or None (honest)."""
    if faults.on("shared-delivery-id"):
        return lambda request: _with_body(request, id=SHARED_ID)
    if faults.on("delivery-id-per-attempt"):
        return lambda request: (
            _with_body(request, id=envelopes.new_event_id()) if request.attempt > 1 else request
        )
    if faults.on("retry-body-changes"):
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
        unlisted = {
            mode for mode in ("inline", "callback", "registered") if faults.on(f"{mode}-unlisted")
        }
        if unlisted:
            views = [view for view in views if view.get("mode") not in unlisted]
            total = len(views)
        if faults.on("duplicate-records"):
            views = [copy for view in views for copy in (view, dict(view))]
            total = len(views)
    if listing == "webhook" and faults.on("webhook-list-empty"):
        views, total = [], 0
    shown: dict[str, Any] = {"deliveries": views, "total": total}
    if faults.on("list-total-string"):
        shown["total"] = str(total)
    if (listing == "generation" and faults.on("generation-list-total-missing")) or (
        listing == "webhook" and faults.on("webhook-list-total-missing")
    ):
        del shown["total"]
    return shown


def _record(faults: Faults, view: dict[str, Any]) -> dict[str, Any]:
    """One delivery record as the record faults show it."""
    view = dict(view)
    attempts = [dict(a) for a in view.get("attempts", [])]
    if faults.on("record-drops-first-attempt") and len(attempts) > 1:
        attempts = attempts[1:]
    if faults.on("record-keeps-last-attempt"):
        attempts = attempts[-1:]
    if faults.on("attempt-status-of-last") and attempts:
        last = attempts[-1]["status"]
        for attempt in attempts:
            attempt["status"] = last
    for attempt in attempts:
        if faults.on("attempt-at-missing"):
            attempt.pop("at", None)
        if faults.on("attempt-error-missing"):
            attempt.pop("error", None)
        if faults.on("attempt-ms-float"):
            attempt["ms"] = attempt["ms"] / 1000
        if faults.on("attempt-n-from-zero"):
            attempt["n"] = attempt["n"] - 1
    view["attempts"] = attempts
    if faults.on("event-type-short"):
        view["event_type"] = str(view["event_type"]).removeprefix("generation.")
    if faults.on("outcome-success-word") and view.get("outcome") == "delivered":
        view["outcome"] = "success"
    if faults.on("status-code-string"):
        view["status_code"] = str(view["status_code"])
    if faults.on("target-url-origin-only"):
        parts = urlsplit(str(view["target_url"]))
        view["target_url"] = f"{parts.scheme}://{parts.netloc}"
    return view
