"""Accounts and API keys in the store: create, list, show, revoke; console passwords.

Spec §2: a key has a name and scopes; its secret value starts with ``<key_prefix>_``, is
returned once at creation and stored hashed. An account holds at most 10 active keys.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reference.auth import SCOPES, hash_key, new_key_value, signing_secret_for
from reference.clock import CLOCK, day_of
from reference.errors import ApiError
from reference.fault import Fault, Faults
from reference.ids import new_id
from reference.store import Store

__all__ = [
    "MAX_ACTIVE_KEYS",
    "CreatedKey",
    "check_password",
    "create_account",
    "create_key",
    "credit_day",
    "hash_password",
    "key_detail",
    "key_view",
    "list_keys",
    "now_iso",
    "revoke_key",
    "stored_password",
    "validate_scopes",
]

# Faults injected here (``--fault NAME``; the registry, ``reference/faults.py``, collects them).
KEY_SHOWN_AGAIN = Fault(
    "key-shown-again",
    "KEY-ONCE-02",
    "the key detail view repeats the full secret value",
)
KEY_PREFIX_PER_ACCOUNT = Fault(
    "key-prefix-per-account",
    "KEY-PREFIX-02",
    "each account's keys get their own prefix (<key_prefix><account suffix>_)",
)
NEW_KEY_NOT_ACTIVE = Fault(
    "new-key-not-active",
    "KEY-CREATE-01",
    "keys created in the console do not authenticate (stored under another hash)",
)
REVOKED_KEYS_COUNT_TOWARD_LIMIT = Fault(
    "revoked-keys-count-toward-limit",
    "KEY-LIMIT-03",
    "revoked keys still count toward the 10-active-keys limit",
)
KEY_LIMIT_NOT_ENFORCED = Fault(
    "key-limit-not-enforced",
    "KEY-LIMIT-01",
    "an account may hold more than 10 keys",
)
KEY_DETAIL_SIGNING_SECRET_WRONG = Fault(
    "key-detail-signing-secret-wrong",
    "SIG-KEY-04",
    "the key detail view shows a secret that signs nothing",
)
CREDIT_CAP_RESETS_AT_LOCAL_MIDNIGHT = Fault(
    "credit-cap-resets-at-local-midnight",
    "CREDIT-CAP-03",
    "daily credits are counted per UTC+05:30 day: the cap resets at 18:30 UTC, not 00:00 UTC",
)
#: The zone of the fault CREDIT_CAP_RESETS_AT_LOCAL_MIDNIGHT: a fixed offset, so the
#: fault is the same whatever the process's TZ.
_LOCAL_UTC_OFFSET_S = 5.5 * 3600

#: Spec §2 and §8: active keys per account.
MAX_ACTIVE_KEYS = 10
_PBKDF2_ROUNDS = 60_000
#: The stored password of an account nobody signs in to: no hash, so no password matches.
UNUSABLE_HASH = "!"
#: Only with fault KEY_SHOWN_AGAIN: key values kept in memory so the detail view can
#: repeat them (honest mode never keeps a key value anywhere).
_FAULT_KEPT_VALUES: dict[str, str] = {}


def now_iso() -> str:
    """Now as ISO 8601 with offset, e.g. ``2026-08-01T12:00:00.123+00:00``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def credit_day(faults: Faults) -> str:
    """The day the account's credits are counted in: the calendar day (UTC) of the
    service's clock, for the cap that "resets 00:00 UTC" (spec §8)."""
    offset = _LOCAL_UTC_OFFSET_S if faults.on(CREDIT_CAP_RESETS_AT_LOCAL_MIDNIGHT) else 0.0
    return day_of(CLOCK.now(), offset)


def hash_password(password: str) -> str:
    """PBKDF2-SHA256 with a random salt, as ``pbkdf2$rounds$salt$hash``."""
    salt = secrets.token_hex(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(salt), _PBKDF2_ROUNDS)
    return f"pbkdf2${_PBKDF2_ROUNDS}${salt}${digest.hex()}"


def stored_password(password: str | None) -> str:
    """What the store keeps of *password*: its hash, or :data:`UNUSABLE_HASH` for none."""
    return UNUSABLE_HASH if password is None else hash_password(password)


def check_password(password: str, stored: str) -> bool:
    """Constant-time comparison of ``password`` with a :func:`hash_password` value (an
    account with :data:`UNUSABLE_HASH` matches none)."""
    try:
        _, rounds, salt, expected = stored.split("$")
        digest = hashlib.pbkdf2_hmac("sha256", password.encode(), bytes.fromhex(salt), int(rounds))
    except ValueError:
        return False
    return hmac.compare_digest(digest.hex(), expected)


def create_account(
    conn: sqlite3.Connection, *, name: str, email: str, password: str | None, tier: str
) -> str:
    """Insert an account (with no *password*: one nobody can sign in with); returns its id."""
    account_id = "acct_" + secrets.token_hex(8)
    conn.execute(
        "INSERT INTO accounts (id, name, email, password_hash, tier, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (account_id, name, email, stored_password(password), tier, now_iso()),
    )
    return account_id


