"""Generations: submit (202), read, and the durable worker queue that runs them.

Submit order (spec §4 "Target selection rules"): authenticate, count and scope-check the
request (``require_key``), check the tier's model categories, validate the body, let the
webhooks part select and validate the delivery target (404/400 *before* any credit is
spent), then in one transaction check the concurrency limit and the daily credit cap,
spend the credits, insert the generation and its binding.

The queue is the ``generations`` table itself: a restart (even after kill -9) reloads
every ``queued`` row and runs it (again). The transaction that moves a
generation to completed, failed or cancelled also stores its output file (table
``outputs``, served at ``GET /outputs/{name}``), refunds credits where due and lets the
webhooks part enqueue its events, so an event is never lost, nor sent for a state or an
output that was rolled back.

Sandbox contract (ARCHITECTURE.md): ``[sandbox:fail]`` in the prompt fails the
generation, ``[sandbox:cancel]`` cancels it; either way the credits are refunded (spec §1,
§6) and ``credits_used`` becomes 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import heapq
import hmac
import json
import math
import re
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from reference import media
from reference.accounts import now_iso
from reference.aio import STOP_TIMEOUT_S, run_db, wait_event
from reference.auth import Authenticator, KeyContext
from reference.bodies import read_json_object
from reference.config import Choices, Config
from reference.errors import ApiError
from reference.faults import Faults
from reference.ids import new_id
from reference.logs import log_event
from reference.ratelimit import rate_limited, seconds_to_utc_midnight, utc_day
from reference.store import Store

__all__ = [
    "OPERATIONS",
    "DeliveryHooks",
    "GenerationService",
    "Operation",
]

FAIL_MARK = "[sandbox:fail]"
CANCEL_MARK = "[sandbox:cancel]"
#: Longest prompt accepted (spec §8: not shown; an interpretation).
MAX_PROMPT_CHARS = 32_000
#: Generation states: queued, then completed, failed or cancelled. ("running" was a state
#: of earlier stores; start() turns any such row back into queued.)
_IN_FLIGHT = ("queued", "running")
_BATCH = 64  # per worker step: bounds how long one batch runs before stop() is seen
#: How long stop() lets the batch in hand finish before cancelling the worker.
STOP_GRACE_S = 10.0


class DeliveryHooks(Protocol):
    """What the generation core needs from the webhooks part (``WebhookService``)."""

    async def select_target(self, body: Mapping[str, Any], key: KeyContext) -> Any: ...

    def record_binding(
        self, conn: sqlite3.Connection, generation_id: str, binding: Any
    ) -> None: ...

    def binding_view(self, generation_id: str) -> dict[str, Any] | None: ...

    def enqueue_events(self, conn: sqlite3.Connection, generation: Mapping[str, Any]) -> None: ...

    def wake(self) -> None: ...


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


class GenerationService:
    """Submits, reads and runs generations."""

    def __init__(
        self,
        store: Store,
        config: Config,
        faults: Faults,
        authenticator: Authenticator,
        hooks: DeliveryHooks,
    ) -> None:
        self.store = store
        self.config = config
        self.faults = faults
        self.auth = authenticator
        self.hooks = hooks
        self._heap: list[tuple[float, str]] = []
        self._queued: set[str] = set()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

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
        if over and not self.faults.on("credit-cap-not-enforced"):
            refusal = rate_limited(
                f"daily credit cap reached: {spent} of {tier.max_credits_per_day} credits "
                f"spent today and this request costs {cost}; the cap resets at 00:00 UTC",
                retry_after_s=seconds_to_utc_midnight(),
                window=self.auth.limiter.window_state(key.key_id, tier),
                faults=self.faults,
            )
            if self.faults.on("credit-cap-without-retry-after"):
                refusal.headers.pop("Retry-After", None)
            if self.faults.on("credit-cap-429-bare"):
                for name in ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"):
                    refusal.headers.pop(name, None)
            if self.faults.on("credit-cap-refusal-charged"):
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
        if in_flight >= tier.concurrent_limit and not self.faults.on("concurrency-not-enforced"):
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
        """The submit body as a service with the body faults reads it (engineer FUZZ's
        faults: each skips one stated check of spec §4's body tables)."""
        if self.faults.on("blank-prompt-server-error") and body.get("prompt") == "":
            raise ApiError(500, "internal error")  # bad input reaching a 5xx
        prompt = body.get("prompt")
        if operation.name == "images.generate":
            if "prompt" not in body and self.faults.on("image-prompt-optional"):
                return {**body, "prompt": "untitled"}
            if prompt is not None and not isinstance(prompt, str):
                if self.faults.on("image-prompt-any-type"):
                    return {**body, "prompt": json.dumps(prompt)}
        if operation.name == "videos.generate":
            if "prompt" not in body and self.faults.on("video-prompt-optional"):
                body = {**body, "prompt": "untitled"}
            duration = body.get("duration")
            if "duration" in body and (
                isinstance(duration, bool) or not isinstance(duration, int | float)
            ):
                if self.faults.on("video-duration-any-type"):
                    body = {k: v for k, v in body.items() if k != "duration"}
        return body

    async def submit(self, request: Request, operation: Operation) -> Response:
        key = await self.auth_key(request, operation.scope)
        tier = self.auth.tier_of(key)
        if operation.type not in tier.allowed_model_types and not self.faults.on(
            "model-category-not-enforced"
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
        if self.faults.on("credits-not-spent"):
            cost = 0
        day = utc_day()
        early_spend = self.faults.on("credits-spent-before-validation")
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
            if refused.status == 400 and self.faults.on("credits-kept-on-bad-target"):
                with self.store.transaction() as conn:
                    self._spend(conn, key, cost, day)
            raise
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
            if charge:  # fault credit-cap-refusal-charged: the refused submit is billed
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
        self.schedule(generation_id, due_at)
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
        if self.faults.on("generation-id-missing"):
            del answer["id"]
        status = 200 if self.faults.on("status-200-instead-of-202") else 202
        if operation.type == "video" and self.faults.on("video-status-200"):
            status = 200
        return JSONResponse(answer, status_code=status)

    async def _run_now(self, generation_id: str, due_at: float, key: KeyContext) -> Response:
        """The choice ``image_without_target = "sync"``: an image without a delivery
        target is made during the request and answered 200 with the finished generation
        (spec §6 and §9 make images asynchronous only with a target)."""
        await asyncio.sleep(max(0.0, due_at - time.time()))
        await run_db(self._process, [generation_id])
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
            "output_url": self.output_url(row["output_name"]),
            "error_message": row["error_message"],
            "credits_used": row["credits_used"],
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
            "completed_at": row["completed_at"],
            "webhook": self.hooks.binding_view(row["id"]) if row["type"] in ("image", "video")
            else None,
        }  # fmt: skip
        if self.faults.on("signing-secret-on-v1"):
            record["signing_secret"] = key.signing_secret
        return record

    async def get(self, request: Request) -> Response:
        key = await self.auth_key(request, None)
        generation_id = request.path_params["generation_id"]
        rows = self.store.read(
            "SELECT * FROM generations WHERE id = ? AND account_id = ?",
            (generation_id, key.account_id),
        )
        if not rows or self.faults.on("generation-read-404"):
            # Another account's generation is indistinguishable from an unknown one,
            # unless the choice foreign_resource_status says 403 for it.
            status = 404
            if self.store.read("SELECT 1 FROM generations WHERE id = ?", (generation_id,)):
                status = self.config.choices.foreign_resource_status
            raise ApiError(status, f"no generation {generation_id!r} for this account")
        return JSONResponse(self._body(self.view(rows[0], key)))

    # --- worker -----------------------------------------------------------------------

    def output_name(self, generation_id: str, kind: str) -> str:
        """Unguessable, deterministic file name (a re-run after a crash overwrites it)."""
        digest = hmac.new(
            self.config.master_secret.encode(), f"output:{generation_id}".encode(), hashlib.sha256
        ).hexdigest()[:32]
        return digest + media.EXTENSIONS[kind]

    def output_url(self, name: str | None) -> str | None:
        """The absolute URL of an output file (None when there is none)."""
        return f"{self.config.base_url}/outputs/{name}" if name else None

    def schedule(self, generation_id: str, due_at: float) -> None:
        if generation_id in self._queued:
            return
        self._queued.add(generation_id)
        heapq.heappush(self._heap, (due_at, generation_id))
        self._wakeup.set()

    async def start(self) -> None:
        """Reload the durable queue (work cut short by a crash or stop runs again)."""
        with self.store.transaction() as conn:
            conn.execute("UPDATE generations SET status = 'queued' WHERE status = 'running'")
        for row in self.store.read(
            "SELECT id, due_at FROM generations WHERE status = 'queued' ORDER BY due_at"
        ):
            self.schedule(row["id"], row["due_at"])
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name="generation-worker")

    async def stop(self) -> None:
        """Finish the batch in hand, then stop; queued rows stay queued for the next start.

        Waits through ``asyncio.wait`` (which never cancels nor swallows a cancellation);
        a worker stuck past the bound is cancelled, and ``run_db`` lets its batch finish
        before it unwinds, so the store is never closed under a running batch.
        """
        self._stopping = True
        self._wakeup.set()
        task, self._task = self._task, None
        if task is None:
            return
        _, stuck = await asyncio.wait([task], timeout=STOP_GRACE_S)
        if stuck:
            task.cancel()
            _, stuck = await asyncio.wait([task], timeout=STOP_TIMEOUT_S)
            if stuck:
                log_event("worker_error", error="the generation worker did not stop")
        if task.done() and not task.cancelled() and task.exception() is not None:
            log_event("worker_error", error=repr(task.exception()))

    async def _run(self) -> None:
        while not self._stopping:
            now = time.time()
            due: list[str] = []
            while self._heap and self._heap[0][0] <= now and len(due) < _BATCH:
                _, generation_id = heapq.heappop(self._heap)
                self._queued.discard(generation_id)
                due.append(generation_id)
            if due:
                try:
                    # In a worker thread: rendering and the commit stay off the event loop.
                    await run_db(self._process, due)
                except Exception as exc:  # a bad batch must not stop the worker
                    log_event("worker_error", error=repr(exc), generations=len(due))
                    for generation_id in due:  # retry the batch shortly
                        self.schedule(generation_id, time.time() + 1.0)
                continue
            timeout = (self._heap[0][0] - now) if self._heap else 1.0
            self._wakeup.clear()
            await wait_event(self._wakeup, max(0.0, min(timeout, 1.0)))

    def _process(self, generation_ids: Sequence[str]) -> None:
        # Only this worker moves a generation out of 'queued', so a plain read is enough;
        # the work and its result then land in one transaction (a crash in between leaves
        # the generation queued, and the next start runs it again).
        marks = ",".join("?" for _ in generation_ids)
        rows = self.store.read(
            f"SELECT * FROM generations WHERE id IN ({marks}) AND status = 'queued'",  # noqa: S608
            list(generation_ids),
        )
        outcomes = [self._run_one(row) for row in rows]
        notify = False
        with self.store.transaction() as conn:
            for row, (status, output, error) in zip(rows, outcomes, strict=True):
                name = None
                if output is not None:
                    name = self.output_name(row["id"], row["type"])
                    content_type = media.CONTENT_TYPES[media.EXTENSIONS[row["type"]]]
                    conn.execute(
                        "INSERT OR REPLACE INTO outputs (name, content_type, data) "
                        "VALUES (?, ?, ?)",
                        (name, content_type, output),
                    )
                notify |= self._finish(conn, row, status, name, error)
        if notify:
            self.hooks.wake()

    def _run_one(self, row: sqlite3.Row) -> tuple[str, bytes | None, str | None]:
        """Do the work; returns (status, output file bytes, error message)."""
        prompt: str = row["prompt"]
        if CANCEL_MARK in prompt:
            if self.config.choices.cancelled_error_message == "null":
                return "cancelled", None, None
            return "cancelled", None, "cancelled: the prompt asked for it ([sandbox:cancel])"
        failing = FAIL_MARK in prompt
        if failing and not self.faults.on("failure-output-url-set"):
            return "failed", None, "generation failed: the prompt asked for it ([sandbox:fail])"
        data = media.render(row["type"], row["id"], prompt, row["model"])
        if failing:  # fault failure-output-url-set: a failure that looks like a success
            return "failed", data, None
        return "completed", data, None

    def _finish(
        self,
        conn: sqlite3.Connection,
        row: sqlite3.Row,
        status: str,
        name: str | None,
        error: str | None,
    ) -> bool:
        credits = row["credits_used"]
        refund = status in ("failed", "cancelled") and not (
            status == "failed" and self.faults.on("failed-not-refunded")
        )
        if refund and credits:
            conn.execute(
                "UPDATE credit_days SET credits = MAX(0, credits - ?) "
                "WHERE account_id = ? AND day = ?",
                (credits, row["account_id"], row["credits_day"]),
            )
            # The choice failed_credits_used: 0 once refunded, or the price charged.
            if self.config.choices.failed_credits_used == "zero":
                credits = 0
        output_url = self.output_url(name)
        stamp = now_iso()
        conn.execute(
            "UPDATE generations SET status = ?, output_name = ?, output_url = ?, "
            "error_message = ?, credits_used = ?, updated_at = ?, completed_at = ? WHERE id = ?",
            (status, name, output_url, error, credits, stamp, stamp, row["id"]),
        )
        log_event("generation", generation_id=row["id"], key_id=row["key_id"], status=status)
        if row["type"] not in ("image", "video"):
            return False
        self.hooks.enqueue_events(
            conn,
            {
                "id": row["id"],
                "account_id": row["account_id"],
                "key_id": row["key_id"],
                "type": row["type"],
                "model": row["model"],
                "status": status,
                "output_url": output_url,
                "error_message": error,
                "credits_used": credits,
            },
        )
        return True

    # --- paths for the outputs --------------------------------------------------------

    def output(self, name: str) -> tuple[bytes, str] | None:
        """The file behind ``GET /outputs/{name}`` and its content type, if it exists."""
        rows = self.store.read("SELECT content_type, data FROM outputs WHERE name = ?", (name,))
        if not rows:
            return None
        return bytes(rows[0]["data"]), rows[0]["content_type"]
