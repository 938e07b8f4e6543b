"""The ASGI application: routes, error rendering, request logs, lifespan.

:func:`build_service` wires the parts (store, auth, generations, webhooks) around one
:class:`~reference.config.Config`; :func:`create_app` turns them into a Starlette app whose
lifespan starts and stops the generation worker and the webhook dispatcher.

Error rendering: :class:`~reference.errors.ApiError` → its status and ``{"detail"}``;
unknown path → 404 JSON; wrong method → 405 JSON with ``Allow``; a store that cannot be
written (read-only, full, I/O error, locked past the busy timeout) → a logged 503 JSON
with ``Retry-After`` (the request's transaction rolled back: nothing was accepted); any
other exception → a logged 500 JSON (a bug: the tests never expect one).
"""

from __future__ import annotations

import gc
import sqlite3
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reference.accounts import credit_day
from reference.auth import Authenticator
from reference.clock import clock_routes
from reference.config import Config
from reference.console import console_routes
from reference.errors import ApiError, error_response, error_shape, render_api_error
from reference.fault import Fault, Faults
from reference.generations import GenerationService
from reference.logs import log_event
from reference.store import Store
from reference.submits import OPERATIONS, Operation
from reference.tiers import Tiers, load_tiers
from reference.webhooks import SCHEMA_SQL, WebhookService, webhook_routes
from reference.worker import GenerationWorker

__all__ = ["Service", "build_service", "create_app"]

# Faults injected here (``--fault NAME``; the registry, ``reference/faults.py``, collects them).
TIER_READ_REFUSED = Fault(
    "tier-read-refused",
    "TIER-READ-01",
    "GET /v1/account/tier answers 404 to a valid key",
)
TIER_ENDPOINT_WRONG_TYPE = Fault(
    "tier-endpoint-wrong-type",
    "TIER-FIELD-02",
    "the tier record gives requests_per_minute as a string",
)
TIER_REQUESTS_PER_DAY_WRONG_TYPE = Fault(
    "tier-requests-per-day-wrong-type",
    "TIER-FIELD-03",
    "the tier record gives requests_per_day as a string",
)
TIER_CONCURRENT_LIMIT_WRONG_TYPE = Fault(
    "tier-concurrent-limit-wrong-type",
    "TIER-FIELD-04",
    "the tier record gives concurrent_limit as a string",
)
TIER_MAX_CREDITS_WRONG_TYPE = Fault(
    "tier-max-credits-wrong-type",
    "TIER-FIELD-05",
    "the tier record gives max_credits_per_day as a string",
)
TIER_PLAN_CODE_WRONG_TYPE = Fault(
    "tier-plan-code-wrong-type",
    "TIER-FIELD-01",
    "the tier record gives plan_code as an object instead of a string",
)
TIER_ALLOWED_MODEL_TYPES_WRONG_TYPE = Fault(
    "tier-allowed-model-types-wrong-type",
    "TIER-FIELD-06",
    "the tier record gives allowed_model_types as one comma-separated string",
)
TIER_VALUES_FIXED = Fault(
    "tier-values-fixed",
    "TIER-VALUES-01",
    "the tier record reports fixed limits (60 requests per minute, …), not the account's tier",
)
#: Fault TIER_VALUES_FIXED: the numbers the tier record then reports for every account.
_FIXED_LIMITS = {
    "requests_per_minute": 60,
    "requests_per_day": 10_000,
    "concurrent_limit": 10,
    "max_credits_per_day": 1_000,
}
TIER_PATH_UNVERSIONED = Fault(
    "tier-path-unversioned",
    "VER-PATH-01",
    "the tier endpoint is served at /account/tier, without the /v1 prefix",
)
TIER_READ_TEXT_PLAIN = Fault(
    "tier-read-text-plain",
    "GEN-JSON-02",
    "GET /v1/account/tier answers its JSON with Content-Type: text/plain",
)


@dataclass
class Service:
    """The parts of one running service."""

    config: Config
    faults: Faults
    store: Store
    tiers: Tiers
    authenticator: Authenticator
    webhooks: WebhookService
    generations: GenerationService
    worker: GenerationWorker


