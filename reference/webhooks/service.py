"""The webhook side's facade: what CORE and the routes call (ref-interface, spec §2-§7).

CORE's part of the contract:

* ``await select_target(body, key)`` before spending credits (404 / 400 come from here);
* ``record_binding(conn, generation_id, binding)`` inside the submit transaction;
* ``enqueue_events(conn, generation)`` inside the transaction that finishes a generation,
  then ``wake()`` after the commit;
* ``binding_view(generation_id)`` for GET /v1/generations/{id};
* ``routes()`` mounted in the app, ``start()`` / ``stop()`` in its lifespan.

Decisions where the spec is silent (documented for the catalog's INTERPRETATION items):

* ``failed`` is the outcome of a single manual attempt that did not succeed: a console
  test delivery or a redelivery. Automatic attempts end ``delivered`` or ``exhausted``.
* Redeliver re-validates first (400 for any state, nothing fetched, record unchanged),
  then only ``exhausted`` or ``failed`` deliveries may be replayed (spec §3); a
  ``delivered`` or ``pending_retry`` one gets 409, as does a delivery of a deleted
  webhook. The replay is one attempt, made synchronously, numbered after the previous
  attempts (X-Service-Attempt continues: 4 after three automatic attempts), with a fresh
  signature timestamp and the original bytes and event id.
* Deleting a registered webhook stops its pending retries: they end ``failed``.
* ``limit`` on GET /v1/webhooks/{id}/deliveries: an integer 1..100, default 100; any other
  value is a 400 (spec §8: 100 maximum).
"""

from __future__ import annotations

import base64
import dataclasses
import ipaddress
import json
import secrets
import sqlite3
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import httpx
from starlette.routing import BaseRoute

from genapi_spec import API_VERSION
from reference.aio import run_db
from reference.auth import KeyContext, signing_secret_for
from reference.config import Config
from reference.errors import ApiError
from reference.faults import Faults
from reference.ids import new_id
from reference.logs import log_event
from reference.netguard import (
    CallbackPolicy,
    CallbackRejected,
    DnsServerResolver,
    HostNotResolved,
    HostsFileResolver,
    Resolver,
    SystemResolver,
    ValidatedTarget,
    make_delivery_client,
)
from reference.store import Store

from . import delivery_faults, envelopes, event_faults, url_faults
from .dispatcher import DeliveryPolicy, Dispatcher
from .envelopes import ALL_EVENTS, DEFAULT_EVENTS, EVENT_CANCELLED, EVENT_FOR_STATUS
from .records import DeliveryRow, delivery_views, get_delivery, insert_delivery, record_attempt
from .schema import OUTCOMES
from .sender import AttemptResult, DeliveryRequest, SendOptions, send_attempt
from .targets import (
    Binding,
    events_from_row,
    events_json,
    parse_events,
    registered_webhook_row,
    validate_target,
)

__all__ = ["WebhookService", "policy_from_config"]

#: Spec §8: "Delivery list limit: 100 maximum".
MAX_LIST_LIMIT = 100
#: Records a webhook's delivery list gives without a ``limit`` under the choice
#: ``list_limit = "clamp"`` (the default limit is not shown).
CLAMPED_DEFAULT_LIMIT = 20
#: Redeliverable states (spec §3: "exhausted or failed").
REDELIVERABLE = frozenset({"exhausted", "failed"})


def policy_from_config(config: Config) -> CallbackPolicy:
    """The callback URL policy of spec §4 with the test-mode resolvers of the config."""
    resolver: Resolver = SystemResolver()
    if config.dns_server is not None:
        resolver = DnsServerResolver(*config.dns_server)
    if config.hosts_file is not None:
        resolver = HostsFileResolver(config.hosts_file, fallback=resolver)
    return CallbackPolicy(resolver, config.allow_cidrs)


