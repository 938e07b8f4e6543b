"""Generations: submit (202) and read; ``worker.py`` runs them.

Submit order (spec §4 "Target selection rules"): authenticate, count and scope-check the
request (``require_key``), check the tier's model categories, validate the body
(``submits.py``), let the webhooks part select and validate the delivery target (404/400
*before* any credit is spent), then in one transaction check the concurrency limit and
the daily credit cap, spend the credits, insert the generation and its binding, and queue
it for the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from reference.accounts import credit_day, now_iso
from reference.auth import Authenticator, KeyContext
from reference.bodies import read_json_object
from reference.config import Config
from reference.errors import ApiError
from reference.fault import Fault, Faults
from reference.ids import new_id
from reference.ratelimit import rate_limited, seconds_to_utc_midnight
from reference.store import Store
from reference.submits import Operation, faulty_body, validate_body
from reference.worker import FinishHooks, GenerationWorker

__all__ = ["DeliveryHooks", "GenerationService"]

# Faults injected here (``--fault NAME``; the registry, ``reference/faults.py``, collects them).
CREDIT_CAP_NOT_ENFORCED = Fault(
    "credit-cap-not-enforced",
    "CREDIT-CAP-01",
    "the daily credit cap is ignored",
)
CREDIT_CAP_WITHOUT_RETRY_AFTER = Fault(
    "credit-cap-without-retry-after",
    "CREDIT-CAP-02",
    "a 429 for the daily credit cap lacks Retry-After",
)
CREDIT_CAP_429_BARE = Fault(
    "credit-cap-429-bare",
    "CREDIT-429-01",
    "a 429 for the daily credit cap lacks the X-RateLimit-* headers",
)
CREDIT_CAP_REFUSAL_CHARGED = Fault(
    "credit-cap-refusal-charged",
    "CREDIT-CAP-06",
    "a submit refused for the daily credit cap still spends its credits",
)
CREDIT_CAP_OVERSHOOT_ADMITTED = Fault(
    "credit-cap-overshoot-admitted",
    "CREDIT-CAP-05",
    "a submit is admitted while credits used are below the cap, even if its price passes it",
)
CONCURRENCY_NOT_ENFORCED = Fault(
    "concurrency-not-enforced",
    "RATE-CONC-02",
    "the per-tier concurrency limit is ignored",
)
MODEL_CATEGORY_NOT_ENFORCED = Fault(
    "model-category-not-enforced",
    "TIER-MODEL-01",
    "submits for a model category outside the tier are accepted",
)
CREDITS_NOT_SPENT = Fault(
    "credits-not-spent",
    "CREDIT-SPEND-01",
    "generations spend no credits",
)
CREDITS_SPENT_BEFORE_VALIDATION = Fault(
    "credits-spent-before-validation",
    "TARGET-ID-03",
    "credits are spent before the delivery target is checked, and kept on 404/400",
)
CREDITS_KEPT_ON_BAD_TARGET = Fault(
    "credits-kept-on-bad-target",
    "TARGET-URL-02",
    "a submit refused for its callback target spends its credits all the same",
)
GENERATION_ID_MISSING = Fault(
    "generation-id-missing",
    "GEN-ID-01",
    "the 202 response of a submit has no id",
)
STATUS_200_INSTEAD_OF_202 = Fault(
    "status-200-instead-of-202",
    "GEN-IMAGE-07",
    "submits answer 200 instead of 202",
)
VIDEO_STATUS_200 = Fault(
    "video-status-200",
    "GEN-VIDEO-07",
    "video submits answer 200 instead of 202",
)
SIGNING_SECRET_ON_V1 = Fault(
    "signing-secret-on-v1",
    "SIG-KEY-05",
    "GET /v1/generations/{id} shows the key's webhook signing secret",
)
GENERATION_READ_404 = Fault(
    "generation-read-404",
    "GEN-READ-01",
    "GET /v1/generations/{id} answers 404 for the key that submitted the generation",
)
GENERATION_ID_REUSED = Fault(
    "generation-id-reused",
    "GEN-ID-02",
    "a body repeated within a minute gets the earlier generation's id (prompt as idempotency key)",
)
READ_CREDITS_UNREFUNDED = Fault(
    "read-credits-unrefunded",
    "GEN-CONSIST-01",
    "GET /v1/generations/{id} shows a failed generation's credits as spent (its event says 0)",
)
EXHAUSTED_GENERATION_HIDDEN = Fault(
    "exhausted-generation-hidden",
    "GEN-MISSED-01",
    "GET /v1/generations/{id} answers 404 once a delivery of the generation is exhausted",
)
EXHAUSTED_GENERATION_READS_FAILED = Fault(
    "exhausted-generation-reads-failed",
    "GEN-MISSED-02",
    "GET /v1/generations/{id} shows status failed once a delivery of the generation is exhausted",
)
SCOPE_REFUSAL_STILL_RUNS = Fault(
    "scope-refusal-still-runs",
    "SCOPE-DENY-02",
    "a submit refused with 403 for its scope still makes its generation and delivers it",
)
MALFORMED_BODY_SERVER_ERROR = Fault(
    "malformed-body-server-error",
    "GEN-JSON-03",
    "a submit whose body is not a JSON object (malformed JSON too) is answered 500",
)

#: Under the fault GENERATION_ID_REUSED: how long a repeated body answers the earlier id.
_REUSE_WINDOW_S = 60.0


class DeliveryHooks(FinishHooks, Protocol):
    """What the generation core needs from the webhooks part (``WebhookService``)."""

    async def select_target(self, body: Mapping[str, Any], key: KeyContext) -> Any: ...

    def record_binding(
        self, conn: sqlite3.Connection, generation_id: str, binding: Any
    ) -> None: ...

    def binding_view(self, generation_id: str) -> dict[str, Any] | None: ...


#: Generation states: queued, then completed, failed or cancelled. ("running" was a state
#: of earlier stores; start() turns any such row back into queued.)
_IN_FLIGHT = ("queued", "running")


@dataclass(eq=False)
class GenerationService:
    """Submits, reads and runs generations."""

    store: Store
    config: Config
    faults: Faults
    auth: Authenticator
    hooks: DeliveryHooks
    worker: GenerationWorker

    # --- submit -----------------------------------------------------------------------

    def _spend(self, conn: sqlite3.Connection, key: KeyContext, cost: int, day: str) -> None:
        """Spend ``cost`` credits of today, or 429 when the daily cap would be passed."""
        tier = self.auth.tier_of(key)
        row = conn.execute(
            "SELECT credits FROM credit_days WHERE account_id = ? AND day = ?",
            (key.account_id, day),
        ).fetchone()
        spent = row["credits"] if row else 0
        # The choice credit_cap: refuse a price that would pass the cap, or admit while
        # the credits used are below it (the cap is then refused once reached).
        over = spent + cost > tier.max_credits_per_day
        if self.config.choices.credit_cap == "refuse-at-cap" or self.faults.on(
            CREDIT_CAP_OVERSHOOT_ADMITTED
        ):
            over = spent >= tier.max_credits_per_day
        if over and not self.faults.on(CREDIT_CAP_NOT_ENFORCED):
            refusal = rate_limited(
                f"daily credit cap reached: {spent} of {tier.max_credits_per_day} credits "
                f"spent today and this request costs {cost}; the cap resets at 00:00 UTC",
                retry_after_s=seconds_to_utc_midnight(),
                window=self.auth.limiter.window_state(key.key_id, tier),
                faults=self.faults,
            )
            if self.faults.on(CREDIT_CAP_WITHOUT_RETRY_AFTER):
                refusal.headers.pop("Retry-After", None)
            if self.faults.on(CREDIT_CAP_429_BARE):
                for name in ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"):
                    refusal.headers.pop(name, None)
            if self.faults.on(CREDIT_CAP_REFUSAL_CHARGED):
                refusal.charge = cost  # type: ignore[attr-defined]  # spent by submit()
            raise refusal
        conn.execute(
            "INSERT INTO credit_days (account_id, day, credits) VALUES (?, ?, ?) "
            "ON CONFLICT (account_id, day) DO UPDATE SET credits = credits + excluded.credits",
            (key.account_id, day, cost),
        )

    def _check_concurrency(self, conn: sqlite3.Connection, key: KeyContext, due_at: float) -> float:
        """When a new generation of the key's account will be done: ``due_at``, or later
        when the choice ``concurrency = "queue"`` puts it behind the generations in flight
        (at most ``concurrent_limit`` run at once); by default a submit beyond the limit
        is refused with 429."""
        tier = self.auth.tier_of(key)
        (in_flight,) = conn.execute(
            "SELECT COUNT(*) FROM generations WHERE account_id = ? AND status IN (?, ?)",
            (key.account_id, *_IN_FLIGHT),
        ).fetchone()
        if in_flight >= tier.concurrent_limit and not self.faults.on(CONCURRENCY_NOT_ENFORCED):
            if self.config.choices.concurrency == "queue":
                # A slot frees when the limit-th latest generation in flight is done.
                (frees_at,) = conn.execute(
                    "SELECT due_at FROM generations WHERE account_id = ? AND status IN (?, ?)"
                    " ORDER BY due_at DESC LIMIT 1 OFFSET ?",
                    (key.account_id, *_IN_FLIGHT, max(0, tier.concurrent_limit - 1)),
                ).fetchone()
                return max(due_at, float(frees_at) + self.config.latency_ms / 1000)
            raise rate_limited(
                f"concurrency limit reached: {in_flight} generations of this account are in "
                f"flight and the tier allows {tier.concurrent_limit}; retry once one finishes",
                retry_after_s=max(1.0, self.config.latency_ms / 1000),
                window=self.auth.limiter.window_state(key.key_id, tier),
                faults=self.faults,
            )
        return due_at

    @contextlib.contextmanager
    def _body_errors(self, *, server_error: bool = False) -> Iterator[None]:
        """A body refused with 400 gets the status of the choice ``invalid_body_status``
        (spec §7 states 400 for bad callback targets only, which are judged elsewhere), or
        500 with *server_error* (a fault)."""
        try:
            yield
        except ApiError as refused:
            if refused.status == 400:
                refused.status = 500 if server_error else self.config.choices.invalid_body_status
            raise

    async def submit(self, request: Request, operation: Operation) -> Response:
        try:
            key = await self.auth_key(request, operation.scope)
        except ApiError as refused:
            if refused.status == 403 and self.faults.on(SCOPE_REFUSAL_STILL_RUNS):
                await self._accept(request, operation, await self.auth_key(request, None))
            raise
        return await self._accept(request, operation, key)

    async def _accept(self, request: Request, operation: Operation, key: KeyContext) -> Response:
        """A submit by a key allowed to make it: its generation made (or refused)."""
        tier = self.auth.tier_of(key)
        if operation.type not in tier.allowed_model_types and not self.faults.on(
            MODEL_CATEGORY_NOT_ENFORCED
        ):
            # Spec §2 names allowed_model_types; the status for a category the tier lacks
            # is not shown: 403 (an interpretation, like a missing scope), or the choice's.
            raise ApiError(
                self.config.choices.model_category_status,
                f"the tier {tier.plan_code!r} does not include the {operation.type!r} model "
                f"category (allowed: {', '.join(tier.allowed_model_types)})",
            )
        with self._body_errors(server_error=self.faults.on(MALFORMED_BODY_SERVER_ERROR)):
            body = await read_json_object(request)
        cost = self.auth.tiers.prices[operation.type]
        if self.faults.on(CREDITS_NOT_SPENT):
            cost = 0
        day = credit_day(self.faults)
        early_spend = self.faults.on(CREDITS_SPENT_BEFORE_VALIDATION)
        if early_spend:
            with self.store.transaction() as conn:
                self._spend(conn, key, cost, day)
        if self.faults.enabled:
            body = faulty_body(self.faults, operation, body)
        with self._body_errors():
            prompt, model, params = validate_body(operation, body, self.config.choices)
        try:
            binding = (
                await self.hooks.select_target(body, key) if operation.accepts_target else None
            )
        except ApiError as refused:
            if refused.status == 400 and self.faults.on(CREDITS_KEPT_ON_BAD_TARGET):
                with self.store.transaction() as conn:
                    self._spend(conn, key, cost, day)
            raise
        if self.faults.on(GENERATION_ID_REUSED):
            repeated = self._repeated(key, operation, prompt)
            if repeated is not None:
                return JSONResponse({"id": repeated}, status_code=202)
        generation_id = new_id("generation", self.config.choices.id_form)
        created = now_iso()
        due_at = time.time() + self.config.latency_ms / 1000
        try:
            with self.store.transaction() as conn:
                due_at = self._check_concurrency(conn, key, due_at)
                if not early_spend:
                    self._spend(conn, key, cost, day)
                conn.execute(
                    "INSERT INTO generations (id, account_id, key_id, type, operation, model, "
                    "prompt, params, status, credits_used, credits_day, due_at, created_at, "
                    "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?)",
                    (generation_id, key.account_id, key.key_id, operation.type, operation.name,
                     model, prompt, json.dumps(params), cost, day, due_at, created, created),
                )  # fmt: skip
                if binding is not None:
                    self.hooks.record_binding(conn, generation_id, binding)
        except ApiError as refused:
            charge = getattr(refused, "charge", 0)
            if charge:  # fault CREDIT_CAP_REFUSAL_CHARGED: the refused submit is billed
                with self.store.transaction() as conn:
                    conn.execute(
                        "UPDATE credit_days SET credits = credits + ? "
                        "WHERE account_id = ? AND day = ?",
                        (charge, key.account_id, day),
                    )
            raise
        if binding is None and operation.type == "image":
            if self.config.choices.image_without_target == "sync":
                return await self._run_now(generation_id, due_at, key)
        self.worker.schedule(generation_id, due_at)
        answer: dict[str, Any] = {
            "id": generation_id,
            "object": "generation",
            "status": self.config.choices.pending_status,
            "type": operation.type,
            "model": model,
            "created_at": created,
            "webhook": self.hooks.binding_view(generation_id) if binding is not None else None,
        }
        if self.config.choices.accepted_body == "id-only":
            answer = {"id": generation_id}
        if self.faults.on(GENERATION_ID_MISSING):
            del answer["id"]
        status = 200 if self.faults.on(STATUS_200_INSTEAD_OF_202) else 202
        if operation.type == "video" and self.faults.on(VIDEO_STATUS_200):
            status = 200
        return JSONResponse(answer, status_code=status)

    def _repeated(self, key: KeyContext, operation: Operation, prompt: str) -> str | None:
        """Under the fault GENERATION_ID_REUSED: the id of this account's generation of the
        same operation and prompt submitted in the last minute, if there is one."""
        rows = self.store.read(
            "SELECT id FROM generations WHERE account_id = ? AND operation = ? AND prompt = ? "
            "AND due_at >= ? ORDER BY due_at DESC LIMIT 1",
            (key.account_id, operation.name, prompt, time.time() - _REUSE_WINDOW_S),
        )
        return str(rows[0]["id"]) if rows else None

    def _exhausted(self, generation_id: str, fault: Fault) -> bool:
        """Under *fault*: a delivery of the generation is exhausted (the read then
        misreports the generation: gone, or failed)."""
        if not self.faults.on(fault):
            return False
        return bool(
            self.store.read(
                "SELECT 1 FROM webhook_deliveries WHERE generation_id = ? AND outcome = ?",
                (generation_id, "exhausted"),
            )
        )

    async def _run_now(self, generation_id: str, due_at: float, key: KeyContext) -> Response:
        """The choice ``image_without_target = "sync"``: an image without a delivery
        target is made during the request and answered 200 with the finished generation
        (spec §6 and §9 make images asynchronous only with a target)."""
        await asyncio.sleep(max(0.0, due_at - time.time()))
        await self.worker.run_now(generation_id)
        rows = self.store.read("SELECT * FROM generations WHERE id = ?", (generation_id,))
        return JSONResponse(self._body(self.view(rows[0], key)))

    async def auth_key(self, request: Request, scope: str | None) -> KeyContext:
        return self.auth.require_key(request, scope)

    def _body(self, record: dict[str, Any]) -> dict[str, Any]:
        """A generation as the choice ``generation_body`` shows it."""
        if self.config.choices.generation_body == "wrapped":
            return {"generation": record}
        return record

    # --- read -------------------------------------------------------------------------

    def view(self, row: sqlite3.Row, key: KeyContext) -> dict[str, Any]:
        params = json.loads(row["params"])
        record: dict[str, Any] = {
            "id": row["id"],
            "object": "generation",
            "type": row["type"],
            "operation": row["operation"],
            "model": row["model"],
            "status": self.config.choices.pending_status
            if row["status"] in _IN_FLIGHT
            else row["status"],
            "prompt": row["prompt"],
            **{f: params[f] for f in sorted(params)},
            # Built from the current base_url: a restart on another port keeps links valid.
            "output_url": self.worker.output_url(row["output_name"]),
            "error_message": row["error_message"],
            "credits_used": row["credits_used"],
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
            "completed_at": row["completed_at"],
            "webhook": self.hooks.binding_view(row["id"]) if row["type"] in ("image", "video")
            else None,
        }  # fmt: skip
        if self.faults.on(READ_CREDITS_UNREFUNDED) and row["status"] == "failed":
            record["credits_used"] = self.auth.tiers.prices[row["type"]]
        if self.faults.on(SIGNING_SECRET_ON_V1):
            record["signing_secret"] = key.signing_secret
        return record

    async def get(self, request: Request) -> Response:
        key = await self.auth_key(request, None)
        generation_id = request.path_params["generation_id"]
        rows = self.store.read(
            "SELECT * FROM generations WHERE id = ? AND account_id = ?",
            (generation_id, key.account_id),
        )
        hidden = self._exhausted(generation_id, EXHAUSTED_GENERATION_HIDDEN)
        if not rows or self.faults.on(GENERATION_READ_404) or hidden:
            # Another account's generation is indistinguishable from an unknown one,
            # unless the choice foreign_resource_status says 403 for it.
            status = 404
            if self.store.read("SELECT 1 FROM generations WHERE id = ?", (generation_id,)):
                status = self.config.choices.foreign_resource_status
            raise ApiError(status, f"no generation {generation_id!r} for this account")
        record = self.view(rows[0], key)
        if self._exhausted(generation_id, EXHAUSTED_GENERATION_READS_FAILED):
            record["status"] = "failed"
        return JSONResponse(self._body(record))
