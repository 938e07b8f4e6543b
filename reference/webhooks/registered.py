"""Registered webhooks: the console's create, list, delete and test (spec §2, §4).

A registered webhook has a URL (checked by the callback rules of spec §4 when it is
created, and again at every submit that names it), the events it subscribes to and a
``whsec_`` secret shown once, in the answer that creates it. Deleting is soft: its
deliveries stay readable, and its pending retries end ``failed`` (an interpretation:
the spec does not say what becomes of them).

Extension: the console test delivery sends one ``webhook.test`` event now.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
from typing import Any

from reference.config import Choices
from reference.errors import ApiError
from reference.fault import Fault, Faults
from reference.ids import new_id
from reference.netguard import mask_userinfo
from reference.store import Store

from . import envelopes
from .attempts import Attempts, manual_answer
from .envelopes import DEFAULT_EVENTS
from .records import DeliveryRow, insert_delivery
from .targets import (
    Targets,
    chosen_events,
    events_from_row,
    events_json,
    parse_events,
    registered_webhook_row,
)

__all__ = ["RegisteredWebhooks"]

# Faults injected here (``--fault NAME``; the registry, ``reference/faults.py``, collects them).
WEBHOOK_SECRET_UNPREFIXED = Fault(
    "webhook-secret-unprefixed",
    "HOOK-SECRET-01",
    "registered webhooks get a secret without the whsec_ prefix",
)
WEBHOOK_ID_UNPREFIXED = Fault(
    "webhook-id-unprefixed",
    "HOOK-ID-01",
    "POST /api/webhooks answers the id without its prefix, which webhook.id does not find",
)
WEBHOOK_CREATED_WITHOUT_SECRET = Fault(
    "webhook-created-without-secret",
    "CONSOLE-HOOK-01",
    "POST /api/webhooks answers without the signing secret",
)
WEBHOOK_LIST_ALL_ACCOUNTS = Fault(
    "webhook-list-all-accounts",
    "CONSOLE-HOOK-07",
    "GET /api/webhooks lists the webhooks of every account",
)
WEBHOOK_SECRET_LISTED = Fault(
    "webhook-secret-listed",
    "HOOK-SECRET-02",
    "GET /api/webhooks shows each secret",
)
WEBHOOK_LIST_OMITS_NEWEST = Fault(
    "webhook-list-omits-newest",
    "CONSOLE-HOOK-02",
    "GET /api/webhooks leaves out the newest webhook",
)
WEBHOOK_DELETE_IGNORED = Fault(
    "webhook-delete-ignored",
    "CONSOLE-HOOK-05",
    "DELETE /api/webhooks/{id} answers 204 but keeps the webhook",
)
WEBHOOK_SECRET_SHARED = Fault(
    "webhook-secret-shared",
    "HOOK-SECRET-03",
    "every webhook an account registers gets the secret of its first",
)
WEBHOOK_EVENTS_REFUSED_ON_CREATE = Fault(
    "webhook-events-refused-on-create",
    "HOOK-CREATE-01",
    "POST /api/webhooks refuses a body that lists events (400)",
)
WEBHOOK_TEST_SENDS_NOTHING = Fault(
    "webhook-test-sends-nothing",
    "CONSOLE-HOOK-03",
    "POST /api/webhooks/{id}/test answers success without sending",
)


@dataclass(eq=False)
class RegisteredWebhooks:
    """The registered webhooks of the console."""

    store: Store
    faults: Faults
    base_url: str
    targets: Targets
    attempts: Attempts
    choices: Choices

    async def create(self, account_id: str, body: Any) -> dict[str, Any]:
        """Register a webhook; the whsec_ secret is in this answer and never again."""
        if not isinstance(body, dict):
            raise ApiError(400, 'send a JSON object: {"url": ..., "events": [...]}')
        if self.faults.on(WEBHOOK_EVENTS_REFUSED_ON_CREATE) and body.get("events") is not None:
            raise ApiError(400, "`events` is not accepted here")
        target = await self.targets.validated(body.get("url"), where="url")
        choices = self.choices
        events = parse_events(body.get("events"), where="events", choices=choices)
        events = chosen_events(events, choices) or DEFAULT_EVENTS
        webhook_id = new_id("webhook", choices.id_form)
        secret = f"whsec_{secrets.token_urlsafe(32)}"
        if choices.hmac_keying == "base64-after-prefix":  # the form that keying decodes
            secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode("ascii")
        if self.faults.on(WEBHOOK_SECRET_UNPREFIXED):
            secret = secrets.token_urlsafe(32)
        if self.faults.on(WEBHOOK_SECRET_SHARED):
            first = self.store.read(
                "SELECT secret FROM webhooks WHERE account_id = ? ORDER BY rowid LIMIT 1",
                (account_id,),
            )
            secret = first[0]["secret"] if first else secret
        created_at = envelopes.timestamp_now()
        with self.store.transaction() as conn:
            conn.execute(
                "INSERT INTO webhooks (id, account_id, url, events, secret, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (webhook_id, account_id, target.url, events_json(events), secret, created_at),
            )
        created = {
            "id": webhook_id,
            "url": mask_userinfo(target.url),
            "events": list(events),
            "secret": secret,
            "created_at": created_at,
        }
        if self.faults.on(WEBHOOK_CREATED_WITHOUT_SECRET):
            del created["secret"]
        if self.faults.on(WEBHOOK_ID_UNPREFIXED):
            created["id"] = webhook_id.split("_", 1)[-1]
        return created

    def listing(self, account_id: str) -> dict[str, Any]:
        """The account's live registered webhooks, oldest first, never with a secret."""
        rows = self.store.read(
            "SELECT id, url, events, secret, created_at FROM webhooks"
            " WHERE (account_id = ? OR ?) AND deleted_at IS NULL ORDER BY created_at, rowid",
            (account_id, self.faults.on(WEBHOOK_LIST_ALL_ACCOUNTS)),
        )
        webhooks = [
            {
                "id": row["id"],
                "url": mask_userinfo(row["url"]),
                "events": list(events_from_row(row)),
                "created_at": row["created_at"],
            }
            for row in rows
        ]
        if self.faults.on(WEBHOOK_SECRET_LISTED):
            for row, listed in zip(rows, webhooks, strict=True):
                listed["secret"] = row["secret"]
        if self.faults.on(WEBHOOK_LIST_OMITS_NEWEST):
            webhooks = webhooks[:-1]
        return {"webhooks": webhooks, "total": len(webhooks)}

    def delete(self, account_id: str, webhook_id: str) -> None:
        """Soft-delete: its deliveries stay readable, its pending retries end ``failed``."""
        now = envelopes.timestamp_now()
        with self.store.transaction() as conn:
            if registered_webhook_row(conn, webhook_id, account_id) is None:
                raise ApiError(404, "no registered webhook with this id in this account")
            if self.faults.on(WEBHOOK_DELETE_IGNORED):
                return
            conn.execute("UPDATE webhooks SET deleted_at = ? WHERE id = ?", (now, webhook_id))
            conn.execute(
                "UPDATE webhook_deliveries SET outcome = 'failed', next_attempt_at = NULL,"
                " updated_at = ? WHERE webhook_id = ? AND outcome = 'pending_retry'",
                (now, webhook_id),
            )

    async def test(self, account_id: str, webhook_id: str) -> dict[str, Any]:
        """Extension: send one ``webhook.test`` event now and answer with its outcome.

        The envelope has the spec's shape (id, event, created_at, api_version, webhook_id,
        data) with sample generation data; the target URL is validated again first
        (400 if it no longer passes). One attempt, no retries: ``delivered`` or ``failed``.
        """
        rows = self.store.read(
            "SELECT * FROM webhooks WHERE id = ? AND account_id = ? AND deleted_at IS NULL",
            (webhook_id, account_id),
        )
        if not rows:
            raise ApiError(404, "no registered webhook with this id in this account")
        webhook = rows[0]
        if self.faults.on(WEBHOOK_TEST_SENDS_NOTHING):
            return {"outcome": "delivered", "status_code": 200}
        target = await self.targets.validated(webhook["url"], where="the registered webhook's url")
        choices = self.choices
        event_id = new_id("event", choices.id_form)
        generation_id = f"gen_test_{secrets.token_hex(8)}"
        envelope = envelopes.build_envelope(
            event_id=event_id,
            event=choices.test_event,
            data={
                "generation_id": generation_id,
                "status": "completed",
                "type": "image",
                "model": "webhook-test",
                "output_url": f"{self.base_url}/outputs/webhook-test.png",
                "error_message": None,
                "credits_used": 0,
            },
            webhook_id=webhook_id,
            created_at=envelopes.timestamp_now(form=choices.timestamp_form),
        )
        row = DeliveryRow(
            id=event_id,
            generation_id=None,
            account_id=account_id,
            key_id=None,
            webhook_id=webhook_id,
            mode="registered",
            event_type=choices.test_event,
            target_url=target.url,
            address=str(target.address),
            body=envelopes.body_bytes(envelope),
            outcome="pending_retry",
            status_code=None,
            attempt_count=0,
            next_attempt_at=None,
            created_at=envelopes.timestamp_now(),
        )
        with self.store.transaction() as conn:
            insert_delivery(conn, row)  # next_attempt_at None: sent right here, not queued
        result = await self.attempts.manual(
            row, address=row.address, generation_id=generation_id, trigger="test"
        )
        return manual_answer(row.id, result)