def _now_iso() -> str:
    return envelopes.timestamp_now()


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
        self.config = config
        self.faults = faults
        self.policy = policy if policy is not None else policy_from_config(config)
        self._client_factory = client_factory or (
            # The policy's timeout (a fault may change it), read when the client is made.
            lambda: make_delivery_client(self.delivery_policy.timeout_s, egress=config.egress)
        )
        self._client: httpx.AsyncClient | None = None
        self._manual: set[str] = set()
        self._losers: dict[str, tuple[Binding, ...]] = {}  # losing-target-notified only
        self.delivery_policy = self._delivery_policy()
        self.dispatcher = Dispatcher(
            store, self.delivery_policy, self._signing_secret, self.options_for, self.client
        )

    # --- settings, faults ---------------------------------------------------------------

    def _delivery_policy(self) -> DeliveryPolicy:
        max_attempts = self.config.max_attempts
        backoff = tuple(self.config.retry_backoff_s)
        if self.faults.on("no-retry"):
            max_attempts = 1
        if self.faults.on("fourth-attempt"):
            max_attempts += 1
        if self.faults.on("backoff-too-short"):
            backoff = tuple(0.1 for _ in backoff)
        if self.faults.on("two-attempts"):
            max_attempts = 2
        if self.faults.on("second-backoff-1s"):
            backoff = tuple(backoff[0] for _ in backoff)
        timeout_s = self.config.delivery_timeout_s
        if self.faults.on("timeout-too-long"):
            timeout_s *= 2
        if self.faults.on("timeout-too-short"):
            timeout_s /= 2
        return DeliveryPolicy(
            timeout_s=timeout_s,
            timer_slack_s=self.config.delivery_timer_slack_s,
            backoff_s=backoff,
            max_attempts=max_attempts,
            exhausted_outcome="failed"
            if self.faults.on("exhausted-recorded-failed")
            else "exhausted",
            delivered_outcome="failed"
            if self.faults.on("success-recorded-failed")
            else "delivered",
            retry_first_success=self.faults.on("retry-after-success"),
            retry_timeouts=not self.faults.on("timeout-not-retried"),
        )

    def _success_rule(self) -> Callable[[int], bool] | None:
        """Which statuses count as success under a success-rule fault; None: any 2xx."""
        if self.faults.on("only-200-success"):
            return lambda status: status == 200
        if self.faults.on("client-error-success"):
            return lambda status: 200 <= status < 300 or 400 <= status < 500
        if self.faults.on("redirect-success"):
            return lambda status: 200 <= status < 400
        return None

    def options_for(self, row: DeliveryRow) -> SendOptions:
        """How to send an attempt of this delivery: honest, unless a fault says otherwise
        (the signature faults need the row's body, hence per delivery)."""
        signed_override: bytes | None = None
        secret_override: str | None = None
        if self.faults.on("signature-over-reserialized-body"):
            # json.dumps' default separators differ from the compact bytes on the wire.
            signed_override = json.dumps(json.loads(row.body)).encode("utf-8")
        if self.faults.on("signature-wrong-key"):
            # A stable secret that is neither the webhook's nor the key's.
            secret_override = signing_secret_for(self.config.master_secret, "wrong-key")
        return SendOptions(
            follow_redirects=self.faults.on("follows-redirects"),
            mismatched_delivery_header=self.faults.on("delivery-header-mismatch"),
            signed_body_override=signed_override,
            signing_secret_override=secret_override,
            rewrite=self._rewrite if event_faults.active(self.faults) else None,
            counts_as_success=self._success_rule(),
            per_attempt=(
                delivery_faults.per_attempt(self.faults)
                if delivery_faults.active(self.faults)
                else None
            ),
            pretend_sent=self.faults.on("delivered-without-sending"),
            **self._chosen_options(row),
        )

    def _chosen_options(self, row: DeliveryRow) -> dict[str, Any]:
        """The SendOptions of the open choices (``Config.choices``)."""
        choices = self.config.choices
        signed_at = None
        if choices.signature_time == "first-signing":
            signed_at = int(datetime.fromisoformat(row.created_at).timestamp())
        return {
            "header_brand": choices.header_brand,
            "keying": choices.hmac_keying,
            "upper_hex": choices.signature_hex_case == "upper",
            "signed_at": signed_at,
            "timestamp_form": choices.timestamp_form,
            "timeout_status": choices.no_reply_status,
        }

    def _rewrite(
        self, method: str, headers: dict[str, str], request: DeliveryRequest
    ) -> tuple[str, dict[str, str]]:
        return event_faults.rewrite_request(
            self.faults,
            method,
            headers,
            attempt=request.attempt,
            body=request.body,
            secret_value=request.secret,
            delivery_id=request.delivery_id,
        )

    # --- lifecycle ----------------------------------------------------------------------

    async def client(self) -> httpx.AsyncClient:
        """The delivery client (netguard's egress-guarded transport), made on first use."""
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    async def start(self) -> None:
        """Close test deliveries cut off by a crash, then resume every pending delivery."""
        await run_db(self._close_interrupted_tests)
        await self.dispatcher.start()

    async def stop(self) -> None:
        await self.dispatcher.stop()
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def wake(self) -> None:
        """Tell the dispatcher new deliveries are due (call after the commit)."""
        self.dispatcher.wake()

    def _close_interrupted_tests(self) -> None:
        # A console test delivery has no scheduled retry; one left open by a crash is
        # closed as failed (its attempt, if it was made, was never recorded).
        with self.store.transaction() as conn:
            conn.execute(
                "UPDATE webhook_deliveries SET outcome = 'failed', updated_at = ?"
                " WHERE outcome = 'pending_retry' AND next_attempt_at IS NULL",
                (_now_iso(),),
            )

    # --- secrets ------------------------------------------------------------------------

    def secret_for(self, row: DeliveryRow) -> str:
        """The signing secret of a delivery (spec §5.6): the registered webhook's whsec_
        secret, else the per-key secret of the key that submitted the generation."""
        if row.webhook_id is not None:
            rows = self.store.read("SELECT secret FROM webhooks WHERE id = ?", (row.webhook_id,))
            if not rows:
                raise LookupError(f"webhook {row.webhook_id} of delivery {row.id} is gone")
            secret: str = rows[0]["secret"]
            return secret
        if row.key_id is None:
            raise LookupError(f"delivery {row.id} has neither a webhook nor a key")
        return self._per_key_secret(row.key_id)

    def _per_key_secret(self, key_id: str) -> str:
        return signing_secret_for(
            self.config.master_secret, key_id, self.config.choices.hmac_keying
        )

    def _first_key_of_account(self, key_id: str) -> str:
        rows = self.store.read(
            "SELECT id FROM api_keys WHERE account_id ="
            " (SELECT account_id FROM api_keys WHERE id = ?) ORDER BY created_at, id LIMIT 1",
            (key_id,),
        )
        return str(rows[0]["id"]) if rows else key_id

    def _signing_secret(self, row: DeliveryRow) -> str:
        """:meth:`secret_for`, with the event faults (event_faults.py) when any is on."""
        honest = self.secret_for(row)
        if not event_faults.active(self.faults):
            return honest
        return event_faults.secret(
            self.faults,
            honest=honest,
            key_id=row.key_id,
            registered=row.webhook_id is not None,
            per_key=self._per_key_secret,
            first_key_of_account=self._first_key_of_account,
        )

    # --- target selection (spec §4) -----------------------------------------------------

    async def select_target(self, body: Mapping[str, Any], key: KeyContext) -> Binding | None:
        """Apply the target selection rules; None when the body names no target.

        First match wins: webhook.id, then webhook.url, then callback_url (spec §4). Every
        target the body names is checked all the same (an unknown id is a 404, a URL that
        breaks the callback rules a 400, even when it loses the resolution order): a body
        that carries a private URL is refused rather than silently half-used.
        """
        webhook = body.get("webhook")
        callback_url = body.get("callback_url")
        if webhook is not None and not isinstance(webhook, dict):
            raise ApiError(400, "webhook must be an object with `id` or `url`, and `events`")
        webhook = webhook or {}
        choices = self.config.choices
        if webhook and webhook.get("id") is None and webhook.get("url") is None:
            if "webhook-without-target-accepted" not in self.faults.enabled:
                if choices.empty_binding == "refuse":
                    raise ApiError(400, "webhook needs an `id` (registered webhook) or a `url`")
        requested = webhook.get("events")
        if event_faults.active(self.faults):
            requested = event_faults.known_events_only(self.faults, requested, ALL_EVENTS)
        events = self._chosen_events(
            parse_events(requested, where="webhook.events", choices=choices)
        )
        if events is not None and url_faults.active(self.faults):
            events = url_faults.listed_events(self.faults, events)
        candidates: dict[str, Binding] = {}
        # The choice losing_targets = "ignored": only the first match is looked at.
        first_only = choices.losing_targets == "ignored"
        if webhook.get("id") is not None:
            candidates["id"] = await self._registered_binding(webhook["id"], events, key)
        if webhook.get("url") is not None and not (first_only and candidates):
            target = await self._validated(webhook["url"], where="webhook.url")
            candidates["url"] = self._binding("inline", target, events, key)
        if first_only and candidates:
            callback_url = None
        if callback_url is not None and not url_faults.skips_loser(self.faults, candidates):
            target = await self._validated(callback_url, where="callback_url")
            candidates["callback"] = self._binding("callback", target, events, key)
        order: tuple[str, ...] = ("id", "url", "callback")
        if self.faults.on("precedence-callback-first"):
            order = ("callback", "url", "id")
        if url_faults.active(self.faults):
            order = url_faults.order(self.faults, order)
        for choice in order:
            if choice in candidates:
                if self.faults.on("losing-target-notified"):
                    losers = tuple(b for c, b in candidates.items() if c != choice)
                    return dataclasses.replace(candidates[choice], losers=losers)
                return candidates[choice]
        return None

    def _chosen_events(self, events: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """A binding's events under the choice ``events_list``: as listed, or added to
        the defaults (spec §6 "sent by default" read as always)."""
        if events is None or self.config.choices.events_list == "replaces-defaults":
            return events
        return tuple(dict.fromkeys((*DEFAULT_EVENTS, *events)))

    async def _validated(self, url: Any, *, where: str) -> ValidatedTarget:
        if self.faults.on("accepts-private-callback") and isinstance(url, str):
            return await self._unchecked_target(url, where=where)
        if url_faults.active(self.faults):
            return await url_faults.validate(self.policy, self.faults, url, where=where)
        return await validate_target(self.policy, url, where=where)

    async def _unchecked_target(self, url: str, *, where: str) -> ValidatedTarget:
        """For faults only: where a naive service would connect, with no address check.

        The host is resolved through the configured resolver and its first address used;
        the egress guard still keeps any connection on loopback.
        """
        try:
            parsed = httpx.URL(url)
            host = parsed.host
            try:
                address = str(ipaddress.ip_address(host))
            except ValueError:
                address = str((await self.policy.resolver.resolve(host))[0])
        except (httpx.InvalidURL, HostNotResolved, IndexError) as exc:
            raise ApiError(400, f"{where} cannot be reached: {exc}") from None
        return ValidatedTarget(
            url=url,
            host=host,
            port=parsed.port or (443 if parsed.scheme == "https" else 80),
            scheme=parsed.scheme,
            address=address,
        )

    def _binding(
        self,
        mode: str,
        target: ValidatedTarget,
        events: tuple[str, ...] | None,
        key: KeyContext,
        webhook_id: str | None = None,
    ) -> Binding:
        return Binding(
            mode=mode,  # type: ignore[arg-type]
            url=target.url,
            address=str(target.address),
            events=events or DEFAULT_EVENTS,
            account_id=key.account_id,
            key_id=key.key_id,
            webhook_id=webhook_id,
        )

    async def _registered_binding(
        self, webhook_id: Any, events: tuple[str, ...] | None, key: KeyContext
    ) -> Binding:
        unknown = ApiError(
            400 if "unknown-webhook-id-400" in self.faults.enabled else 404,
            "webhook.id names no registered webhook of this account (unknown or deleted)",
        )
        if not isinstance(webhook_id, str):
            raise unknown
        rows = self.store.read(
            "SELECT * FROM webhooks WHERE id = ? AND account_id = ? AND deleted_at IS NULL",
            (webhook_id, key.account_id),
        )
        if not rows and "foreign-webhook-id-accepted" in self.faults.enabled:
            rows = self.store.read(
                "SELECT * FROM webhooks WHERE id = ? AND deleted_at IS NULL", (webhook_id,)
            )
        if not rows:
            raise unknown
        row = rows[0]
        # The registered URL passed validation at creation; resolve it again now so the
        # delivery connects to an address checked at submit (no stale pin).
        target = await self._validated(row["url"], where="the registered webhook's url")
        return self._binding(
            "registered", target, events or events_from_row(row), key, webhook_id=webhook_id
        )

    def record_binding(
        self, conn: sqlite3.Connection, generation_id: str, binding: Binding
    ) -> None:
        """Store the binding in CORE's submit transaction."""
        if binding.losers:  # the fault losing-target-notified only
            self._losers[generation_id] = binding.losers
        conn.execute(
            "INSERT INTO webhook_bindings (generation_id, account_id, key_id, mode, webhook_id,"
            " url, address, events, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                generation_id,
                binding.account_id,
                binding.key_id,
                binding.mode,
                binding.webhook_id,
                binding.url,
                binding.address,
                events_json(binding.events),
                _now_iso(),
            ),
        )

    def binding(self, generation_id: str) -> Binding | None:
        rows = self.store.read(
            "SELECT * FROM webhook_bindings WHERE generation_id = ?", (generation_id,)
        )
        return _binding_from_row(rows[0]) if rows else None

    def binding_view(self, generation_id: str) -> dict[str, Any] | None:
        """What GET /v1/generations/{id} shows under ``webhook`` (mode, id, url, events)."""
        found = self.binding(generation_id)
        view = found.view() if found is not None else None
        if view is not None and "inline-mode-mislabelled" in self.faults.enabled:
            view["mode"] = "callback" if view["mode"] == "inline" else view["mode"]
        return view

    # --- events (spec §6) ---------------------------------------------------------------

    def enqueue_events(self, conn: sqlite3.Connection, generation: Mapping[str, Any]) -> None:
        """Queue the event a finished generation fires, in CORE's transaction.

        completed and failed fire when subscribed (the default); cancelled only when the
        binding subscribed to it explicitly (spec §6). The body is serialized here, once.
        """
        row = conn.execute(
            "SELECT * FROM webhook_bindings WHERE generation_id = ?", (generation["id"],)
        ).fetchone()
        if row is None:
            return
        binding = _binding_from_row(row)
        event = EVENT_FOR_STATUS.get(str(generation["status"]))
        if event is None:
            return
        if binding.webhook_id is not None and _webhook_deleted(conn, binding.webhook_id):
            # Deleted since the submit: a deleted webhook receives nothing more.
            log_event("delivery-skipped", generation_id=generation["id"], reason="webhook deleted")
            return
        subscribed = event in binding.events or (
            event == EVENT_CANCELLED and self.faults.on("cancelled-sent-unsubscribed")
        )
        faulty = event_faults.active(self.faults)
        if not subscribed and not (
            faulty and event_faults.sent_anyway(self.faults, event, binding.events)
        ):
            return
        if faulty and event_faults.suppressed(
            self.faults,
            event,
            str(generation["type"]),
            binding.events,
            default=tuple(binding.events) == tuple(DEFAULT_EVENTS),
            operation=_operation_of(conn, str(generation["id"])),
        ):
            return
        event_id = new_id("event", self.config.choices.id_form)
        if faulty:
            event_id = event_faults.event_id(self.faults, event_id)
        created_at = envelopes.timestamp_now(
            with_offset=not self.faults.on("created-at-without-offset"),
            form=self.config.choices.timestamp_form,
        )
        webhook_id = binding.webhook_id
        if binding.mode == "inline" and self.faults.on("webhook-id-not-null-inline"):
            webhook_id = "wh_" + secrets.token_hex(12)
        envelope = envelopes.build_envelope(
            event_id=event_id,
            event=event,
            data=envelopes.event_data(generation),
            webhook_id=webhook_id,
            created_at=created_at,
            api_version=(None if self.faults.on("envelope-missing-api-version") else API_VERSION),
        )
        if faulty:
            envelope = event_faults.envelope(self.faults, envelope, binding.mode)
        body = envelope
        if binding.mode == "callback" and not self.faults.on("callback-body-not-flattened"):
            body = envelopes.callback_body(envelope)
        if faulty:
            body = event_faults.body(
                self.faults, envelope, body, binding.mode, envelopes.callback_body
            )
        insert_delivery(
            conn,
            delivery_id=event_id,
            generation_id=str(generation["id"]),
            account_id=binding.account_id,
            key_id=binding.key_id,
            webhook_id=binding.webhook_id,
            mode=binding.mode,
            event_type=event,
            target_url=binding.url,
            address=binding.address,
            body=envelopes.body_bytes(body),
            created_at=_now_iso(),
            next_attempt_at=time.time(),
        )
        if self._losers:
            for loser in self._losers.pop(str(generation["id"]), ()):
                self._enqueue_loser(conn, generation, loser, envelope)

    def _enqueue_loser(
        self,
        conn: sqlite3.Connection,
        generation: Mapping[str, Any],
        loser: Binding,
        envelope: Mapping[str, Any],
    ) -> None:
        """The fault losing-target-notified: a losing target gets the event as well.

        Its own event id, and no generation_id on the row: the unique index allows one
        delivery per generation and event, which an honest service never exceeds.
        """
        event_id = envelopes.new_event_id()
        copy = {**envelope, "id": event_id, "webhook_id": loser.webhook_id}
        body = envelopes.callback_body(copy) if loser.mode == "callback" else copy
        insert_delivery(
            conn,
            delivery_id=event_id,
            generation_id=None,
            account_id=loser.account_id,
            key_id=loser.key_id,
            webhook_id=loser.webhook_id,
            mode=loser.mode,
            event_type=str(envelope["event"]),
            target_url=loser.url,
            address=loser.address,
            body=envelopes.body_bytes(body),
            created_at=_now_iso(),
            next_attempt_at=time.time(),
        )

    # --- registered webhooks (console, spec §2 / §4) ------------------------------------

    async def create_webhook(self, account_id: str, body: Any) -> dict[str, Any]:
        """Register a webhook; the whsec_ secret is in this answer and never again."""
        if not isinstance(body, dict):
            raise ApiError(400, 'send a JSON object: {"url": ..., "events": [...]}')
        target = await self._validated(body.get("url"), where="url")
        choices = self.config.choices
        events = parse_events(body.get("events"), where="events", choices=choices)
        events = self._chosen_events(events) or DEFAULT_EVENTS
        webhook_id = new_id("webhook", choices.id_form)
        secret = f"whsec_{secrets.token_urlsafe(32)}"
        if choices.hmac_keying == "base64-after-prefix":  # the form that keying decodes
            secret = "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode("ascii")
        if self.faults.on("webhook-secret-unprefixed"):
            secret = secrets.token_urlsafe(32)
        created_at = _now_iso()
        with self.store.transaction() as conn:
            conn.execute(
                "INSERT INTO webhooks (id, account_id, url, events, secret, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (webhook_id, account_id, target.url, events_json(events), secret, created_at),
            )
        created = {
            "id": webhook_id,
            "url": target.url,
            "events": list(events),
            "secret": secret,
            "created_at": created_at,
        }
        if self.faults.on("webhook-created-without-secret"):
            del created["secret"]
        return created

    def list_webhooks(self, account_id: str) -> dict[str, Any]:
        """The account's live registered webhooks, oldest first, never with a secret."""
        rows = self.store.read(
            "SELECT id, url, events, secret, created_at FROM webhooks"
            " WHERE (account_id = ? OR ?) AND deleted_at IS NULL ORDER BY created_at, rowid",
            (account_id, self.faults.on("webhook-list-all-accounts")),
        )
        webhooks = [
            {
                "id": row["id"],
                "url": row["url"],
                "events": list(events_from_row(row)),
                "created_at": row["created_at"],
            }
            for row in rows
        ]
        if self.faults.on("webhook-secret-listed"):
            for row, listed in zip(rows, webhooks, strict=True):
                listed["secret"] = row["secret"]
        if self.faults.on("webhook-list-omits-newest"):
            webhooks = webhooks[:-1]
        return {"webhooks": webhooks, "total": len(webhooks)}

    def delete_webhook(self, account_id: str, webhook_id: str) -> None:
        """Soft-delete: its deliveries stay readable, its pending retries end ``failed``."""
        now = _now_iso()
        with self.store.transaction() as conn:
            if registered_webhook_row(conn, webhook_id, account_id) is None:
                raise ApiError(404, "no registered webhook with this id in this account")
            if self.faults.on("webhook-delete-ignored"):
                return
            conn.execute("UPDATE webhooks SET deleted_at = ? WHERE id = ?", (now, webhook_id))
            conn.execute(
                "UPDATE webhook_deliveries SET outcome = 'failed', next_attempt_at = NULL,"
                " updated_at = ? WHERE webhook_id = ? AND outcome = 'pending_retry'",
                (now, webhook_id),
            )

    async def test_webhook(self, account_id: str, webhook_id: str) -> dict[str, Any]:
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
        if self.faults.on("webhook-test-sends-nothing"):
            return {"outcome": "delivered", "status_code": 200}
        target = await self._validated(webhook["url"], where="the registered webhook's url")
        choices = self.config.choices
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
                "output_url": f"{self.config.base_url}/outputs/webhook-test.png",
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
            created_at=_now_iso(),
        )
        with self.store.transaction() as conn:
            insert_delivery(
                conn,
                delivery_id=row.id,
                generation_id=None,
                account_id=account_id,
                key_id=None,
                webhook_id=webhook_id,
                mode=row.mode,
                event_type=row.event_type,
                target_url=row.target_url,
                address=row.address,
                body=row.body,
                created_at=row.created_at,
                next_attempt_at=None,  # not for the dispatcher: sent right here
            )
        result = await self._manual_attempt(
            row, address=row.address, generation_id=generation_id, trigger="test"
        )
        return self._manual_answer(row.id, result)

    # --- delivery lists (spec §4) -------------------------------------------------------

    def generation_deliveries(self, account_id: str, generation_id: str) -> dict[str, Any]:
        """Every event of one generation and every attempt, whatever the target mode."""
        owner = self.store.read("SELECT account_id FROM generations WHERE id = ?", (generation_id,))
        if not owner or owner[0]["account_id"] != account_id:
            raise ApiError(
                self._not_yours(bool(owner)), "no generation with this id in this key's account"
            )
        if self.faults.on("generation-deliveries-403"):
            raise ApiError(403, "fault: the generation's deliveries refuse API keys")
        deliveries, total = delivery_views(
            self.store, "generation_id = ?", [generation_id], newest_first=self._newest_first
        )
        answer = {"deliveries": deliveries, "total": total}
        if delivery_faults.active(self.faults):
            return delivery_faults.list_answer(self.faults, answer, "generation")
        return answer

    def webhook_deliveries(
        self, account_id: str, webhook_id: str, outcome: str | None, limit: str | None
    ) -> dict[str, Any]:
        """Deliveries of one registered webhook, newest first, filtered and limited."""
        if self.faults.on("webhook-deliveries-403"):
            raise ApiError(403, "fault: a webhook's deliveries refuse API keys")
        if outcome == "pending_retry" and self.faults.on("pending-filter-refused"):
            raise ApiError(400, "fault: outcome=pending_retry is refused")
        if outcome is not None and outcome not in OUTCOMES:
            if not self.faults.on("unknown-outcome-accepted"):
                raise ApiError(
                    400,
                    f"unknown outcome filter {outcome!r}: use one of {', '.join(OUTCOMES)}",
                )
            outcome = None
        # Fault list-unbounded: without a limit every record is returned.
        count = 10 * MAX_LIST_LIMIT if self.faults.on("list-unbounded") else MAX_LIST_LIMIT
        clamp = self.config.choices.list_limit == "clamp"
        if clamp:
            count = CLAMPED_DEFAULT_LIMIT
        if limit is not None:
            try:
                count = int(limit)
            except ValueError:
                count = 0
            if clamp:  # the choice list_limit: out-of-range values are brought in range
                count = min(count, MAX_LIST_LIMIT) if count >= 1 else CLAMPED_DEFAULT_LIMIT
            if not 1 <= count <= MAX_LIST_LIMIT:
                raise ApiError(
                    400, f"limit must be an integer from 1 to {MAX_LIST_LIMIT} (spec §8)"
                )
        owner = self.store.read("SELECT account_id FROM webhooks WHERE id = ?", (webhook_id,))
        if not owner or owner[0]["account_id"] != account_id:
            raise ApiError(
                self._not_yours(bool(owner)),
                "no registered webhook with this id in this key's account",
            )
        where, params = "webhook_id = ?", [webhook_id]
        if outcome is not None and not self.faults.on("outcome-filter-ignored"):
            where += " AND outcome = ?"
            params.append(outcome)
        if self.faults.on("limit-ignored"):
            count = MAX_LIST_LIMIT
        deliveries, total = delivery_views(
            self.store, where, params, limit=count, newest_first=self._newest_first
        )
        answer = {"deliveries": deliveries, "total": total}
        if delivery_faults.active(self.faults):
            return delivery_faults.list_answer(self.faults, answer, "webhook")
        return answer

    @property
    def _newest_first(self) -> bool:
        return self.config.choices.list_order == "newest-first"

    def _not_yours(self, exists: bool) -> int:
        """The status for an id that is unknown (404) or another account's (the choice
        ``foreign_resource_status``): both say nothing of the resource."""
        return self.config.choices.foreign_resource_status if exists else 404

    # --- redeliver (spec §3, §4, §7) ----------------------------------------------------

    async def redeliver(self, account_id: str, delivery_id: str) -> dict[str, Any]:
        """Replay a delivery: re-validate, then one attempt with the original bytes and id."""
        if self.faults.on("redeliver-needs-session"):
            raise ApiError(401, "fault: redeliver refuses API keys")
        row = await run_db(get_delivery, self.store, delivery_id)
        if row is None or row.account_id != account_id:
            raise ApiError(
                self._not_yours(row is not None), "no delivery with this id in this key's account"
            )
        if self.faults.on("redeliver-skips-revalidation"):
            # Fault: resolve and connect, without checking where the name now points.
            address = (await self._unchecked_target(row.target_url, where="target")).address
        else:
            # Spec §3: resolve again; a host that now resolves to a private address is a
            # 400, nothing is fetched and the record stays as it was.
            try:
                target = await self.policy.validate(row.target_url)
            except CallbackRejected as rejected:
                if url_faults.active(self.faults):
                    await url_faults.on_refused_redeliver(self, row, str(rejected))
                raise ApiError(
                    400,
                    f"the recorded target no longer passes validation ({rejected}); "
                    "nothing was sent and the delivery is unchanged",
                ) from None
            address = str(target.address)
        redeliverable = (
            {"exhausted"} if self.faults.on("redeliver-refuses-failed") else REDELIVERABLE
        )
        if self.config.choices.redeliverable == "any-final":
            redeliverable = REDELIVERABLE | {"delivered"}
        if row.outcome not in redeliverable:
            raise ApiError(
                409,
                f"only exhausted or failed deliveries can be redelivered; this one is "
                f"{row.outcome}",
            )
        if row.webhook_id is not None:
            live = self.store.read(
                "SELECT 1 FROM webhooks WHERE id = ? AND deleted_at IS NULL", (row.webhook_id,)
            )
            if not live:
                raise ApiError(409, "the webhook of this delivery has been deleted")
        generation_id = row.generation_id or _generation_id_of(row.body)
        if self.faults.on("redeliver-sends-nothing"):
            return {"id": delivery_id, "outcome": "delivered", "status_code": 200}
        sent = _with_new_event_id(row) if self.faults.on("redeliver-new-event-id") else row
        if self.config.choices.redelivery_bytes == "reserialized":  # the same JSON, new bytes
            sent = dataclasses.replace(row, body=json.dumps(json.loads(row.body)).encode())
        if self.faults.on("redeliver-payload-rebuilt"):
            body = json.loads(row.body)
            body["created_at"] = envelopes.timestamp_now()
            sent = dataclasses.replace(row, body=envelopes.body_bytes(body))
        result = await self._manual_attempt(
            sent,
            address=address,
            generation_id=generation_id,
            trigger="redeliver",
            record_id=row.id,
        )
        if self.faults.on("redeliver-answer-bare"):
            return {"id": delivery_id, "result": result.view()}
        if self.faults.on("redeliver-answers-recorded-status"):
            # Fault: the answer is the record as it was, not the new attempt's result.
            return {"id": delivery_id, "outcome": row.outcome, "status_code": row.status_code}
        return self._manual_answer(delivery_id, result)

    async def _manual_attempt(
        self,
        row: DeliveryRow,
        *,
        address: str,
        generation_id: str,
        trigger: str,
        record_id: str | None = None,
    ) -> AttemptResult:
        """One synchronous attempt (test or redeliver), recorded before answering."""
        record_id = record_id or row.id
        if record_id in self._manual:
            raise ApiError(409, "a redelivery of this delivery is already in progress")
        self._manual.add(record_id)
        try:
            # The choice redelivery_attempt_header: a redelivery's header numbers on from
            # the delivery's attempts, or starts again at 1; the record numbers on.
            restart = trigger == "redeliver" and (
                self.config.choices.redelivery_attempt_header == "restart"
            )
            request = DeliveryRequest(
                delivery_id=row.id,
                event_type=row.event_type,
                generation_id=generation_id,
                url=row.target_url,
                address=address,
                body=row.body,
                attempt=1 if restart else row.attempt_count + 1,
                secret=self.secret_for(row),
            )
            result = await send_attempt(
                await self.client(),
                request,
                timeout_s=self.delivery_policy.timeout_s,
                timer_slack_s=self.delivery_policy.timer_slack_s,
                options=self.options_for(row),
            )
            result = dataclasses.replace(result, n=row.attempt_count + 1)
            outcome = "delivered" if result.succeeded else "failed"
            await run_db(self._record_manual, record_id, result, trigger, outcome)
            log_event(
                "delivery",
                delivery_id=record_id,
                generation_id=row.generation_id,
                attempt=result.n,
                status=result.status,
                ms=result.ms,
                error=result.error,
                outcome=outcome,
                trigger=trigger,
            )
            return result
        finally:
            self._manual.discard(record_id)

    def _record_manual(
        self, delivery_id: str, result: AttemptResult, trigger: str, outcome: str
    ) -> None:
        with self.store.transaction() as conn:
            record_attempt(
                conn, delivery_id, result, trigger=trigger, outcome=outcome, next_attempt_at=None
            )

    @staticmethod
    def _manual_answer(delivery_id: str, result: AttemptResult) -> dict[str, Any]:
        return {
            "id": delivery_id,
            "outcome": "delivered" if result.succeeded else "failed",
            "status_code": result.status,
            "attempt": result.view(),
        }

    # --- routes -------------------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        """The console and /v1 routes of the webhook side (see ``routes.py``)."""
        from .routes import webhook_routes

        return webhook_routes(self)