def build_service(config: Config, store: Store | None = None) -> Service:
    """Open the store (with the webhook tables) and wire every part to ``config``."""
    faults = Faults(config.faults)
    store = store or Store(config.db_path, extra_schema=[SCHEMA_SQL])
    tiers = load_tiers(config.choices.prices, config.tiers_file)
    authenticator = Authenticator(store, config, faults, tiers)
    webhooks = WebhookService(store, config, faults)
    worker = GenerationWorker(store, config, faults, webhooks)
    generations = GenerationService(store, config, faults, authenticator, webhooks, worker)
    return Service(config, faults, store, tiers, authenticator, webhooks, generations, worker)


class RequestLog:
    """ASGI middleware: one JSON log line per request; refuses oversized bodies early.

    A Content-Length beyond ``max_body_bytes`` gets 413 before any handler runs, on every
    path (handlers also bound streamed bodies, see ``reference.bodies``).
    """

    def __init__(self, app: ASGIApp, config: Config) -> None:
        self.app = app
        self.max_body_bytes = config.max_body_bytes
        self.choices = config.choices

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0
        state: dict[str, Any] = scope.setdefault("state", {})

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                window = state.get("ratelimit")
                if window is not None and status != 429 and self.choices.rate_headers_on_success:
                    # Not required by spec §7 (which names them for 429s): the window
                    # state of every admitted /v1 request, so clients can pace themselves.
                    message = {
                        **message,
                        "headers": [
                            *message.get("headers", []),
                            (b"x-ratelimit-limit", str(window.limit).encode()),
                            (b"x-ratelimit-remaining", str(window.remaining).encode()),
                            (b"x-ratelimit-reset", str(window.reset_unix).encode()),
                        ],
                    }
            await send(message)

        try:
            declared = dict(scope.get("headers") or []).get(b"content-length", b"")
            if declared.isdigit() and int(declared) > self.max_body_bytes:
                response = error_response(
                    413,
                    f"request body too large: the limit is {self.max_body_bytes} bytes",
                    shape=self.choices.error_body,
                )
                await response(scope, receive, send_wrapper)
            else:
                await self.app(scope, receive, send_wrapper)
        except BaseException:
            # Rendered as a 500 by Starlette's ServerErrorMiddleware, outside this one.
            status = status or 500
            raise
        finally:
            log_event(
                "request",
                method=scope.get("method"),
                path=scope.get("path"),
                status=status,
                ms=round((time.perf_counter() - started) * 1000, 2),
                key_id=state.get("key_id"),
                account_id=state.get("account_id"),
            )


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        detail = f"no such path: {request.url.path}"
    elif exc.status_code == 405:
        detail = f"method {request.method} is not allowed on {request.url.path}"
    else:
        detail = str(exc.detail)
    return error_response(exc.status_code, detail, exc.headers, shape=error_shape(request))


async def _unexpected(request: Request, exc: Exception) -> Response:
    log_event("error", path=request.url.path, error=repr(exc))
    return error_response(
        500,
        "internal error: this is a bug in the reference implementation",
        shape=error_shape(request),
    )


#: The GIL switch interval while the service runs (see create_app).
GIL_SWITCH_S = 0.001

#: SQLite's primary result codes that say the store cannot be written now, not that a
#: statement is wrong: read-only, I/O error, full, cannot open, busy, locked.
_STORE_UNAVAILABLE = frozenset(
    {
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
    }
)
#: Retry-After of a 503 for a store that cannot be written (an operator must act).
STORE_RETRY_AFTER_S = 30


async def _store_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, sqlite3.Error)
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(exc, sqlite3.OperationalError) or code is None:
        return await _unexpected(request, exc)
    if code & 0xFF not in _STORE_UNAVAILABLE:
        return await _unexpected(request, exc)
    log_event("store_unavailable", path=request.url.path, error=str(exc))
    return error_response(
        503,
        f"the service cannot write its store now ({exc}); this request was not accepted "
        f"and changed nothing: retry in {STORE_RETRY_AFTER_S} s",
        {"Retry-After": str(STORE_RETRY_AFTER_S)},
        shape=error_shape(request),
    )


def _submit_endpoint(service: Service, operation: Operation) -> Route:
    async def endpoint(request: Request) -> Response:
        return await service.generations.submit(request, operation)

    return Route(operation.path, endpoint, methods=["POST"], name=operation.name)


