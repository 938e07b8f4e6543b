"""``--provision``: accounts, keys and sessions for a suite run, written as a target profile.

Creates (or reuses, by name) four accounts: ``primary`` and ``second`` on the generous
tier, ``low-limit`` on the low-limit tier, ``restricted-models`` on a tier without the
video category. Then the keys of every profile role (ARCHITECTURE.md, "Target profile"):
``primary`` with every scope; ``without-<scope>`` lacking one scope each; ``revoked``;
``foreign`` (second account); ``low-limit``; ``restricted-models``. Console sessions are
issued for primary and second, and the complete TOML profile is written.

Re-provisioning into an existing database is idempotent in effect: raw keys are known
only at creation, so the keys a previous provisioning created are revoked and fresh ones
made (active-key counts stay the same, nothing is duplicated); account passwords are
reset to fresh random ones. Keys created through the console are left alone.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import tomli_w

from genapi_spec import API_VERSION
from reference import accounts
from reference.auth import SCOPES, signing_secret_for
from reference.store import Store
from reference.worker import CANCEL_MARK, FAIL_MARK

__all__ = ["ACCOUNTS", "provision"]

#: Provisioned accounts: name → tier (see reference/tiers.toml).
ACCOUNTS = {
    "primary": "studio",
    "second": "studio",
    "low-limit": "low-limit",
    "restricted-models": "no-video",
}
#: Sessions issued at provisioning live this long (a long suite run fits easily).
PROVISIONED_SESSION_TTL_S = 7 * 24 * 3600


def _key_roles() -> list[tuple[str, str, tuple[str, ...]]]:
    """(role, account, scopes) of every key the profile lists, in profile order."""
    roles: list[tuple[str, str, tuple[str, ...]]] = [("primary", "primary", SCOPES)]
    for scope in SCOPES:
        lacking = tuple(s for s in SCOPES if s != scope)
        roles.append((f"without-{scope.replace(':', '-')}", "primary", lacking))
    roles += [
        ("revoked", "primary", ("images:generate",)),
        ("foreign", "second", SCOPES),
        ("low-limit", "low-limit", SCOPES),
        ("restricted-models", "restricted-models", SCOPES),
    ]
    return roles


def _ensure_accounts(store: Store) -> dict[str, tuple[str, str, str]]:
    """Account name → (id, email, fresh password); creates missing accounts."""
    found: dict[str, tuple[str, str, str]] = {}
    with store.transaction() as conn:
        for name, tier in ACCOUNTS.items():
            email = f"{name}@reference.invalid"
            password = secrets.token_urlsafe(18)
            row = conn.execute("SELECT id FROM accounts WHERE name = ?", (name,)).fetchone()
            if row is None:
                account_id = accounts.create_account(
                    conn, name=name, email=email, password=password, tier=tier
                )
            else:
                account_id = row["id"]
                conn.execute(
                    "UPDATE accounts SET password_hash = ?, tier = ? WHERE id = ?",
                    (accounts.hash_password(password), tier, account_id),
                )
            found[name] = (account_id, email, password)
        # Keys of an earlier provisioning: their raw values are gone, so retire them.
        conn.execute(
            "UPDATE api_keys SET revoked_at = ? "
            "WHERE provisioned_role IS NOT NULL AND revoked_at IS NULL",
            (accounts.now_iso(),),
        )
    return found


def provision(service: Any, profile_path: Path) -> dict[str, Any]:
    """Provision ``service`` (a ``reference.app.Service``) and write the profile TOML."""
    config = service.config
    store: Store = service.store
    made = _ensure_accounts(store)
    keys: dict[str, dict[str, Any]] = {}
    for role, account, scopes in _key_roles():
        created = accounts.create_key(
            store,
            account_id=made[account][0],
            name=f"provisioned: {role}",
            scopes=scopes,
            prefix=config.key_prefix,
            faults=service.faults,
            role=role,
        )
        entry: dict[str, Any] = {
            "key": created.value,
            "key_id": created.key_id,
            "account": account,
            "scopes": list(scopes),
            "signing_secret": signing_secret_for(config.master_secret, created.key_id),
        }
        if role == "revoked":
            accounts.revoke_key(store, made[account][0], created.key_id)
            entry["revoked"] = True
        keys[role] = entry
    sessions: dict[str, dict[str, Any]] = {}
    for name in ("primary", "second"):
        account_id, email, password = made[name]
        token, _ = service.authenticator.issue_session(account_id, PROVISIONED_SESSION_TTL_S)
        sessions[name] = {"token": token, "email": email, "password": password}
    profile: dict[str, Any] = {
        "name": "reference (embedded)",
        "base_url": config.base_url,
        "key_prefix": config.key_prefix,
        "api_version": API_VERSION,
        # The console paths above are the reference's own (the spec shows none): the
        # suite ships them as a declaration preset.
        "adapter": {"preset": "reference"},
        "keys": keys,
        "sessions": sessions,
        "receiver": {"listen_host": "127.0.0.1", "listen_port": 0, "public_url": ""},
        "sandbox": {
            "fail_prompt": FAIL_MARK,
            "cancel_prompt": CANCEL_MARK,
            # Fifty times the default latency: ample, and it bounds how long a check waits
            # for an event that an implementation wrongly never sends.
            "max_generation_seconds": max(10, config.latency_ms / 1000 * 10),
        },
        "usage": {"path": "/v1/account/usage", "field": "credits_used_today"},
        "budgets": {"max_requests_per_rate_check": 200, "destructive": True},
        "timing": {"tolerance_seconds": 0.6},
        # The reference's wire choices (spec §6): the neutral brand word, and the HMAC
        # keyed with the secret string's UTF-8 bytes (reference.webhooks.signing); its
        # limiter counts every authenticated /v1 request, reads included.
        "wire": {"header_brand": "Service", "secret_keying": "utf8"},
        "rate": {"request": "reads"},
    }
    if config.dns_server is not None:
        host, port = config.dns_server
        shown = f"[{host}]" if ":" in host else host
        profile["dns"] = {"server": f"{shown}:{port}", "domain": "rebind.genapi.test"}
    _write_private(profile_path, tomli_w.dumps(profile))
    return profile


def _write_private(path: Path, text: str) -> None:
    """Write the profile readable by its owner only: it holds keys and tokens."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(partial, path)
