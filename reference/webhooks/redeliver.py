"""Redeliver: replay a delivery with its original bytes and event id (spec §3, §4, §7).

The recorded target is validated again first: a host that now resolves to a private
address is a 400, nothing is fetched and the record stays as it was (spec §3). Then only
``exhausted`` or ``failed`` deliveries may be replayed (spec §3; the choice
``redeliverable`` adds ``delivered``); a ``pending_retry`` one gets 409, as does a
delivery of a deleted webhook (an interpretation). The replay is one attempt, made
synchronously and recorded on the delivery, with a fresh signature timestamp and the
original bytes and event id.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from reference.aio import run_db
from reference.config import Choices
from reference.errors import ApiError
from reference.fault import Fault, Faults
from reference.netguard import CallbackRejected
from reference.store import Store

from . import envelopes, url_faults
from .attempts import Attempts, manual_answer
from .lists import not_yours
from .records import DeliveryRow, get_delivery
from .targets import Targets

__all__ = ["REDELIVERABLE", "Redelivery"]

# Faults injected here (``--fault NAME``; the registry, ``reference/faults.py``, collects them).
REDELIVER_NEEDS_SESSION = Fault(
    "redeliver-needs-session",
    "REDLV-AUTH-01",
    "redeliver refuses API keys with 401",
)
REDELIVER_SKIPS_REVALIDATION = Fault(
    "redeliver-skips-revalidation",
    "REDLV-REBIND-01",
    "redeliver resolves the target again but sends without checking the address",
)
REDELIVER_REFUSES_FAILED = Fault(
    "redeliver-refuses-failed",
    "REDLV-STATE-02",
    "a delivery whose outcome is failed cannot be redelivered (409)",
)
REDELIVER_SENDS_NOTHING = Fault(
    "redeliver-sends-nothing",
    "REDLV-STATE-01",
    "redeliver answers delivered without sending anything",
)
REDELIVER_NEW_EVENT_ID = Fault(
    "redeliver-new-event-id",
    "REDLV-PAYLOAD-02",
    "a redelivery carries a new event id instead of the original one",
)
REDELIVER_PAYLOAD_REBUILT = Fault(
    "redeliver-payload-rebuilt",
    "REDLV-PAYLOAD-01",
    "a redelivery carries a rebuilt payload (a new created_at)",
)
REDELIVER_ANSWER_BARE = Fault(
    "redeliver-answer-bare",
    "REDLV-RESP-01",
    "the redeliver answer has no outcome or status_code",
)
REDELIVER_ANSWERS_RECORDED_STATUS = Fault(
    "redeliver-answers-recorded-status",
    "REDLV-STATE-03",
    "redeliver answers the record's previous outcome and status, not the new attempt's",
)
REDELIVERY_OUTCOME_KEPT = Fault(
    "redelivery-outcome-kept",
    "REDLV-STATE-04",
    "a successful redelivery leaves the record's outcome as it was (exhausted or failed)",
)


#: Redeliverable states (spec §3: "exhausted or failed").
REDELIVERABLE = frozenset({"exhausted", "failed"})


@dataclasses.dataclass(eq=False)
class Redelivery:
    """POST /v1/webhooks/deliveries/{id}/redeliver."""

    store: Store
    faults: Faults
    targets: Targets
    attempts: Attempts
    choices: Choices

    async def redeliver(self, account_id: str, delivery_id: str) -> dict[str, Any]:
        """Replay a delivery: re-validate, then one attempt with the original bytes and id."""
        if self.faults.on(REDELIVER_NEEDS_SESSION):
            raise ApiError(401, "fault: redeliver refuses API keys")
        row = await run_db(get_delivery, self.store, delivery_id)
        if row is None or row.account_id != account_id:
            raise ApiError(
                not_yours(self.choices, row is not None),
                "no delivery with this id in this key's account",
            )
        if self.faults.on(REDELIVER_SKIPS_REVALIDATION):
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
        redeliverable = {"exhausted"} if self.faults.on(REDELIVER_REFUSES_FAILED) else REDELIVERABLE
        if self.choices.redeliverable == "any-final":
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
        if self.faults.on(REDELIVER_SENDS_NOTHING):
            return {"id": delivery_id, "outcome": "delivered", "status_code": 200}
        sent = _with_new_event_id(row) if self.faults.on(REDELIVER_NEW_EVENT_ID) else row
        if self.choices.redelivery_bytes == "reserialized":  # the same JSON, new bytes
            sent = dataclasses.replace(row, body=json.dumps(json.loads(row.body)).encode())
        if self.faults.on(REDELIVER_PAYLOAD_REBUILT):
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
        if self.faults.on(REDELIVERY_OUTCOME_KEPT):
            # Fault: the record keeps the state it had, whatever the new attempt's result.
            await run_db(_restore_outcome, self.store, row.id, row.outcome)
        if self.faults.on(REDELIVER_ANSWER_BARE):
            return {"id": delivery_id, "result": result.view()}
        if self.faults.on(REDELIVER_ANSWERS_RECORDED_STATUS):
            # Fault: the answer is the record as it was, not the new attempt's result.
            return {"id": delivery_id, "outcome": row.outcome, "status_code": row.status_code}
        return manual_answer(delivery_id, result)


def _restore_outcome(store: Store, delivery_id: str, outcome: str) -> None:
    """Fault REDELIVERY_OUTCOME_KEPT: put the record's outcome back as it was."""
    with store.transaction() as conn:
        conn.execute(
            "UPDATE webhook_deliveries SET outcome = ? WHERE id = ?", (outcome, delivery_id)
        )


def _generation_id_of(body: bytes) -> str:
    data = json.loads(body).get("data") or {}
    return str(data.get("generation_id") or "")


def _with_new_event_id(row: DeliveryRow) -> DeliveryRow:
    """Fault REDELIVER_NEW_EVENT_ID: the replay carries a fresh id in body and header."""
    body = json.loads(row.body)
    body["id"] = envelopes.new_event_id()
    return dataclasses.replace(row, id=body["id"], body=envelopes.body_bytes(body))
