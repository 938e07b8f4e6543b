"""Console paths (/api) of the core: sessions, keys, tier (spec §4 console, §5.4-5.5).

The spec leaves these payloads unshown, and the log-in and key paths too (§5.4, §5.8).
ARCHITECTURE.md fixes the reference's shapes (:data:`REFERENCE_CONSOLE`):
``POST /api/session`` ``{"email","password"}`` → ``{"token","expires_at"}``;
``POST /api/keys`` ``{"name","scopes"}`` → 201 with the key value shown once;
``GET /api/keys``, ``GET /api/keys/{id}`` (with ``signing_secret``),
``DELETE /api/keys/{id}`` (revoke; 204, idempotent), ``GET /api/tier``. The choice
``console_api = "variant"`` (``serve --variant``) offers the same operations under other
paths and field names (:data:`VARIANT_CONSOLE`), which a profile declares for the suite.
Everything but the login needs a console session; an API key gets 401 here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from reference import accounts
from reference.auth import SESSION_COOKIE, SESSION_TTL_S, Authenticator, require_session
from reference.bodies import read_json_object
from reference.config import Choices
from reference.errors import ApiError
from reference.fault import Fault

__all__ = ["REFERENCE_CONSOLE", "VARIANT_CONSOLE", "ConsoleApi", "console_api", "console_routes"]


@dataclass(frozen=True)
class ConsoleApi:
    """Paths, field names and statuses of the console operations the spec leaves unshown.

    ``key_fields`` renames the reference's key fields (``id``, ``name``, ``scopes``,
    ``key``, ``signing_secret``, ``created_at``) in bodies sent and answered.
    """

    login_path: str
    token_field: str
    email_field: str
    password_field: str
    keys_path: str
    #: Method and path of a revocation; ``{key_id}`` names the key.
    revoke: tuple[str, str]
    create_status: int
    revoke_status: int
    #: Status of a key creation refused by the active-key limit (spec §2: refused).
    limit_status: int
    #: The key list: an object ``{"keys", "total"}``, or a bare array.
    keys_listed_bare: bool = False
    key_fields: Mapping[str, str] = field(default_factory=dict)

    def name(self, field_name: str) -> str:
        """This API's name for a reference key field."""
        return self.key_fields.get(field_name, field_name)

    def key_view(self, view: Mapping[str, Any]) -> dict[str, Any]:
        return {self.name(k): v for k, v in view.items()}


REFERENCE_CONSOLE = ConsoleApi(
    login_path="/api/session",
    token_field="token",  # noqa: S106 (a field name)
    email_field="email",
    password_field="password",  # noqa: S106 (a field name)
    keys_path="/api/keys",
    revoke=("DELETE", "/api/keys/{key_id}"),
    create_status=201,
    revoke_status=204,
    limit_status=409,
)
VARIANT_CONSOLE = ConsoleApi(
    login_path="/api/auth/login",
    token_field="access_token",  # noqa: S106 (a field name)
    email_field="username",
    password_field="passphrase",  # noqa: S106 (a field name)
    keys_path="/api/api-keys",
    revoke=("POST", "/api/api-keys/{key_id}/revoke"),
    create_status=200,
    revoke_status=200,
    limit_status=403,
    keys_listed_bare=True,
    key_fields={
        "id": "key_id",
        "name": "label",
        "scopes": "permissions",
        "key": "secret_key",
        "signing_secret": "webhook_secret",
        "created_at": "created",
    },
)


def console_api(choices: Choices) -> ConsoleApi:
    """The console API of the choice ``console_api``."""
    return VARIANT_CONSOLE if choices.console_api == "variant" else REFERENCE_CONSOLE


# Faults injected here (``--fault NAME``; the registry, ``reference/faults.py``, collects them).
EMPTY_SCOPES_ACCEPTED = Fault(
    "empty-scopes-accepted",
    "KEY-SCOPE-02",
    "a key can be created with no scope at all",
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
    "key-name-ignored",
    "KEY-NAME-01",
    "keys are stored without the name given",
)
CREATED_KEY_TRUNCATED = Fault(
    "created-key-truncated",
    "KEY-ONCE-01",
    "the key returned at creation lacks its last 4 characters",
)
KEY_DETAIL_WITHOUT_SCOPES = Fault(
    "key-detail-without-scopes",
    "KEY-VIEW-01",
    "the key detail view omits the scopes",
)
KEY_LIMIT_NINE = Fault(
    "key-limit-nine",
    "KEY-LIMIT-02",
    "the console refuses a new key once the account holds 9 active keys, not 10",
)
CONSOLE_TIER_DIFFERS = Fault(
    "console-tier-differs",
    "CONSOLE-TIER-01",
    "GET /api/tier reports another tier",
)


def _auth(request: Request) -> Authenticator:
    authenticator: Authenticator = request.app.state.authenticator
    return authenticator


def _api(request: Request) -> ConsoleApi:
    return console_api(_auth(request).config.choices)


