"""How each attempt of a delivery is sent, and the attempts made on request (spec §5.6, §6).

:class:`Attempts` holds what every attempt needs: the delivery client (netguard's
egress-guarded transport), the signing secret of a delivery (the registered webhook's
whsec_ secret, else the per-key secret of the key that submitted the generation) and
the send options (honest unless a fault says otherwise); :meth:`Attempts.send` sends
one attempt with them. The dispatcher makes the automatic attempts through it;
:meth:`Attempts.manual` makes the one synchronous attempt of a console test delivery or
a redelivery and records it before answering.

Interpretation (the spec leaves it open): ``failed`` is the outcome of a single manual
attempt that did not succeed. Automatic attempts end ``delivered`` or ``exhausted``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

import httpx

from reference.aio import run_db
from reference.auth import signing_secret_for
from reference.config import Config
from reference.errors import ApiError
from reference.fault import Fault, Faults
from reference.store import Store

from . import delivery_faults, event_faults
from .dispatcher import DeliveryPolicy
from .records import DeliveryRow, log_attempt, record_attempt
from .sender import AttemptResult, DeliveryRequest, SendOptions, send_attempt

__all__ = ["Attempts", "manual_answer"]

# Faults injected here (``--fault NAME``; the registry, ``reference/faults.py``, collects them).
ONLY_200_SUCCESS = Fault(
    "only-200-success",
    "DLV-SUCCESS-01",
    "only a 200 reply counts as success, not any 2xx",
)
CLIENT_ERROR_SUCCESS = Fault(
    "client-error-success",
    "DLV-SUCCESS-02",
    "a 4xx reply counts as success: the delivery is not retried",
)
REDIRECT_SUCCESS = Fault(
    "redirect-success",
    "DLV-REDIRECT-02",
    "a 3xx reply counts as success (not followed, but not retried either)",
)
SIGNATURE_OVER_RESERIALIZED_BODY = Fault(
    "signature-over-reserialized-body",
    "SIG-STRING-01",
    "the signature is computed over a re-serialized body, not the bytes sent",
)
SIGNATURE_WRONG_KEY = Fault(
    "signature-wrong-key",
    "SIG-KEY-01",
    "deliveries are signed with a secret other than the webhook's or the key's",
)
FOLLOWS_REDIRECTS = Fault(
    "follows-redirects",
    "DLV-REDIRECT-01",
    "deliveries follow 3xx redirects",
)
DELIVERY_HEADER_MISMATCH = Fault(
    "delivery-header-mismatch",
    "DLV-HDR-03",
    "X-Service-Delivery differs from the body id",
)
DELIVERED_WITHOUT_SENDING = Fault(
    "delivered-without-sending",
    "DLV-ONCE-01",
    "deliveries are recorded as answered 200 but never sent",
)
REDELIVERY_SIGNED_AT_FIRST_SIGNING = Fault(
    "redelivery-signed-at-first-signing",
    "SIG-TS-03",
    "a redelivery is signed with the time the delivery was first signed",
)


class Attempts:
    """The client, secrets and options of every attempt; manual attempts."""

    def __init__(
        self,
        store: Store,
        config: Config,
        faults: Faults,
        policy: DeliveryPolicy,
        client_factory: Callable[[], httpx.AsyncClient],
    ) -> None:
        self.store = store
        self.config = config
        self.faults = faults
        #: The per-attempt timeout and its timer slack (a fault may change the timeout).
        self.policy = policy
        self._client_factory = client_factory
        self._client: httpx.AsyncClient | None = None
        #: Deliveries with a manual attempt under way (one at a time each).
        self._manual: set[str] = set()

    # --- the client ---------------------------------------------------------------------

    async def client(self) -> httpx.AsyncClient:
        """The delivery client, made on first use."""
        if self._client is None:
            self._client = self._client_factory()
        return self._client

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

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

    def signing_secret(self, row: DeliveryRow) -> str:
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

    # --- send options -------------------------------------------------------------------

    def _success_rule(self) -> Callable[[int], bool] | None:
        """Which statuses count as success under a success-rule fault; None: any 2xx."""
        if self.faults.on(ONLY_200_SUCCESS):
            return lambda status: status == 200
        if self.faults.on(CLIENT_ERROR_SUCCESS):
            return lambda status: 200 <= status < 300 or 400 <= status < 500
        if self.faults.on(REDIRECT_SUCCESS):
            return lambda status: 200 <= status < 400
        return None

    def options_for(self, row: DeliveryRow, *, redelivery: bool = False) -> SendOptions:
        """How to send an attempt of this delivery (a *redelivery*, or not): honest,
        unless a fault says otherwise (the signature faults need the row's body, hence per
        delivery)."""
        signed_override: bytes | None = None
        secret_override: str | None = None
        if self.faults.on(SIGNATURE_OVER_RESERIALIZED_BODY):
            # json.dumps' default separators differ from the compact bytes on the wire.
            signed_override = json.dumps(json.loads(row.body)).encode("utf-8")
        if self.faults.on(SIGNATURE_WRONG_KEY):
            # A stable secret that is neither the webhook's nor the key's.
            secret_override = signing_secret_for(self.config.master_secret, "wrong-key")
        return SendOptions(
            follow_redirects=self.faults.on(FOLLOWS_REDIRECTS),
            mismatched_delivery_header=self.faults.on(DELIVERY_HEADER_MISMATCH),
            signed_body_override=signed_override,
            signing_secret_override=secret_override,
            rewrite=self._rewrite if event_faults.active(self.faults) else None,
            counts_as_success=self._success_rule(),
            per_attempt=(
                delivery_faults.per_attempt(self.faults)
                if delivery_faults.active(self.faults)
                else None
            ),
            pretend_sent=self.faults.on(DELIVERED_WITHOUT_SENDING),
            **self._chosen_options(row, redelivery=redelivery),
        )

    def _chosen_options(self, row: DeliveryRow, *, redelivery: bool) -> dict[str, Any]:
        """The SendOptions of the open choices (``Config.choices``)."""
        choices = self.config.choices
        signed_at = None
        if choices.signature_time == "first-signing" or (
            redelivery and self.faults.on(REDELIVERY_SIGNED_AT_FIRST_SIGNING)
        ):
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

    # --- sending ------------------------------------------------------------------------

    async def send(
        self,
        row: DeliveryRow,
        *,
        attempt: int,
        secret: str,
        address: str,
        generation_id: str,
        redelivery: bool = False,
    ) -> AttemptResult:
        """Send attempt number *attempt* of a stored delivery to the validated *address*,
        signed with *secret*, with the delivery's send options and the policy's timeout:
        what an automatic attempt and a manual one both do (never raises for network
        failures)."""
        request = DeliveryRequest(
            delivery_id=row.id,
            event_type=row.event_type,
            generation_id=generation_id,
            url=row.target_url,
            address=address,
            body=row.body,
            attempt=attempt,
            secret=secret,
        )
        return await send_attempt(
            await self.client(),
            request,
            timeout_s=self.policy.timeout_s,
            timer_slack_s=self.policy.timer_slack_s,
            options=self.options_for(row, redelivery=redelivery),
        )

    # --- manual attempts (console test, redeliver) --------------------------------------

    async def manual(
        self,
        row: DeliveryRow,
        *,
        address: str,
        generation_id: str,
        trigger: str,
        record_id: str | None = None,
    ) -> AttemptResult:
        """One synchronous attempt (test or redeliver), recorded before answering.

        Numbered after the previous attempts (X-Service-Attempt continues: 4 after three
        automatic attempts, unless the choice redelivery_attempt_header restarts it), with
        a fresh signature timestamp (unless the choice signature_time keeps the first).
        """
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
            result = await self.send(
                row,
                attempt=1 if restart else row.attempt_count + 1,
                secret=self.secret_for(row),
                address=address,
                generation_id=generation_id,
                redelivery=trigger == "redeliver",
            )
            result = dataclasses.replace(result, n=row.attempt_count + 1)
            outcome = "delivered" if result.succeeded else "failed"
            await run_db(self.record_manual, record_id, result, trigger, outcome)
            log_attempt(record_id, row.generation_id, result, outcome=outcome, trigger=trigger)
            return result
        finally:
            self._manual.discard(record_id)

    def record_manual(
        self, delivery_id: str, result: AttemptResult, trigger: str, outcome: str
    ) -> None:
        """Store a manual attempt and the outcome it leaves (nothing is scheduled after)."""
        with self.store.transaction() as conn:
            record_attempt(
                conn, delivery_id, result, trigger=trigger, outcome=outcome, next_attempt_at=None
            )


def manual_answer(delivery_id: str, result: AttemptResult) -> dict[str, Any]:
    """The answer to a console test delivery or a redelivery: the new attempt's result."""
    return {
        "id": delivery_id,
        "outcome": "delivered" if result.succeeded else "failed",
        "status_code": result.status,
        "attempt": result.view(),
    }
