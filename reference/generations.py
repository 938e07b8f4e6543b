"""Generations: submit (202) and read; ``worker.py`` runs them.

Submit order (spec §4 "Target selection rules"): authenticate, count and scope-check the
request (``require_key``), check the tier's model categories, validate the body, let the
webhooks part select and validate the delivery target (404/400 *before* any credit is
spent), then in one transaction check the concurrency limit and the daily credit cap,
spend the credits, insert the generation and its binding, and queue it for the worker.
"""

from __future__ import annotations

import json
import math
import secrets
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from reference.accounts import now_iso
from reference.auth import Authenticator, KeyContext
from reference.bodies import read_json_object
from reference.config import Config
from reference.errors import ApiError
from reference.fault import Fault, Faults
from reference.ratelimit import rate_limited, seconds_to_utc_midnight, utc_day
from reference.store import Store
from reference.worker import FinishHooks, GenerationWorker

__all__ = [
    "OPERATIONS",
    "DeliveryHooks",
    "GenerationService",
    "Operation",
]

# Faults injected here (``--fault NAME``; the registry, ``reference/faults.py``, collects them).
CREDIT_CAP_NOT_ENFORCED = Fault(
    "credit-cap-not-enforced", "CREDIT-CAP-01", "the daily credit cap is ignored"
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
CONCURRENCY_NOT_ENFORCED = Fault(
    "concurrency-not-enforced", "RATE-CONC-02", "the per-tier concurrency limit is ignored"
)
BLANK_PROMPT_SERVER_ERROR = Fault(
    "blank-prompt-server-error",
    "ERR-5XX-01",
    "a submit whose prompt is the empty string answers 500 instead of 400",
)
IMAGE_PROMPT_OPTIONAL = Fault(
    "image-prompt-optional",
    "GEN-IMAGE-01",
    "an image submit without prompt is accepted (with a default prompt)",
)
IMAGE_PROMPT_ANY_TYPE = Fault(
    "image-prompt-any-type",
    "GEN-IMAGE-02",
    "an image submit whose prompt is not a string is accepted (its JSON text is the prompt)",
)
VIDEO_PROMPT_OPTIONAL = Fault(
    "video-prompt-optional",
    "GEN-VIDEO-01",
    "a video submit without prompt is accepted (with a default prompt)",
)
VIDEO_DURATION_ANY_TYPE = Fault(
    "video-duration-any-type",
    "GEN-VIDEO-04",
    "a video submit whose duration is not a number is accepted (the duration ignored)",
)
MODEL_CATEGORY_NOT_ENFORCED = Fault(
    "model-category-not-enforced",
    "TIER-MODEL-01",
    "submits for a model category outside the tier are accepted",
)
CREDITS_NOT_SPENT = Fault("credits-not-spent", "CREDIT-SPEND-01", "generations spend no credits")
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
    "generation-id-missing", "GEN-ID-01", "the 202 response of a submit has no id"
)
STATUS_200_INSTEAD_OF_202 = Fault(
    "status-200-instead-of-202", "GEN-IMAGE-07", "submits answer 200 instead of 202"
)
VIDEO_STATUS_200 = Fault(
    "video-status-200", "GEN-VIDEO-07", "video submits answer 200 instead of 202"
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


#: Longest prompt accepted (spec §8: not shown; an interpretation).
MAX_PROMPT_CHARS = 32_000
#: Generation states: queued, then completed, failed or cancelled. ("running" was a state
#: of earlier stores; start() turns any such row back into queued.)
_IN_FLIGHT = ("queued", "running")


class DeliveryHooks(FinishHooks, Protocol):
    """What the generation core needs from the webhooks part (``WebhookService``)."""

    async def select_target(self, body: Mapping[str, Any], key: KeyContext) -> Any: ...

    def record_binding(
        self, conn: sqlite3.Connection, generation_id: str, binding: Any
    ) -> None: ...

    def binding_view(self, generation_id: str) -> dict[str, Any] | None: ...


@dataclass(frozen=True)
class Operation:
    """One submit endpoint: its path, scope, generation type and accepted optional fields."""

    path: str
    name: str
    scope: str
    type: str
    default_model: str
    string_fields: tuple[str, ...] = ()
    number_fields: tuple[str, ...] = ()
    #: Spec §6: events apply to image and video generations; the extensions take no target.
    accepts_target: bool = True


OPERATIONS: tuple[Operation, ...] = (
    Operation("/v1/images/generate", "images.generate", "images:generate", "image", "image-1",
              string_fields=("size",)),
    Operation("/v1/images/edit", "images.edit", "images:edit", "image", "image-1",
              string_fields=("size", "image", "mask")),
    Operation("/v1/videos/generate", "videos.generate", "videos:generate", "video", "video-1",
              string_fields=("resolution", "image"), number_fields=("duration",)),
    Operation("/v1/audio/generate", "audio.generate", "audio:generate", "audio", "audio-1",
              string_fields=("voice", "format"), number_fields=("duration",),
              accepts_target=False),
    Operation("/v1/agents/run", "agents.run", "agent:run", "agent", "agent-1",
              accepts_target=False),
)  # fmt: skip


def _check_string(body: Mapping[str, Any], field: str) -> str | None:
    value = body.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ApiError(400, f"`{field}` must be a string, not {_json_type(value)}")
    if not value.strip():
        raise ApiError(400, f"`{field}` must not be empty")
    if len(value) > 2048:
        raise ApiError(400, f"`{field}` is too long (at most 2048 characters)")
    return value


def _check_number(body: Mapping[str, Any], field: str) -> float | None:
    value = body.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ApiError(400, f"`{field}` must be a number (seconds), not {_json_type(value)}")
    if not math.isfinite(value) or value <= 0 or value > 600:
        raise ApiError(400, f"`{field}` must be a positive number of seconds, at most 600")
    return value


def _json_type(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string",
             list: "an array", dict: "an object", type(None): "null"}  # fmt: skip
    return names.get(type(value), type(value).__name__)


def validate_body(operation: Operation, body: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """Prompt, model and accepted optional fields of a submit body, or 400.

    Unknown fields are tolerated (the spec leaves other fields "not shown"); the fields
    the reference knows are type-checked.
    """
    prompt = body.get("prompt")
    if prompt is None:
        raise ApiError(400, "`prompt` is required: a non-empty string")
    if not isinstance(prompt, str):
        raise ApiError(400, f"`prompt` must be a string, not {_json_type(prompt)}")
    if not prompt.strip():
        raise ApiError(400, "`prompt` must not be empty")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise ApiError(400, f"`prompt` is too long: at most {MAX_PROMPT_CHARS} characters")
    model = _check_string(body, "model") or operation.default_model
    params: dict[str, Any] = {}
    for field in operation.string_fields:
        text = _check_string(body, field)
        if text is not None:
            params[field] = text
    for field in operation.number_fields:
        number = _check_number(body, field)
        if number is not None:
            params[field] = number
    if not operation.accepts_target:
        for field in ("webhook", "callback_url"):
            if body.get(field) is not None:
                raise ApiError(
                    400,
                    f"`{field}` is not accepted here: delivery targets apply to image and "
                    "video generations (spec §6); poll GET /v1/generations/{id} instead",
                )
    return prompt, model, params


class GenerationService:
    """Submits, reads and runs generations."""

    def __init__(
        self,
        store: Store,
        config: Config,
        faults: Faults,
        authenticator: Authenticator,
        hooks: DeliveryHooks,
        worker: GenerationWorker,
    ) -> None:
        self.store = store
        self.config = config
        self.faults = faults
        self.auth = authenticator
        self.hooks = hooks
        self.worker = worker

    # --- submit -----------------------------------------------------------------------

    def _spend(self, conn: sqlite3.Connection, key: KeyContext, cost: int, day: str) -> None:
        """Spend ``cost`` credits of today, or 429 when the daily cap would be passed."""
        tier = self.auth.tier_of(key)
        row = conn.execute(
            "SELECT credits FROM credit_days WHERE account_id = ? AND day = ?",
            (key.account_id, day),
        ).fetchone()
        spent = row["credits"] if row else 0
        if spent + cost > tier.max_credits_per_day and not self.faults.on(CREDIT_CAP_NOT_ENFORCED):
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

    def _check_concurrency(self, conn: sqlite3.Connection, key: KeyContext) -> None:
        tier = self.auth.tier_of(key)
        (in_flight,) = conn.execute(
            "SELECT COUNT(*) FROM generations WHERE account_id = ? AND status IN (?, ?)",
            (key.account_id, *_IN_FLIGHT),
        ).fetchone()
        if in_flight >= tier.concurrent_limit and not self.faults.on(CONCURRENCY_NOT_ENFORCED):
            raise rate_limited(
                f"concurrency limit reached: {in_flight} generations of this account are in "
                f"flight and the tier allows {tier.concurrent_limit}; retry once one finishes",
                retry_after_s=max(1.0, self.config.latency_ms / 1000),
                window=self.auth.limiter.window_state(key.key_id, tier),
                faults=self.faults,
            )

    def _faulty_body(self, operation: Operation, body: dict[str, Any]) -> dict[str, Any]:
        """The submit body as a service with the body faults reads it (each of these faults
        skips one stated check of spec §4's body tables)."""
        if self.faults.on(BLANK_PROMPT_SERVER_ERROR) and body.get("prompt") == "":
            raise ApiError(500, "internal error")  # bad input reaching a 5xx
        prompt = body.get("prompt")
        if operation.name == "images.generate":
            if "prompt" not in body and self.faults.on(IMAGE_PROMPT_OPTIONAL):
                return {**body, "prompt": "untitled"}
            if prompt is not None and not isinstance(prompt, str):
                if self.faults.on(IMAGE_PROMPT_ANY_TYPE):
                    return {**body, "prompt": json.dumps(prompt)}
        if operation.name == "videos.generate":
            if "prompt" not in body and self.faults.on(VIDEO_PROMPT_OPTIONAL):
                body = {**body, "prompt": "untitled"}
            duration = body.get("duration")
            if "duration" in body and (
                isinstance(duration, bool) or not isinstance(duration, int | float)
            ):
                if self.faults.on(VIDEO_DURATION_ANY_TYPE):
                    body = {k: v for k, v in body.items() if k != "duration"}
        return body

    async def submit(self, request: Request, operation: Operation) -> Response:
        key = await self.auth_key(request, operation.scope)
        tier = self.auth.tier_of(key)
        if operation.type not in tier.allowed_model_types and not self.faults.on(
            MODEL_CATEGORY_NOT_ENFORCED
        ):
            # Spec §2 names allowed_model_types; the status for a category the tier lacks
            # is not shown: 403 (an interpretation, like a missing scope).
            raise ApiError(
                403,
                f"the tier {tier.plan_code!r} does not include the {operation.type!r} model "
                f"category (allowed: {', '.join(tier.allowed_model_types)})",
            )
        body = await read_json_object(request)
        cost = self.auth.tiers.prices[operation.type]
        if self.faults.on(CREDITS_NOT_SPENT):
            cost = 0
        day = utc_day()
        early_spend = self.faults.on(CREDITS_SPENT_BEFORE_VALIDATION)
        if early_spend:
            with self.store.transaction() as conn:
                self._spend(conn, key, cost, day)
        if self.faults.enabled:
            body = self._faulty_body(operation, body)
        prompt, model, params = validate_body(operation, body)
        try:
            binding = (
                await self.hooks.select_target(body, key) if operation.accepts_target else None
            )
        except ApiError as refused:
            if refused.status == 400 and self.faults.on(CREDITS_KEPT_ON_BAD_TARGET):
                with self.store.transaction() as conn:
                    self._spend(conn, key, cost, day)
            raise
        generation_id = "gen_" + secrets.token_hex(12)
        created = now_iso()
        due_at = time.time() + self.config.latency_ms / 1000
        try:
            with self.store.transaction() as conn:
                self._check_concurrency(conn, key)
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
        self.worker.schedule(generation_id, due_at)
        answer: dict[str, Any] = {
            "id": generation_id,
            "object": "generation",
            "status": "queued",
            "type": operation.type,
            "model": model,
            "created_at": created,
            "webhook": self.hooks.binding_view(generation_id) if binding is not None else None,
        }
        if self.faults.on(GENERATION_ID_MISSING):
            del answer["id"]
        status = 200 if self.faults.on(STATUS_200_INSTEAD_OF_202) else 202
        if operation.type == "video" and self.faults.on(VIDEO_STATUS_200):
            status = 200
        return JSONResponse(answer, status_code=status)

    async def auth_key(self, request: Request, scope: str | None) -> KeyContext:
        return self.auth.require_key(request, scope)

    # --- read -------------------------------------------------------------------------

    def view(self, row: sqlite3.Row, key: KeyContext) -> dict[str, Any]:
        params = json.loads(row["params"])
        record: dict[str, Any] = {
            "id": row["id"],
            "object": "generation",
            "type": row["type"],
            "operation": row["operation"],
            "model": row["model"],
            "status": row["status"],
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
        if not rows or self.faults.on(GENERATION_READ_404):
            # Another account's generation is indistinguishable from an unknown one.
            raise ApiError(404, f"no generation {generation_id!r} for this account")
        return JSONResponse(self.view(rows[0], key))
