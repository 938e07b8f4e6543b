"""Authentication: API keys for /v1 (spec §5), console sessions (JWT) for /api.

API keys are ``<key_prefix>_<43 url-safe characters>``; only their sha256 is stored, so a
key is shown once and never again (spec §2). Each request looks the key up in the store,
so a revocation takes effect on the very next request (spec §5.4). An API key never opens
a console path and a console token never opens a /v1 path, except the three "API key
allowed" ones with the choice ``session_on_key_endpoints``.

Handlers call :func:`require_key` (401 / 429 / 403, in that order: a request is identified,
then counted against the rate limits (only submits, with the choice ``rate_counted``),
then checked against the scopes) or
:func:`require_session` (401). Both find the service's :class:`Authenticator` in
``request.app.state.authenticator``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

import jwt
from jwt.types import Options
from starlette.requests import Request

from reference.config import Config
from reference.errors import ApiError
from reference.fault import Fault, Faults
from reference.ratelimit import RateLimiter
from reference.store import Store
from reference.tiers import Tier, Tiers

__all__ = [
    "SCOPES",
    "SESSION_COOKIE",
    "Authenticator",
    "KeyContext",
    "SessionContext",
    "hash_key",
    "new_key_value",
    "require_key",
    "require_session",
    "signing_secret_for",
]

# Faults injected here (``--fault NAME``; the registry, ``reference/faults.py``, collects them).
API_KEY_CREATES_WEBHOOKS = Fault(
    "api-key-creates-webhooks",
    "CONSOLE-KEY-01",
    "POST /api/webhooks accepts an API key",
)
API_KEY_LISTS_WEBHOOKS = Fault(
    "api-key-lists-webhooks",
    "CONSOLE-KEY-02",
    "GET /api/webhooks accepts an API key",
)
API_KEY_TESTS_WEBHOOKS = Fault(
    "api-key-tests-webhooks",
    "CONSOLE-KEY-03",
    "POST /api/webhooks/{id}/test accepts an API key",
)
API_KEY_DELETES_WEBHOOKS = Fault(
    "api-key-deletes-webhooks",
    "CONSOLE-KEY-04",
    "DELETE /api/webhooks/{id} accepts an API key",
)
IMAGES_SCOPE_NOT_ENFORCED = Fault(
    "images-scope-not-enforced",
    "SCOPE-IMAGES-01",
    "POST /v1/images/generate ignores its scope",
)
EDIT_SCOPE_NOT_ENFORCED = Fault(
    "edit-scope-not-enforced",
    "SCOPE-EDIT-01",
    "POST /v1/images/edit ignores its scope",
)
VIDEO_SCOPE_NOT_ENFORCED = Fault(
    "video-scope-not-enforced",
    "SCOPE-VIDEO-01",
    "POST /v1/videos/generate ignores its scope",
)
IMAGES_NEEDS_ALL_SCOPES = Fault(
    "images-needs-all-scopes",
    "SCOPE-IMAGES-02",
    "POST /v1/images/generate demands every scope, not only images:generate",
)
EDIT_NEEDS_IMAGES_GENERATE = Fault(
    "edit-needs-images-generate",
    "SCOPE-EDIT-02",
    "POST /v1/images/edit also demands images:generate",
)
VIDEO_NEEDS_IMAGES_GENERATE = Fault(
    "video-needs-images-generate",
    "SCOPE-VIDEO-02",
    "POST /v1/videos/generate also demands images:generate",
)
KEY_PREFIX_WRONG = Fault(
    "key-prefix-wrong",
    "KEY-PREFIX-01",
    "new API keys lack the <key_prefix>_ prefix",
)
REVOCATION_DELAYED = Fault(
    "revocation-delayed",
    "KEY-REVOKE-01",
    "keys are cached for 60 s, so a revoked key keeps working for a while",
)
SESSION_SIGNATURE_NOT_CHECKED = Fault(
    "session-signature-not-checked",
    "CONSOLE-SESSION-02",
    "console JWTs are accepted without checking their signature",
)
CONSOLE_OPEN_WITHOUT_SESSION = Fault(
    "console-open-without-session",
    "CONSOLE-SESSION-01",
    "console paths without credentials act for the oldest account",
)
API_KEY_OPENS_CONSOLE = Fault(
    "api-key-opens-console",
    "CONSOLE-KEY-05",
    "an API key opens /api console paths",
)
SESSION_REFUSED_ON_TIER = Fault(
    "session-refused-on-tier",
    "CONSOLE-SESSION-03",
    "GET /api/tier refuses valid sessions",
)
MALFORMED_AUTHORIZATION_ACCEPTED = Fault(
    "malformed-authorization-accepted",
    "AUTH-KEY-03",
    "the key is taken from any Authorization form (no scheme, another scheme)",
)
MISSING_KEY_ACCEPTED = Fault(
    "missing-key-accepted",
    "AUTH-KEY-01",
    "a /v1 request without Authorization acts with the oldest active key",
)
UNKNOWN_KEY_ACCEPTED = Fault(
    "unknown-key-accepted",
    "AUTH-KEY-02",
    "an unknown key of the right shape acts as the oldest active key",
)
REVOKED_KEY_ACCEPTED = Fault(
    "revoked-key-accepted",
    "KEY-REVOKE-02",
    "a revoked key keeps working",
)
TIER_REFUSES_KEYS = Fault(
    "tier-refuses-keys",
    "AUTH-BEARER-01",
    "GET /v1/account/tier refuses valid keys",
)
SCOPE_NOT_ENFORCED = Fault(
    "scope-not-enforced",
    "SCOPE-DENY-01",
    "keys may call endpoints outside their scopes",
)


#: The scope names of spec §5.2, in the spec's order.
SCOPES = ("images:generate", "images:edit", "videos:generate", "audio:generate", "agent:run")

#: Console sessions live this long when created through POST /api/session.
SESSION_TTL_S = 3600
#: The cookie that carries the console session with the choice
#: ``console_credential = "cookie"``.
SESSION_COOKIE = "acme_session"
_JWT_ALGORITHM = "HS256"
_KEY_BODY = re.compile(r"[A-Za-z0-9_-]{43}")

# With none of the faults above on, none of these tables is consulted.
#: Faults that open one console operation to API keys (spec §4 console table).
_CONSOLE_KEY_FAULTS = (
    ("POST", re.compile(r"/api/webhooks"), API_KEY_CREATES_WEBHOOKS),
    ("GET", re.compile(r"/api/webhooks"), API_KEY_LISTS_WEBHOOKS),
    ("POST", re.compile(r"/api/webhooks/[^/]+/test"), API_KEY_TESTS_WEBHOOKS),
    ("DELETE", re.compile(r"/api/webhooks/[^/]+"), API_KEY_DELETES_WEBHOOKS),
)
#: Faults that drop one endpoint's scope check (spec §4 "Scope:" lines).
_SCOPE_IGNORED_FAULTS = {
    "images:generate": IMAGES_SCOPE_NOT_ENFORCED,
    "images:edit": EDIT_SCOPE_NOT_ENFORCED,
    "videos:generate": VIDEO_SCOPE_NOT_ENFORCED,
}
#: Faults that make an endpoint demand scopes beyond its own.
_EXTRA_SCOPE_FAULTS = (
    ("images:generate", IMAGES_NEEDS_ALL_SCOPES, frozenset(SCOPES)),
    ("images:edit", EDIT_NEEDS_IMAGES_GENERATE, frozenset({"images:generate"})),
    ("videos:generate", VIDEO_NEEDS_IMAGES_GENERATE, frozenset({"images:generate"})),
)


@dataclass(frozen=True)
class KeyContext:
    """The API key behind a /v1 request."""

    key_id: str
    account_id: str
    scopes: frozenset[str]
    #: The per-key webhook signing secret (spec §5.6): stable, distinct per key.
    signing_secret: str = ""
    tier: str = ""

    def __repr__(self) -> str:  # never print the signing secret
        return f"KeyContext(key_id={self.key_id!r}, account_id={self.account_id!r})"


@dataclass(frozen=True)
class SessionContext:
    """The signed-in console account behind an /api request."""

    account_id: str


def hash_key(value: str) -> str:
    """The stored form of an API key: sha256, hex (spec §2: stored hashed)."""
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def new_key_value(prefix: str, faults: Faults) -> str:
    """A fresh secret key value ``<prefix>_<random>`` (spec §2)."""
    body = secrets.token_urlsafe(32)  # 43 characters
    if faults.on(KEY_PREFIX_WRONG):
        return "sk-" + body
    return f"{prefix}_{body}"


def signing_secret_for(master_secret: str, key_id: str, keying: str = "utf8") -> str:
    """The per-key webhook secret (spec §5.6, §5.7 leaves the derivation unshown).

    HMAC-SHA256 of the key id under the service's master secret: stable across restarts
    (the master secret lives in the store), distinct per key, never stored. Written as
    hex, or with the choice ``hmac_keying = "base64-after-prefix"`` as ``whsec_`` and the
    digest's base64, the form that keying decodes.
    """
    digest = hmac.new(
        master_secret.encode("utf-8"), f"key-signing:{key_id}".encode(), hashlib.sha256
    )
    if keying == "base64-after-prefix":
        return "whsec_" + base64.b64encode(digest.digest()).decode("ascii")
    return digest.hexdigest()


def _session_key(master_secret: str) -> bytes:
    return hmac.new(master_secret.encode("utf-8"), b"console-session", hashlib.sha256).digest()


def _bearer(request: Request, *, exact_scheme: bool = False) -> str:
    """The token of ``Authorization: Bearer <token>``; the scheme word in any case unless
    ``exact_scheme`` (the choice ``bearer_scheme_case``)."""
    header = request.headers.get("authorization")
    if header is None:
        raise ApiError(401, "missing Authorization header: send `Authorization: Bearer <API_KEY>`")
    scheme, _, value = header.partition(" ")
    value = value.strip()
    if (scheme != "Bearer" if exact_scheme else scheme.lower() != "bearer") or not value:
        raise ApiError(
            401, "malformed Authorization header: use the form `Authorization: Bearer <token>`"
        )
    return value


class Authenticator:
    """Checks keys and sessions against the store; owns the request rate limiter."""

    def __init__(self, store: Store, config: Config, faults: Faults, tiers: Tiers) -> None:
        self.store = store
        self.config = config
        self.faults = faults
        self.tiers = tiers
        self.limiter = RateLimiter(store, faults, shared=config.workers > 1)
        #: Only with fault REVOCATION_DELAYED: key rows cached by key value.
        self._fault_cache: dict[str, tuple[float, Any]] = {}

    # --- console sessions -------------------------------------------------------------

    def issue_session(self, account_id: str, ttl_s: int = SESSION_TTL_S) -> tuple[str, int]:
        """A console JWT (HS256 under a key derived from the master secret) and its exp."""
        now = int(time.time())
        claims = {
            "sub": account_id,
            "typ": "console",
            "iat": now,
            "exp": now + ttl_s,
            "jti": secrets.token_hex(8),
        }
        token = jwt.encode(claims, _session_key(self.config.master_secret), _JWT_ALGORITHM)
        return token, now + ttl_s

    def _session_account(self, token: str) -> str | None:
        options: Options = {
            "require": ["exp", "sub", "typ"],
            "verify_signature": not self.faults.on(SESSION_SIGNATURE_NOT_CHECKED),
        }
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                _session_key(self.config.master_secret),
                algorithms=[_JWT_ALGORITHM],
                options=options,
            )
        except jwt.PyJWTError:
            return None
        if claims.get("typ") != "console" or not isinstance(claims.get("sub"), str):
            return None
        account: str = claims["sub"]
        if not self.store.read("SELECT 1 FROM accounts WHERE id = ?", (account,)):
            return None
        return account

    def _console_fault_account(self, request: Request) -> str | None:
        """Fault CONSOLE_OPEN_WITHOUT_SESSION: the oldest account, for no credentials."""
        if request.headers.get("authorization") is not None:
            return None
        if not self.faults.on(CONSOLE_OPEN_WITHOUT_SESSION):
            return None
        rows = self.store.read("SELECT id FROM accounts ORDER BY created_at, rowid LIMIT 1")
        return str(rows[0]["id"]) if rows else None

    def _api_key_opens(self, request: Request) -> bool:
        """Faults that let an API key through to (some) console operations."""
        if self.faults.on(API_KEY_OPENS_CONSOLE):
            return True
        return any(
            request.method == method
            and pattern.fullmatch(request.url.path) is not None
            and self.faults.on(fault)
            for method, pattern, fault in _CONSOLE_KEY_FAULTS
        )

    def session(self, request: Request) -> SessionContext:
        opened = self._console_fault_account(request)
        if opened is not None:
            return SessionContext(account_id=opened)
        token = self._session_token(request)
        account = self._session_account(token)
        if (
            account is not None
            and request.url.path == "/api/tier"
            and self.faults.on(SESSION_REFUSED_ON_TIER)
        ):
            account = None
        if account is None and self._api_key_opens(request):
            row = self._key_row(token)
            if row is not None and row["revoked_at"] is None:
                account = row["account_id"]
        if account is None:
            raise ApiError(
                401,
                "console paths need a signed-in session: send `Authorization: Bearer <JWT>` "
                "from POST /api/session (API keys do not open /api paths); the token is "
                "missing, invalid or expired",
            )
        return SessionContext(account_id=account)

    def _session_token(self, request: Request) -> str:
        """The console credential as the choice ``console_credential`` carries it."""
        if self.config.choices.console_credential == "cookie":
            token = request.cookies.get(SESSION_COOKIE)
            if not token:
                raise ApiError(
                    401,
                    f"console paths need a signed-in session: send the {SESSION_COOKIE} "
                    "cookie that logging in sets",
                )
            return token
        return self._bearer(request)

    def _bearer(self, request: Request) -> str:
        return _bearer(request, exact_scheme=self.config.choices.bearer_scheme_case == "exact")

    def account_for_key_allowed(self, request: Request) -> str:
        """The account behind a call to one of the three "API key allowed" endpoints of
        spec §4: an API key's, or with the choice ``session_on_key_endpoints`` a
        signed-in session's (a key is one accepted credential there, not the only one)."""
        if self.config.choices.session_on_key_endpoints:
            try:
                account = self._session_account(self._session_token(request))
            except ApiError:
                account = None
            if account is not None:
                return account
        return self.require_key(request, None).account_id

    # --- API keys ---------------------------------------------------------------------

    def _key_row(self, value: str) -> Any:
        if self.faults.on(REVOCATION_DELAYED):
            cached = self._fault_cache.get(value)
            if cached is not None and cached[0] > time.monotonic():
                return cached[1]
        rows = self.store.read(
            "SELECT k.id, k.account_id, k.scopes, k.revoked_at, a.tier "
            "FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.key_hash = ?",
            (hash_key(value),),
        )
        row = rows[0] if rows else None
        if row is not None and self.faults.on(REVOCATION_DELAYED):
            self._fault_cache[value] = (time.monotonic() + 60.0, row)
        return row

    def _oldest_key_row(self) -> Any:
        """For faults only: the oldest active key, which a lax service falls back to."""
        rows = self.store.read(
            "SELECT k.id, k.account_id, k.scopes, k.revoked_at, a.tier "
            "FROM api_keys k JOIN accounts a ON a.id = k.account_id "
            "WHERE k.revoked_at IS NULL ORDER BY k.created_at, k.rowid LIMIT 1"
        )
        return rows[0] if rows else None

    def _lax_bearer(self, request: Request) -> str:
        """Fault MALFORMED_AUTHORIZATION_ACCEPTED: the last word of any header form."""
        words = (request.headers.get("authorization") or "").split()
        return words[-1] if words else _bearer(request)

    def identify(self, request: Request) -> KeyContext:
        """The key of a /v1 request, or 401 (missing, malformed, unknown, revoked; or the
        status of the choice ``bad_key_status``)."""
        try:
            return self._identify(request)
        except ApiError as refused:
            if refused.status == 401:
                refused.status = self.config.choices.bad_key_status
            raise

    def _identify(self, request: Request) -> KeyContext:
        if request.headers.get("authorization") is None and self.faults.on(MISSING_KEY_ACCEPTED):
            fallback = self._oldest_key_row()
            if fallback is not None:
                return self._context(request, fallback)
        if self.faults.on(MALFORMED_AUTHORIZATION_ACCEPTED):
            value = self._lax_bearer(request)
        else:
            value = self._bearer(request)
        row = self._key_row(value)
        if row is None and self.faults.on(UNKNOWN_KEY_ACCEPTED):
            prefix = self.config.key_prefix
            if _KEY_BODY.fullmatch(value.removeprefix(prefix + "_")):
                row = self._oldest_key_row()
        if row is None:
            prefix = self.config.key_prefix
            body = value.removeprefix(prefix + "_")
            if not value.startswith(prefix + "_") or not _KEY_BODY.fullmatch(body):
                raise ApiError(
                    401,
                    f"malformed API key: keys look like `{prefix}_` followed by 43 characters; "
                    "console session tokens do not open /v1 paths",
                )
            raise ApiError(401, "unknown API key: check the key, or create one in the console")
        if row["revoked_at"] is not None and not self.faults.on(REVOKED_KEY_ACCEPTED):
            raise ApiError(401, "this API key has been revoked: create a new key in the console")
        return self._context(request, row)

    def _context(self, request: Request, row: Any) -> KeyContext:
        context = KeyContext(
            key_id=row["id"],
            account_id=row["account_id"],
            scopes=frozenset(json.loads(row["scopes"])),
            signing_secret=signing_secret_for(
                self.config.master_secret, row["id"], self.config.choices.hmac_keying
            ),
            tier=row["tier"],
        )
        # For the structured request log (key ids only, never keys).
        request.state.key_id = context.key_id
        return context

    def tier_of(self, key: KeyContext) -> Tier:
        return self.tiers.get(key.tier)

    def require_key(self, request: Request, scope: str | None) -> KeyContext:
        key = self.identify(request)
        if request.url.path == "/v1/account/tier" and self.faults.on(TIER_REFUSES_KEYS):
            raise ApiError(401, "unknown API key: check the key, or create one in the console")
        counted = scope is not None or self.config.choices.rate_counted == "every-request"
        window = (
            self.limiter.admit(key.key_id, self.tier_of(key), key.account_id) if counted else None
        )
        if window is not None:
            # Sent as X-RateLimit-* on the response (reference.app.RequestLog).
            request.state.ratelimit = window
        if (
            scope is not None
            and scope not in key.scopes
            and not self.faults.on(SCOPE_NOT_ENFORCED)
            and not (
                scope in _SCOPE_IGNORED_FAULTS and self.faults.on(_SCOPE_IGNORED_FAULTS[scope])
            )
        ):
            raise ApiError(
                403,
                f"this API key lacks the scope `{scope}` this endpoint needs; "
                f"its scopes: {', '.join(sorted(key.scopes)) or 'none'}",
            )
        for demanded, fault, extra in _EXTRA_SCOPE_FAULTS:
            if scope == demanded and not extra <= key.scopes and self.faults.on(fault):
                raise ApiError(403, f"this API key lacks a scope among {sorted(extra)}")
        return key


def _authenticator(request: Request) -> Authenticator:
    authenticator: Authenticator = request.app.state.authenticator
    return authenticator


async def require_key(request: Request, scope: str | None = None) -> KeyContext:
    """Authenticate a /v1 request by API key, count it, check ``scope``.

    Raises ApiError 401 (missing, malformed, unknown or revoked key), 429 (per-key minute
    or day limit, with the headers of spec §7) or 403 (outside the key's scopes).
    """
    return _authenticator(request).require_key(request, scope)


async def require_session(request: Request) -> SessionContext:
    """Authenticate an /api request by console JWT; 401 otherwise (API keys included)."""
    return _authenticator(request).session(request)