async def login(request: Request) -> Response:
    api = _api(request)
    body = await read_json_object(request)
    email, password = body.get(api.email_field), body.get(api.password_field)
    if not isinstance(email, str) or not isinstance(password, str):
        raise ApiError(400, f"send `{api.email_field}` and `{api.password_field}` as strings")
    auth = _auth(request)
    rows = auth.store.read("SELECT id, password_hash FROM accounts WHERE email = ?", (email,))
    # Same answer for an unknown email and a wrong password (no account enumeration).
    if not rows or not accounts.check_password(password, rows[0]["password_hash"]):
        raise ApiError(401, "wrong email or password")
    token, expires = auth.issue_session(rows[0]["id"])
    request.state.account_id = rows[0]["id"]
    if api is VARIANT_CONSOLE:
        answer: dict[str, Any] = {api.token_field: token, "expires_in": SESSION_TTL_S}
    else:
        answer = {
            api.token_field: token,
            "token_type": "Bearer",
            "expires_at": datetime.fromtimestamp(expires, UTC).isoformat(),
        }
    response = JSONResponse(answer)
    if auth.config.choices.console_credential == "cookie":
        response.set_cookie(
            SESSION_COOKIE, token, max_age=SESSION_TTL_S, httponly=True, samesite="strict"
        )
    return response


async def create_key(request: Request) -> Response:
    session = await require_session(request)
    api = _api(request)
    body = await read_json_object(request)
    name = body.get(api.name("name"), "")
    if not isinstance(name, str) or len(name) > 200:
        raise ApiError(400, f"`{api.name('name')}` must be a string of at most 200 characters")
    auth = _auth(request)
    if auth.faults.on(EMPTY_SCOPES_ACCEPTED) and body.get("scopes") in (None, []):
        scopes: list[str] = []
    else:
        scopes = accounts.validate_scopes(body.get(api.name("scopes")))
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
    if auth.faults.on(KEY_LIMIT_NINE):
        _refuse_at_nine(auth, session.account_id, api)
    try:
        created = accounts.create_key(
            auth.store,
            account_id=session.account_id,
            name=name,
            scopes=scopes,
            prefix=auth.config.key_prefix,
            faults=auth.faults,
            id_form=auth.config.choices.id_form,
        )
    except ApiError as refused:
        if refused.status == REFERENCE_CONSOLE.limit_status:
            refused.status = api.limit_status
        raise
    return JSONResponse(
        api.key_view(
            {
                "id": created.key_id,
                "name": created.name,
                "scopes": list(created.scopes),
                "created_at": created.created_at,
                # Spec §2: the full key is returned this once; only its hash is stored.
                "key": created.value[:-4]
                if auth.faults.on(CREATED_KEY_TRUNCATED)
                else created.value,
            }
        ),
        status_code=api.create_status,
    )


def _refuse_at_nine(auth: Authenticator, account_id: str, api: ConsoleApi) -> None:
    """Fault KEY_LIMIT_NINE: the limit refusal one key early."""
    ((active,),) = auth.store.read(
        "SELECT COUNT(*) FROM api_keys WHERE account_id = ? AND revoked_at IS NULL",
        (account_id,),
    )
    if active >= accounts.MAX_ACTIVE_KEYS - 1:
        raise ApiError(api.limit_status, "fault: this account holds 9 active keys")


async def list_keys(request: Request) -> Response:
    session = await require_session(request)
    api = _api(request)
    keys = [api.key_view(k) for k in accounts.list_keys(_auth(request).store, session.account_id)]
    if api.keys_listed_bare:
        return JSONResponse(keys)
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
        auth.config.choices.hmac_keying,
    )
    if auth.faults.on(KEY_DETAIL_WITHOUT_SCOPES):
        detail.pop("scopes", None)
    return JSONResponse(_api(request).key_view(detail))


async def revoke_key(request: Request) -> Response:
    session = await require_session(request)
    api = _api(request)
    view = accounts.revoke_key(
        _auth(request).store, session.account_id, request.path_params["key_id"]
    )
    if api.revoke_status == 204:
        return Response(status_code=204)
    return JSONResponse(api.key_view(view), status_code=api.revoke_status)


async def console_tier(request: Request) -> Response:
    session = await require_session(request)
    auth = _auth(request)
    rows = auth.store.read("SELECT tier FROM accounts WHERE id = ?", (session.account_id,))
    tier = rows[0]["tier"]
    if auth.faults.on(CONSOLE_TIER_DIFFERS):
        tier = next(name for name in auth.tiers.tiers if name != tier)
    record = auth.tiers.get(tier).record()
    return JSONResponse(record)


def console_routes(choices: Choices | None = None) -> list[BaseRoute]:
    api = console_api(choices or Choices())
    method, revoke_path = api.revoke
    return [
        Route(api.login_path, login, methods=["POST"]),
        Route(api.keys_path, create_key, methods=["POST"]),
        Route(api.keys_path, list_keys, methods=["GET"]),
        Route(api.keys_path + "/{key_id}", key_detail, methods=["GET"]),
        Route(revoke_path, revoke_key, methods=[method]),
        Route("/api/tier", console_tier, methods=["GET"]),
    ]
