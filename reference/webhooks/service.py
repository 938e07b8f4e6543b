"""``WebhookService``: the webhook side as the generation core and the routes see it.

The generation core calls, in this order:

* ``await select_target(body, key)`` before spending credits (404 / 400 come from here);
* ``record_binding(conn, generation_id, binding)`` inside the submit transaction;
* ``enqueue_events(conn, generation)`` inside the transaction that finishes a generation,
  then ``wake(queued)`` after the commit with the deliveries it returned;
* ``binding_view(generation_id)`` for GET /v1/generations/{id}.

The app starts and stops the service in its lifespan and mounts ``webhook_routes``
(``routes.py``), whose handlers call the other methods. Each method hands over to the part
that does the work: ``targets``, ``events``, ``attempts``, ``dispatcher``, ``registered``,
``lists``, ``redelivery``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from reference.aio import run_db
from reference.auth import KeyContext
from reference.config import Config
from reference.fault import Faults
from reference.netguard import CallbackPolicy, make_delivery_client
from reference.store import Store

from . import url_faults
from .attempts import Attempts
from .dispatcher import Dispatcher, delivery_policy
from .envelopes import timestamp_now
from .events import Events
from .lists import DeliveryLists
from .records import DeliveryRow
from .redeliver import Redelivery
from .registered import RegisteredWebhooks
from .targets import Binding, Targets, policy_from_config

__all__ = ["WebhookService"]


class WebhookService:
    """Registered webhooks, bindings, events and their durable delivery."""

    def __init__(
        self,
        store: Store,
        config: Config,
        faults: Faults,
        *,
        policy: CallbackPolicy | None = None,
        client_factory: Callable[[], httpx.AsyncClient] | None = None,
    ) -> None:
        self.store = store
        #: Where the spec leaves room, which side the service takes (the routes read it).
        self.choices = choices = config.choices
        delivery = delivery_policy(config, faults)
        self.targets = Targets(
            store, faults, policy if policy is not None else policy_from_config(config), choices
        )
        self.events = Events(faults, self.targets, choices)
        self.attempts = Attempts(
            store,
            config,
            faults,
            delivery,
            client_factory=client_factory
            or (lambda: make_delivery_client(delivery.timeout_s, egress=config.egress)),
        )
        self.dispatcher = Dispatcher(
            store,
            delivery,
            self.attempts.signing_secret,
            url_faults.automatic_sender(faults, self.targets.policy, self.attempts.send),
        )
        self.registered = RegisteredWebhooks(
            store, faults, config.base_url, self.targets, self.attempts, choices
        )
        self.lists = DeliveryLists(store, faults, choices)
        self.redelivery = Redelivery(store, faults, self.targets, self.attempts, choices)

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Close test deliveries cut off by a crash, then resume every pending delivery."""
        await run_db(self._close_interrupted_tests)
        await self.dispatcher.start()

    async def stop(self) -> None:
        await self.dispatcher.stop()
        await self.attempts.close()

    def wake(self, ready: Sequence[DeliveryRow] = ()) -> None:
        """Tell the dispatcher new deliveries are due (call after the commit); *ready*:
        what ``enqueue_events`` returned, started at once instead of looked up again."""
        self.dispatcher.wake(ready)

    def _close_interrupted_tests(self) -> None:
        # A console test delivery has no scheduled retry; one left open by a crash is
        # closed as failed (its attempt, if it was made, was never recorded).
        with self.store.transaction() as conn:
            conn.execute(
                "UPDATE webhook_deliveries SET outcome = 'failed', updated_at = ?"
                " WHERE outcome = 'pending_retry' AND next_attempt_at IS NULL",
                (timestamp_now(),),
            )

    # --- what the generation core calls -------------------------------------------------

    async def select_target(self, body: Mapping[str, Any], key: KeyContext) -> Binding | None:
        return await self.targets.select(body, key)

    def record_binding(
        self, conn: sqlite3.Connection, generation_id: str, binding: Binding
    ) -> None:
        self.targets.record(conn, generation_id, binding)

    def binding_view(self, generation_id: str) -> dict[str, Any] | None:
        return self.targets.view(generation_id)

    def enqueue_events(
        self, conn: sqlite3.Connection, generation: Mapping[str, Any]
    ) -> list[DeliveryRow]:
        return self.events.enqueue(conn, generation)

    # --- what the routes call -----------------------------------------------------------

    async def create_webhook(self, account_id: str, body: Any) -> dict[str, Any]:
        return await self.registered.create(account_id, body)

    def list_webhooks(self, account_id: str) -> dict[str, Any]:
        return self.registered.listing(account_id)

    def delete_webhook(self, account_id: str, webhook_id: str) -> None:
        self.registered.delete(account_id, webhook_id)

    async def test_webhook(self, account_id: str, webhook_id: str) -> dict[str, Any]:
        return await self.registered.test(account_id, webhook_id)

    def generation_deliveries(self, account_id: str, generation_id: str) -> dict[str, Any]:
        return self.lists.of_generation(account_id, generation_id)

    def webhook_deliveries(
        self, account_id: str, webhook_id: str, outcome: str | None, limit: str | None
    ) -> dict[str, Any]:
        return self.lists.of_webhook(account_id, webhook_id, outcome, limit)

    async def redeliver(self, account_id: str, delivery_id: str) -> dict[str, Any]:
        return await self.redelivery.redeliver(account_id, delivery_id)