def _operation_of(conn: sqlite3.Connection, generation_id: str) -> str:
    """The generation's operation (images.edit, ...), for the event faults only."""
    row = conn.execute(
        "SELECT operation FROM generations WHERE id = ?", (generation_id,)
    ).fetchone()
    return str(row[0]) if row is not None else ""


def _webhook_deleted(conn: sqlite3.Connection, webhook_id: str) -> bool:
    row = conn.execute("SELECT deleted_at FROM webhooks WHERE id = ?", (webhook_id,)).fetchone()
    return row is None or row["deleted_at"] is not None


def _binding_from_row(row: sqlite3.Row) -> Binding:
    return Binding(
        mode=row["mode"],
        url=row["url"],
        address=row["address"],
        events=tuple(json.loads(row["events"])),
        account_id=row["account_id"],
        key_id=row["key_id"],
        webhook_id=row["webhook_id"],
    )


def _generation_id_of(body: bytes) -> str:
    data = json.loads(body).get("data") or {}
    return str(data.get("generation_id") or "")


def _with_new_event_id(row: DeliveryRow) -> DeliveryRow:
    """Fault ``redeliver-new-event-id``: the replay carries a fresh id in body and header."""
    body = json.loads(row.body)
    body["id"] = envelopes.new_event_id()
    return dataclasses.replace(row, id=body["id"], body=envelopes.body_bytes(body))
