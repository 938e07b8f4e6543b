"""Which event a finished generation fires, and the delivery it queues (spec §6 Events).

The generation core calls :meth:`Events.enqueue` inside the transaction that moves a
generation to completed, failed or cancelled, so the delivery row commits with the new
status or not at all. completed and failed fire when subscribed (the default);
cancelled only when the binding subscribed to it explicitly. The body is serialized
here, once: every attempt and every redelivery sends these bytes.
"""

from __future__ import annotations

import secrets
import sqlite3
import time
from collections.abc import Mapping
from typing import Any

from genapi_spec import API_VERSION
from reference.config import Choices
from reference.fault import Fault, Faults
from reference.ids import new_id
from reference.logs import log_event

from . import envelopes, event_faults
from .envelopes import DEFAULT_EVENTS, EVENT_CANCELLED, EVENT_FOR_STATUS
from .records import DeliveryRow, insert_delivery
from .targets import Binding, Targets, binding_from_row

__all__ = ["Events"]

# Faults injected here (``--fault NAME``; the registry, ``reference/faults.py``, collects them).
CANCELLED_SENT_UNSUBSCRIBED = Fault(
    "cancelled-sent-unsubscribed",
    "EVT-CANCEL-01",
    "generation.cancelled is delivered to bindings that did not subscribe to it",
)
CREATED_AT_WITHOUT_OFFSET = Fault(
    "created-at-without-offset",
    "EVT-ENV-03",
    "the envelope's created_at carries no UTC offset",
)
WEBHOOK_ID_NOT_NULL_INLINE = Fault(
    "webhook-id-not-null-inline",
    "EVT-ENV-05",
    "inline (webhook.url) envelopes carry a webhook_id",
)
ENVELOPE_MISSING_API_VERSION = Fault(
    "envelope-missing-api-version",
    "VER-ENV-01",
    "the envelope has no api_version",
)
CALLBACK_BODY_NOT_FLATTENED = Fault(
    "callback-body-not-flattened",
    "TARGET-FLAT-02",
    "callback_url deliveries carry the strict envelope without top-level data fields",
)


class Events:
    """Queues the deliveries of finished generations."""

    def __init__(self, faults: Faults, targets: Targets, choices: Choices) -> None:
        self.faults = faults
        self.targets = targets
        self.choices = choices

    def enqueue(self, conn: sqlite3.Connection, generation: Mapping[str, Any]) -> list[DeliveryRow]:
        """Queue the event a finished generation fires, in the caller's transaction; the
        deliveries queued, for the dispatcher to start once the transaction commits."""
        row = conn.execute(
            "SELECT * FROM webhook_bindings WHERE generation_id = ?", (generation["id"],)
        ).fetchone()
        if row is None:
            return []
        binding = binding_from_row(row)
        event = EVENT_FOR_STATUS.get(str(generation["status"]))
        if event is None:
            return []
        if binding.webhook_id is not None and _webhook_deleted(conn, binding.webhook_id):
            # Deleted since the submit: a deleted webhook receives nothing more.
            log_event("delivery-skipped", generation_id=generation["id"], reason="webhook deleted")
            return []
        subscribed = event in binding.events or (
            event == EVENT_CANCELLED and self.faults.on(CANCELLED_SENT_UNSUBSCRIBED)
        )
        faulty = event_faults.active(self.faults)
        if not subscribed and not (
            faulty and event_faults.sent_anyway(self.faults, event, binding.events)
        ):
            return []
        if faulty and event_faults.suppressed(
            self.faults,
            event,
            str(generation["type"]),
            binding.events,
            default=tuple(binding.events) == tuple(DEFAULT_EVENTS),
            operation=_operation_of(conn, str(generation["id"])),
        ):
            return []
        event_id = new_id("event", self.choices.id_form)
        if faulty:
            event_id = event_faults.event_id(self.faults, event_id)
        created_at = envelopes.timestamp_now(
            with_offset=not self.faults.on(CREATED_AT_WITHOUT_OFFSET),
            form=self.choices.timestamp_form,
        )
        webhook_id = binding.webhook_id
        if binding.mode == "inline" and self.faults.on(WEBHOOK_ID_NOT_NULL_INLINE):
            webhook_id = "wh_" + secrets.token_hex(12)
        envelope = envelopes.build_envelope(
            event_id=event_id,
            event=event,
            data=envelopes.event_data(generation),
            webhook_id=webhook_id,
            created_at=created_at,
            api_version=(None if self.faults.on(ENVELOPE_MISSING_API_VERSION) else API_VERSION),
        )
        if faulty:
            envelope = event_faults.envelope(self.faults, envelope, binding.mode)
        body = envelope
        if binding.mode == "callback" and not self.faults.on(CALLBACK_BODY_NOT_FLATTENED):
            body = envelopes.callback_body(envelope)
        if faulty:
            body = event_faults.body(
                self.faults, envelope, body, binding.mode, envelopes.callback_body
            )
        queued = _queue(conn, binding, event_id, str(generation["id"]), event, body)
        if self.targets.losers:
            for loser in self.targets.losers.pop(str(generation["id"]), ()):
                queued += _enqueue_loser(conn, loser, envelope)
        return queued


def _enqueue_loser(
    conn: sqlite3.Connection, loser: Binding, envelope: Mapping[str, Any]
) -> list[DeliveryRow]:
    """The fault LOSING_TARGET_NOTIFIED: a losing target gets the event as well.

    Its own event id, and no generation_id on the row: the unique index allows one
    delivery per generation and event, which an honest service never exceeds.
    """
    event_id = envelopes.new_event_id()
    copy = {**envelope, "id": event_id, "webhook_id": loser.webhook_id}
    body = envelopes.callback_body(copy) if loser.mode == "callback" else copy
    return _queue(conn, loser, event_id, None, str(envelope["event"]), body)


def _queue(
    conn: sqlite3.Connection,
    binding: Binding,
    event_id: str,
    generation_id: str | None,
    event_type: str,
    body: Mapping[str, Any],
) -> list[DeliveryRow]:
    """Store the delivery of ``body`` to ``binding``, due now (the dispatcher sends it);
    the row, or none when this generation already had a delivery of this event."""
    row = DeliveryRow(
        # The event's,
        id=event_id,
        generation_id=generation_id,
        event_type=event_type,
        body=envelopes.body_bytes(body),
        # the binding's,
        mode=binding.mode,
        target_url=binding.url,
        address=binding.address,
        account_id=binding.account_id,
        key_id=binding.key_id,
        webhook_id=binding.webhook_id,
        # and a new delivery's, due now.
        outcome="pending_retry",
        status_code=None,
        attempt_count=0,
        created_at=envelopes.timestamp_now(),
        next_attempt_at=time.time(),
    )
    return [row] if insert_delivery(conn, row) else []


def _operation_of(conn: sqlite3.Connection, generation_id: str) -> str:
    """The generation's operation (images.edit, ...), for the event faults only."""
    row = conn.execute(
        "SELECT operation FROM generations WHERE id = ?", (generation_id,)
    ).fetchone()
    return str(row[0]) if row is not None else ""


def _webhook_deleted(conn: sqlite3.Connection, webhook_id: str) -> bool:
    row = conn.execute("SELECT deleted_at FROM webhooks WHERE id = ?", (webhook_id,)).fetchone()
    return row is None or row["deleted_at"] is not None
