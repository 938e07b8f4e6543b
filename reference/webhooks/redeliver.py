"""Redeliver: replay a delivery with its original bytes and event id (spec §3, §4, §7).

The recorded target is validated again first: a host that now resolves to a private
address is a 400, nothing is fetched and the record stays as it was (spec §3). Then only
``exhausted`` or ``failed`` deliveries may be replayed (spec §3); a ``delivered`` or
``pending_retry`` one gets 409, as does a delivery of a deleted webhook (an
interpretation). The replay is one attempt, made synchronously and recorded on the
delivery, with a fresh signature timestamp and the original bytes and event id.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from reference.aio import run_db
from reference.errors import ApiError
from reference.faults import Faults
from reference.netguard import CallbackRejected
from reference.store import Store

from . import envelopes, url_faults
from .attempts import Attempts, manual_answer
from .records import DeliveryRow, get_delivery
from .targets import Targets

__all__ = ["REDELIVERABLE", "Redelivery"]

#: Redeliverable states (spec §3: "exhausted or failed").
REDELIVERABLE = frozenset({"exhausted", "failed"})


class Redelivery:
    """POST /v1/webhooks/deliveries/{id}/redeliver."""

    def __init__(
        self,
        store: Store,
        faults: Faults,
        targets: Targets,
        attempts: Attempts,
    ) -> None:
        self.store = store
        self.faults = faults
        self.targets = targets
        self.attempts = attempts

    async def redeliver(self, account_id: str, delivery_id: str) -> dict[str, Any]:
        """Replay a delivery: re-validate, then one attempt with the original bytes and id."""
        if self.faults.on("redeliver-needs-session"):
            raise ApiError(401, "fault: redeliver refuses API keys")
        row = await run_db(get_delivery, self.store, delivery_id)
        if row is None or row.account_id != account_id:
            raise ApiError(404, "no delivery with this id in this key's account")
        if self.faults.on("redeliver-skips-revalidation"):
            # Fault: resolve and connect, without checking where the name now points.
            address = (await self.targets.unchecked(row.target_url, where="target")).address
        else:
            # Spec §3: resolve again; a host that now resolves to a private address is a
            # 400, nothing is fetched and the record stays as it was.
            try:
                target = await self.targets.policy.validate(row.target_url)
            except CallbackRejected as rejected:
                if url_faults.active(self.faults):
                    await url_faults.on_refused_redeliver(
                        self.faults, self.targets.policy, self.attempts, row, str(rejected)
                    )
                raise ApiError(
                    400,
                    f"the recorded target no longer passes validation ({rejected}); "
                    "nothing was sent and the delivery is unchanged",
                ) from None
            address = str(target.address)
        redeliverable = (
            {"exhausted"} if self.faults.on("redeliver-refuses-failed") else REDELIVERABLE
        )
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
        if self.faults.on("redeliver-payload-rebuilt"):
            body = json.loads(row.body)
            body["created_at"] = envelopes.timestamp_now()
            sent = dataclasses.replace(row, body=envelopes.body_bytes(body))
        result = await self.attempts.manual(
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
        return manual_answer(delivery_id, result)


def _generation_id_of(body: bytes) -> str:
    data = json.loads(body).get("data") or {}
    return str(data.get("generation_id") or "")


def _with_new_event_id(row: DeliveryRow) -> DeliveryRow:
    """Fault ``redeliver-new-event-id``: the replay carries a fresh id in body and header."""
    body = json.loads(row.body)
    body["id"] = envelopes.new_event_id()
    return dataclasses.replace(row, id=body["id"], body=envelopes.body_bytes(body))
