"""The two delivery lists (spec §4): every delivery of a generation, and the deliveries of
one registered webhook, newest first, filtered by outcome and limited.

Both answer ``{"deliveries": [...], "total": N}``; ``total`` counts every match, not only
the ``limit`` returned. Interpretation (spec §8 names only the maximum): ``limit`` is an
integer 1..100, default 100; any other value is a 400, as is an unknown outcome filter
(with the choice ``list_limit = "clamp"``: brought in range, default 20). The order (the
choice ``list_order``) and the status for another account's id (``foreign_resource_status``)
are choices too.
"""

from __future__ import annotations

from typing import Any

from reference.config import Choices
from reference.errors import ApiError
from reference.fault import Fault, Faults
from reference.store import Store

from . import delivery_faults
from .records import delivery_views
from .schema import OUTCOMES

__all__ = ["MAX_LIST_LIMIT", "DeliveryLists", "not_yours"]

# Faults injected here (``--fault NAME``; the registry, ``reference/faults.py``, collects them).
GENERATION_DELIVERIES_403 = Fault(
    "generation-deliveries-403",
    "REC-GEN-01",
    "GET /v1/generations/{id}/deliveries refuses API keys with 403",
)
WEBHOOK_DELIVERIES_403 = Fault(
    "webhook-deliveries-403",
    "REC-HOOK-01",
    "GET /v1/webhooks/{id}/deliveries refuses API keys with 403",
)
PENDING_FILTER_REFUSED = Fault(
    "pending-filter-refused",
    "REC-HOOK-03",
    "outcome=pending_retry is answered 400",
)
UNKNOWN_OUTCOME_ACCEPTED = Fault(
    "unknown-outcome-accepted",
    "REC-HOOK-05",
    "an unknown outcome filter value is ignored instead of answered 400",
)
LIST_UNBOUNDED = Fault(
    "list-unbounded",
    "REC-HOOK-07",
    "a webhook's delivery list asked without a limit returns every record (over 100)",
)
OUTCOME_FILTER_IGNORED = Fault(
    "outcome-filter-ignored",
    "REC-HOOK-04",
    "a webhook's delivery list ignores a valid outcome filter",
)
LIMIT_ABOVE_MAXIMUM_HONOURED = Fault(
    "limit-above-maximum-honoured",
    "REC-HOOK-13",
    "a webhook's delivery list serves a limit above 100 in full (limit=101: 101 records)",
)
LIMIT_IGNORED = Fault(
    "limit-ignored",
    "REC-HOOK-06",
    "a webhook's delivery list ignores limit and returns up to 100 records",
)


#: Spec §8: "Delivery list limit: 100 maximum".
MAX_LIST_LIMIT = 100
#: Records a webhook's delivery list gives without a ``limit`` under the choice
#: ``list_limit = "clamp"`` (the default limit is not shown).
CLAMPED_DEFAULT_LIMIT = 20


def not_yours(choices: Choices, exists: bool) -> int:
    """The status for an id that is unknown (404) or another account's (the choice
    ``foreign_resource_status``): both say nothing of the resource."""
    return choices.foreign_resource_status if exists else 404


class DeliveryLists:
    """The delivery list endpoints over the store."""

    def __init__(self, store: Store, faults: Faults, choices: Choices) -> None:
        self.store = store
        self.faults = faults
        self.choices = choices
        self.newest_first = choices.list_order == "newest-first"

    def of_generation(self, account_id: str, generation_id: str) -> dict[str, Any]:
        """Every event of one generation and every attempt, whatever the target mode."""
        owner = self.store.read("SELECT account_id FROM generations WHERE id = ?", (generation_id,))
        if not owner or owner[0]["account_id"] != account_id:
            raise ApiError(
                not_yours(self.choices, bool(owner)),
                "no generation with this id in this key's account",
            )
        if self.faults.on(GENERATION_DELIVERIES_403):
            raise ApiError(403, "fault: the generation's deliveries refuse API keys")
        deliveries, total = delivery_views(
            self.store, "generation_id = ?", [generation_id], newest_first=self.newest_first
        )
        answer = {"deliveries": deliveries, "total": total}
        if delivery_faults.active(self.faults):
            return delivery_faults.list_answer(self.faults, answer, "generation")
        return answer

    def of_webhook(
        self, account_id: str, webhook_id: str, outcome: str | None, limit: str | None
    ) -> dict[str, Any]:
        """Deliveries of one registered webhook, newest first, filtered and limited."""
        if self.faults.on(WEBHOOK_DELIVERIES_403):
            raise ApiError(403, "fault: a webhook's deliveries refuse API keys")
        if outcome == "pending_retry" and self.faults.on(PENDING_FILTER_REFUSED):
            raise ApiError(400, "fault: outcome=pending_retry is refused")
        if outcome is not None and outcome not in OUTCOMES:
            if not self.faults.on(UNKNOWN_OUTCOME_ACCEPTED):
                raise ApiError(
                    400,
                    f"unknown outcome filter {outcome!r}: use one of {', '.join(OUTCOMES)}",
                )
            outcome = None
        # Fault LIST_UNBOUNDED: without a limit every record is returned.
        count = 10 * MAX_LIST_LIMIT if self.faults.on(LIST_UNBOUNDED) else MAX_LIST_LIMIT
        clamp = self.choices.list_limit == "clamp"
        if clamp:
            count = CLAMPED_DEFAULT_LIMIT
        if limit is not None:
            try:
                count = int(limit)
            except ValueError:
                count = 0
            if clamp:  # the choice list_limit: out-of-range values are brought in range
                count = min(count, MAX_LIST_LIMIT) if count >= 1 else CLAMPED_DEFAULT_LIMIT
            # Fault LIMIT_ABOVE_MAXIMUM_HONOURED: limits beyond the maximum are served.
            highest = (
                10 * MAX_LIST_LIMIT
                if self.faults.on(LIMIT_ABOVE_MAXIMUM_HONOURED)
                else MAX_LIST_LIMIT
            )
            if not 1 <= count <= highest:
                raise ApiError(
                    400, f"limit must be an integer from 1 to {MAX_LIST_LIMIT} (spec §8)"
                )
        owner = self.store.read("SELECT account_id FROM webhooks WHERE id = ?", (webhook_id,))
        if not owner or owner[0]["account_id"] != account_id:
            raise ApiError(
                not_yours(self.choices, bool(owner)),
                "no registered webhook with this id in this key's account",
            )
        where, params = "webhook_id = ?", [webhook_id]
        if outcome is not None and not self.faults.on(OUTCOME_FILTER_IGNORED):
            where += " AND outcome = ?"
            params.append(outcome)
        if self.faults.on(LIMIT_IGNORED):
            count = MAX_LIST_LIMIT
        deliveries, total = delivery_views(
            self.store, where, params, limit=count, newest_first=self.newest_first
        )
        answer = {"deliveries": deliveries, "total": total}
        if delivery_faults.active(self.faults):
            return delivery_faults.list_answer(self.faults, answer, "webhook")
        return answer
