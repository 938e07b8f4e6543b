"""Console paths (/api) of the core: sessions, keys, tier (spec §4 console, §5.4-5.5).

The spec leaves these payloads unshown; ARCHITECTURE.md fixes the reference's shapes:
``POST /api/session`` ``{"email","password"}`` → ``{"token","expires_at"}``;
``POST /api/keys`` ``{"name","scopes"}`` → 201 with the key value shown once;
``GET /api/keys``, ``GET /api/keys/{id}`` (with ``signing_secret``),
``DELETE /api/keys/{id}`` (revoke; 204, idempotent), ``GET /api/tier``. Everything but
the login needs a console session; an API key gets 401 here.
"""

from __future__ import annotations

from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from reference import accounts
from reference.auth import Authenticator, require_session
from reference.bodies import read_json_object
from reference.errors import ApiError
from reference.fault import Fault

__all__ = ["console_routes"]

# Faults injected here (``--fault NAME``; the registry, ``reference/faults.py``, collects them).
EMPTY_SCOPES_ACCEPTED = Fault(
    "empty-scopes-accepted", "KEY-SCOPE-02", "a key can be created with no scope at all"
)
SCOPE_AGENT_RUN_REFUSED = Fault(
    "scope-agent-run-refused",
    "SCOPE-NAMES-01",
    "creating a key with the agent:run scope is refused",
)
SCOPE_IMAGES_EDIT_REFUSED = Fault(
    "scope-images-edit-refused",
    "SCOPE-NAMES-02",
    "creating a key with the images:edit scope is refused",
)
KEY_SCOPE_WILDCARD = Fault(
    "key-scope-wildcard",
    "KEY-SCOPE-01",
    "keys created in the console carry an extra scope 'all' beyond the five",
)
KEY_NAME_IGNORED = Fault(
    "key-name-ignored", "KEY-NAME-01", "keys are stored without the name given"
)
CREATED_KEY_TRUNCATED = Fault(
    "created-key-truncated",
    "KEY-ONCE-01",
    "the key returned at creation lacks its last 4 characters",
)
KEY_DETAIL_WITHOUT_SCOPES = Fault(
    "key-detail-without-scopes", "KEY-VIEW-01", "the key detail view omits the scopes"
)
CONSOLE_TIER_DIFFERS = Fault(
    "console-tier-differs", "CONSOLE-TIER-01", "GET /api/tier reports another tier"
)


def _auth(request: Request) -> Authenticator:
    authenticator: Authenticator = request.app.state.authenticator
    return authenticator


async def login(request: Request) -> Response:
    body = await read_json_object(request)
    email, password = body.get("email"), body.get("password")
    if not isinstance(email, str) or not isinstance(password, str):
        raise ApiError(400, "send `email` and `password` as strings")
    auth = _auth(request)
    rows = auth.store.read("SELECT id, password_hash FROM accounts WHERE email = ?", (email,))
    # Same answer for an unknown email and a wrong password (no account enumeration).
    if not rows or not accounts.check_password(password, rows[0]["password_hash"]):
        raise ApiError(401, "wrong email or password")
    token, expires = auth.issue_session(rows[0]["id"])
    request.state.account_id = rows[0]["id"]
    return JSONResponse(
        {
            "token": token,
            "token_type": "Bearer",
            "expires_at": datetime.fromtimestamp(expires, UTC).isoformat(),
        }
    )


async def create_key(request: Request) -> Response:
    session = await require_session(request)
    body = await read_json_object(request)
    name = body.get("name", "")
    if not isinstance(name, str) or len(name) > 200:
        raise ApiError(400, "`name` must be a string of at most 200 characters")
    auth = _auth(request)
    if auth.faults.on(EMPTY_SCOPES_ACCEPTED) and body.get("scopes") in (None, []):
        scopes: list[str] = []
    else:
        scopes = accounts.validate_scopes(body.get("scopes"))
    for refused, fault in (
        ("agent:run", SCOPE_AGENT_RUN_REFUSED),
        ("images:edit", SCOPE_IMAGES_EDIT_REFUSED),
    ):
        if refused in scopes and auth.faults.on(fault):
            raise ApiError(400, f"unknown scope(s) [{refused!r}]")
    if auth.faults.on(KEY_SCOPE_WILDCARD):
        scopes = [*scopes, "all"]
    if auth.faults.on(KEY_NAME_IGNORED):
        name = ""
    created = accounts.create_key(
        auth.store,
        account_id=session.account_id,
        name=name,
        scopes=scopes,
        prefix=auth.config.key_prefix,
        faults=auth.faults,
    )
    return JSONResponse(
        {
            "id": created.key_id,
            "name": created.name,
            "scopes": list(created.scopes),
            "created_at": created.created_at,
            # Spec §2: the full key is returned this once; only its hash is stored.
            "key": created.value[:-4] if auth.faults.on(CREATED_KEY_TRUNCATED) else created.value,
        },
        status_code=201,
    )


async def list_keys(request: Request) -> Response:
    session = await require_session(request)
    keys = accounts.list_keys(_auth(request).store, session.account_id)
    return JSONResponse({"keys": keys, "total": len(keys)})


async def key_detail(request: Request) -> Response:
    session = await require_session(request)
    auth = _auth(request)
    detail = accounts.key_detail(
        auth.store,
        session.account_id,
        request.path_params["key_id"],
        auth.config.master_secret,
        auth.faults,
    )
    if auth.faults.on(KEY_DETAIL_WITHOUT_SCOPES):
        detail.pop("scopes", None)
    return JSONResponse(detail)


async def revoke_key(request: Request) -> Response:
    session = await require_session(request)
    accounts.revoke_key(_auth(request).store, session.account_id, request.path_params["key_id"])
    return Response(status_code=204)


async def console_tier(request: Request) -> Response:
    session = await require_session(request)
    auth = _auth(request)
    rows = auth.store.read("SELECT tier FROM accounts WHERE id = ?", (session.account_id,))
    tier = rows[0]["tier"]
    if auth.faults.on(CONSOLE_TIER_DIFFERS):
        tier = next(name for name in auth.tiers.tiers if name != tier)
    record = auth.tiers.get(tier).record()
    return JSONResponse(record)


def console_routes() -> list[BaseRoute]:
    return [
        Route("/api/session", login, methods=["POST"]),
        Route("/api/keys", create_key, methods=["POST"]),
        Route("/api/keys", list_keys, methods=["GET"]),
        Route("/api/keys/{key_id}", key_detail, methods=["GET"]),
        Route("/api/keys/{key_id}", revoke_key, methods=["DELETE"]),
        Route("/api/tier", console_tier, methods=["GET"]),
    ]