def validate_scopes(value: Any) -> list[str]:
    """The ``scopes`` of a key-creation body: a non-empty list of scope names (spec §5.2)."""
    if not isinstance(value, list) or not value:
        raise ApiError(400, f"`scopes` must be a non-empty array of scope names: {list(SCOPES)}")
    unknown = [s for s in value if not isinstance(s, str) or s not in SCOPES]
    if unknown:
        raise ApiError(400, f"unknown scope(s) {unknown!r}; known scopes: {list(SCOPES)}")
    return sorted(set(value), key=SCOPES.index)


@dataclass(frozen=True)
class CreatedKey:
    """A key just created: its id and the secret value (shown this once)."""

    key_id: str
    value: str
    name: str
    scopes: tuple[str, ...]
    created_at: str

    def __repr__(self) -> str:  # never print the key
        return f"CreatedKey(key_id={self.key_id!r}, name={self.name!r})"


def create_key(
    store: Store,
    *,
    account_id: str,
    name: str,
    scopes: Sequence[str],
    prefix: str,
    faults: Faults,
    role: str | None = None,
    id_form: str = "prefixed-hex",
) -> CreatedKey:
    """Create a key, enforcing the 10-active-keys limit atomically (409 beyond it)."""
    key_id = new_id("key", id_form)
    if faults.on(KEY_PREFIX_PER_ACCOUNT):
        prefix = f"{prefix}{account_id[-4:]}"
    value = new_key_value(prefix, faults)
    # Fault NEW_KEY_NOT_ACTIVE: a console-created key is stored under another hash.
    stored = value + "-inactive" if role is None and faults.on(NEW_KEY_NOT_ACTIVE) else value
    created = now_iso()
    with store.transaction() as conn:
        counted = (
            "SELECT COUNT(*) FROM api_keys WHERE account_id = ?"
            if faults.on(REVOKED_KEYS_COUNT_TOWARD_LIMIT)
            else "SELECT COUNT(*) FROM api_keys WHERE account_id = ? AND revoked_at IS NULL"
        )
        (active,) = conn.execute(counted, (account_id,)).fetchone()
        if active >= MAX_ACTIVE_KEYS and not faults.on(KEY_LIMIT_NOT_ENFORCED):
            raise ApiError(
                409,
                f"this account already holds {MAX_ACTIVE_KEYS} active API keys, the most "
                "allowed (spec §2); revoke one (DELETE /api/keys/{id}) before creating another",
            )
        conn.execute(
            "INSERT INTO api_keys (id, account_id, name, scopes, key_hash, created_at, "
            "provisioned_role) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (key_id, account_id, name, json.dumps(list(scopes)), hash_key(stored), created, role),
        )
    if faults.on(KEY_SHOWN_AGAIN):
        _FAULT_KEPT_VALUES[key_id] = value
    return CreatedKey(key_id, value, name, tuple(scopes), created)


def key_view(row: sqlite3.Row) -> dict[str, Any]:
    """A key as listed: never its secret value, never its signing secret."""
    return {
        "id": row["id"],
        "name": row["name"],
        "scopes": json.loads(row["scopes"]),
        "created_at": row["created_at"],
        "revoked": row["revoked_at"] is not None,
        "revoked_at": row["revoked_at"],
    }


def _key_row(store: Store, account_id: str, key_id: str) -> sqlite3.Row:
    rows = store.read(
        "SELECT * FROM api_keys WHERE id = ? AND account_id = ?", (key_id, account_id)
    )
    if not rows:
        raise ApiError(404, f"no API key {key_id!r} in this account")
    return rows[0]


def list_keys(store: Store, account_id: str) -> list[dict[str, Any]]:
    rows = store.read(
        "SELECT * FROM api_keys WHERE account_id = ? ORDER BY created_at, id", (account_id,)
    )
    return [key_view(row) for row in rows]


def key_detail(
    store: Store,
    account_id: str,
    key_id: str,
    master_secret: str,
    faults: Faults,
    keying: str = "utf8",
) -> dict[str, Any]:
    """The console's key detail view, with the per-key signing secret (spec §5.6)."""
    view = key_view(_key_row(store, account_id, key_id))
    view["signing_secret"] = signing_secret_for(master_secret, key_id, keying)
    if faults.on(KEY_DETAIL_SIGNING_SECRET_WRONG):
        view["signing_secret"] = signing_secret_for(master_secret, f"{key_id}:detail")
    if faults.on(KEY_SHOWN_AGAIN) and key_id in _FAULT_KEPT_VALUES:
        view["key"] = _FAULT_KEPT_VALUES[key_id]
    return view


def revoke_key(store: Store, account_id: str, key_id: str) -> dict[str, Any]:
    """Revoke a key; effective on the next request (auth reads the store every time)."""
    with store.transaction() as conn:
        row = conn.execute(
            "SELECT revoked_at FROM api_keys WHERE id = ? AND account_id = ?", (key_id, account_id)
        ).fetchone()
        if row is None:
            raise ApiError(404, f"no API key {key_id!r} in this account")
        if row["revoked_at"] is None:
            conn.execute("UPDATE api_keys SET revoked_at = ? WHERE id = ?", (now_iso(), key_id))
    return key_view(_key_row(store, account_id, key_id))
