"""Generations: submit (202) and read; ``worker.py`` runs them.

Submit order (spec §4 "Target selection rules"): authenticate, count and scope-check the
request (``require_key``), check the tier's model categories, validate the body, let the
webhooks part select and validate the delivery target (404/400 *before* any credit is
spent), then in one transaction check the concurrency limit and the daily credit cap,
spend the credits, insert the generation and its binding, and queue it for the worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from reference.accounts import now_iso
from reference.auth import Authenticator, KeyContext
from reference.bodies import read_json_object
from reference.config import Choices, Config
from reference.errors import ApiError
from reference.fault import Fault, Faults
from reference.ids import new_id
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
JSON_BODY_ASCII_ONLY = Fault(
    "json-body-ascii-only",
    "GEN-JSON-01",
    "a submit body with non-ASCII characters is refused with 400 (the JSON read as ASCII)",
)
IMAGE_SIZE_REQUIRED = Fault(
    "image-size-required", "GEN-IMAGE-03", "an image submit without size is refused with 400"
)
IMAGE_CALLBACK_URL_REFUSED = Fault(
    "image-callback-url-refused",
    "GEN-IMAGE-05",
    "an image submit with callback_url (the legacy flat body) is refused with 400",
)
IMAGE_WEBHOOK_EVENTS_REFUSED = Fault(
    "image-webhook-events-refused",
    "GEN-IMAGE-06",
    "an image submit whose webhook object lists events is refused with 400",
)
EDIT_CALLBACK_URL_REFUSED = Fault(
    "edit-callback-url-refused",
    "GEN-EDIT-01",
    "an image edit with callback_url is refused with 400 (only webhook is taken)",
)
VIDEO_DURATION_REQUIRED = Fault(
    "video-duration-required", "GEN-VIDEO-02", "a video submit without duration is refused with 400"
)
VIDEO_WEBHOOK_REFUSED = Fault(
    "video-webhook-refused",
    "GEN-VIDEO-06",
    "a video submit with a webhook object is refused with 400 (only callback_url is taken)",
)
GENERATION_ID_REUSED = Fault(
    "generation-id-reused",
    "GEN-ID-02",
    "a submit repeating the body of one made in the last minute answers that generation's id "
    "(an idempotency key made of the prompt)",
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

#: Under the fault GENERATION_ID_REUSED: how long a repeated body answers the earlier id.
_REUSE_WINDOW_S = 60.0
#: Each body fault of the submit endpoints: the operation it acts on, and the reason it
#: refuses a body with (None lets the body through).
_BODY_REFUSALS: tuple[tuple[Fault, str, Callable[[Mapping[str, Any]], str | None]], ...] = (
    (IMAGE_SIZE_REQUIRED, "images.generate",
     lambda body: None if "size" in body else "`size` is required"),
    (IMAGE_CALLBACK_URL_REFUSED, "images.generate",
     lambda body: "callback_url is no longer accepted: use webhook.url"
     if "callback_url" in body else None),
    (IMAGE_WEBHOOK_EVENTS_REFUSED, "images.generate",
     lambda body: "webhook takes `id` or `url` only"
     if isinstance(body.get("webhook"), dict) and "events" in body["webhook"] else None),
    (EDIT_CALLBACK_URL_REFUSED, "images.edit",
     lambda body: "edits take webhook, not callback_url" if "callback_url" in body else None),
    (VIDEO_DURATION_REQUIRED, "videos.generate",
     lambda body: None if "duration" in body else "`duration` is required"),
    (VIDEO_WEBHOOK_REFUSED, "videos.generate",
     lambda body: "videos take callback_url, not webhook" if "webhook" in body else None),
)  # fmt: skip


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


#: The choice ``body_values = "strict"``: the label forms the spec shows (§4: "a digit
#: followed by K", "a number followed by p"), integer durations, shorter prompts.
_STRICT_LABELS = {"size": re.compile(r"[1-9][0-9]?K"), "resolution": re.compile(r"[0-9]{3,4}p")}
_STRICT_MAX_DURATION_S = 60
_STRICT_MAX_PROMPT_CHARS = 4000


def validate_body(
    operation: Operation, body: Mapping[str, Any], choices: Choices | None = None
) -> tuple[str, str, dict[str, Any]]:
    """Prompt, model and accepted optional fields of a submit body, or 400.

    Unknown fields are tolerated (the spec leaves other fields "not shown"), unless the
    choice ``unknown_body_fields`` refuses them; the fields the reference knows are
    type-checked, and with ``body_values = "strict"`` held to narrower values.
    """
    choices = choices or Choices()
    strict = choices.body_values == "strict"
    if choices.unknown_body_fields == "refuse":
        known = {"prompt", *operation.string_fields, *operation.number_fields}
        if operation.accepts_target:
            known |= {"callback_url", "webhook"}
        unknown = sorted(set(body) - known)
        if unknown:
            raise ApiError(400, f"unknown field(s) {unknown}; this endpoint takes {sorted(known)}")
    prompt = body.get("prompt")
    if prompt is None:
        raise ApiError(400, "`prompt` is required: a non-empty string")
    if not isinstance(prompt, str):
        raise ApiError(400, f"`prompt` must be a string, not {_json_type(prompt)}")
    if not prompt.strip():
        raise ApiError(400, "`prompt` must not be empty")
    longest = _STRICT_MAX_PROMPT_CHARS if strict else MAX_PROMPT_CHARS
    if len(prompt) > longest:
        raise ApiError(400, f"`prompt` is too long: at most {longest} characters")
    model = _check_string(body, "model") or operation.default_model
    params: dict[str, Any] = {}
    for field in operation.string_fields:
        text = _check_string(body, field)
        if text is not None:
            label = _STRICT_LABELS.get(field)
            if strict and label is not None and not label.fullmatch(text):
                raise ApiError(400, f"`{field}` must match {label.pattern}, not {text!r}")
            params[field] = text
    for field in operation.number_fields:
        number = _check_number(body, field)
        if number is not None:
            if strict and not (isinstance(number, int) and 1 <= number <= _STRICT_MAX_DURATION_S):
                raise ApiError(
                    400, f"`{field}` must be a whole number of seconds, 1 to 60, not {number}"
                )
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
        if self.config.choices.credit_cap == "refuse-at-cap":
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
    def _body_errors(self) -> Iterator[None]:
        """A body refused with 400 gets the status of the choice ``invalid_body_status``
        (spec §7 states 400 for bad callback targets only, which are judged elsewhere)."""
        try:
            yield
        except ApiError as refused:
            if refused.status == 400:
                refused.status = self.config.choices.invalid_body_status
            raise

    def _faulty_body(self, operation: Operation, body: dict[str, Any]) -> dict[str, Any]:
        """The submit body as a service with the body faults reads it (each of these faults
        skips one stated check of spec §4's body tables)."""
        if self.faults.on(BLANK_PROMPT_SERVER_ERROR) and body.get("prompt") == "":
            raise ApiError(500, "internal error")  # bad input reaching a 5xx
        if (
            self.faults.on(JSON_BODY_ASCII_ONLY)
            and not json.dumps(body, ensure_ascii=False).isascii()
        ):
            raise ApiError(400, "the request body is not valid ASCII")
        for fault, name, refusal in _BODY_REFUSALS:
            reason = refusal(body) if operation.name == name and self.faults.on(fault) else None
            if reason is not None:
                raise ApiError(400, reason)
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
            # is not shown: 403 (an interpretation, like a missing scope), or the choice's.
            raise ApiError(
                self.config.choices.model_category_status,
                f"the tier {tier.plan_code!r} does not include the {operation.type!r} model "
                f"category (allowed: {', '.join(tier.allowed_model_types)})",
            )
        with self._body_errors():
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

    def _hidden(self, generation_id: str) -> bool:
        """Under the fault EXHAUSTED_GENERATION_HIDDEN: a delivery of the generation is
        exhausted (the read then pretends the generation is gone)."""
        if not self.faults.on(EXHAUSTED_GENERATION_HIDDEN):
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
        if not rows or self.faults.on(GENERATION_READ_404) or self._hidden(generation_id):
            # Another account's generation is indistinguishable from an unknown one,
            # unless the choice foreign_resource_status says 403 for it.
            status = 404
            if self.store.read("SELECT 1 FROM generations WHERE id = ?", (generation_id,)):
                status = self.config.choices.foreign_resource_status
            raise ApiError(status, f"no generation {generation_id!r} for this account")
        return JSONResponse(self._body(self.view(rows[0], key)))