def core_routes(service: Service) -> list[BaseRoute]:
    auth = service.authenticator

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def account_tier(request: Request) -> Response:
        key = auth.require_key(request, None)
        record = auth.tier_of(key).record()
        faults = service.faults
        if faults.on(TIER_READ_REFUSED):
            raise ApiError(404, "no tier record for this key")
        if faults.on(TIER_VALUES_FIXED):
            record.update(_FIXED_LIMITS)
        if faults.on(TIER_ENDPOINT_WRONG_TYPE):
            record["requests_per_minute"] = str(record["requests_per_minute"])
        if faults.on(TIER_REQUESTS_PER_DAY_WRONG_TYPE):
            record["requests_per_day"] = str(record["requests_per_day"])
        if faults.on(TIER_CONCURRENT_LIMIT_WRONG_TYPE):
            record["concurrent_limit"] = str(record["concurrent_limit"])
        if faults.on(TIER_MAX_CREDITS_WRONG_TYPE):
            record["max_credits_per_day"] = str(record["max_credits_per_day"])
        if faults.on(TIER_PLAN_CODE_WRONG_TYPE):
            record["plan_code"] = {"name": record["plan_code"]}
        if faults.on(TIER_ALLOWED_MODEL_TYPES_WRONG_TYPE):
            record["allowed_model_types"] = ",".join(record["allowed_model_types"])
        if faults.on(TIER_READ_TEXT_PLAIN):
            return JSONResponse(record, media_type="text/plain")
        return JSONResponse(record)

    async def account_usage(request: Request) -> Response:
        key = auth.require_key(request, None)
        day = credit_day(service.faults)
        rows = service.store.read(
            "SELECT credits FROM credit_days WHERE account_id = ? AND day = ?",
            (key.account_id, day),
        )
        spent = rows[0]["credits"] if rows else 0
        keys = [r["id"] for r in service.store.read(
            "SELECT id FROM api_keys WHERE account_id = ?", (key.account_id,)
        )]  # fmt: skip
        cap = auth.tier_of(key).max_credits_per_day
        return JSONResponse(
            {
                "day": day,
                "credits_used_today": spent,
                "requests_today": auth.limiter.requests_today(keys),
                "credits_remaining_today": max(0, cap - spent),
            }
        )

    async def output(request: Request) -> Response:
        name = request.path_params["name"]
        found = service.worker.output(name)
        if found is None:
            raise ApiError(404, f"no output named {name!r}")
        data, content_type = found
        return Response(data, media_type=content_type)

    return [
        Route("/healthz", healthz, methods=["GET"]),
        *(_submit_endpoint(service, op) for op in OPERATIONS),
        Route("/v1/generations/{generation_id}", service.generations.get, methods=["GET"]),
        Route(
            "/account/tier" if service.faults.on(TIER_PATH_UNVERSIONED) else "/v1/account/tier",
            account_tier,
            methods=["GET"],
        ),
        Route("/v1/account/usage", account_usage, methods=["GET"]),
        Route("/outputs/{name}", output, methods=["GET"]),
    ]


def create_app(service: Service) -> Starlette:
    """The Starlette app of ``service``; its lifespan runs the worker and the dispatcher."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await service.worker.start()
        await service.webhooks.start()
        # What exists now (modules, routes, the parts) lives as long as the process: kept
        # out of the collector's full passes, each of which otherwise walks it again
        # (measured: ~40 ms of the event loop, in the tail of the delivery latency).
        gc.freeze()
        # The store work runs in threads; one that has a result waits for the event
        # loop's thread to hand over the GIL: at most 1 ms instead of Python's 5 ms.
        switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(switch_interval, GIL_SWITCH_S))
        try:
            yield
        finally:
            sys.setswitchinterval(switch_interval)
            gc.unfreeze()
            # Graceful stop: queued work and pending deliveries stay in the store and
            # resume at the next start.
            try:
                await service.worker.stop()
            finally:
                await service.webhooks.stop()

    app = Starlette(
        routes=[
            *core_routes(service),
            *console_routes(service.config.choices),
            *webhook_routes(service.webhooks),
            *(clock_routes() if service.config.test_clock else ()),
        ],
        exception_handlers={
            ApiError: render_api_error,
            HTTPException: _http_error,
            sqlite3.Error: _store_error,
            Exception: _unexpected,
        },
        lifespan=lifespan,
    )
    app.state.config = service.config
    app.state.authenticator = service.authenticator
    app.state.service = service
    app.add_middleware(RequestLog, config=service.config)
    return app
