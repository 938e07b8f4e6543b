"""``--provision``: accounts, keys and sessions for a suite run, written as a target profile.

Creates (or reuses, by name) the accounts of :data:`ACCOUNTS`: ``primary`` and ``second``
on the generous tier, ``low-limit``, ``low-window`` and ``low-credits`` on the low-limit
tier, ``low-daily``, ``restricted-models`` (a tier without the video category),
``high-limit`` and ``low-concurrency``. Then the keys of every profile role
(ARCHITECTURE.md, "Target profile"): ``primary`` with every scope; ``without-<scope>``
lacking one scope each; ``revoked``; ``foreign`` (second account); ``low-limit`` and
``low-limit-second`` (one account); ``low-limit-window`` and ``low-limit-credits`` (an
account each); ``low-daily``; ``restricted-models``; ``high-limit`` and
``high-limit-second`` (a high per-minute limit, for load); ``low-concurrency`` (a small
concurrent_limit, for load). Console sessions are
issued for primary and second, and the complete TOML profile is written. Where the spec
leaves room, the profile declares the side the service's choices take (``Config.choices``;
the variant's differ): the console operations (``[adapter]``), the delivery headers' brand
word and the HMAC keying (``[wire]``) and the requests the limiter counts (``[rate]``).

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
from reference.auth import SCOPES, SESSION_COOKIE, signing_secret_for
from reference.clock import TEST_CLOCK_PATH
from reference.config import Choices
from reference.console import console_api
from reference.store import Store
from reference.webhooks.routes import VARIANT_WEBHOOK_FIELDS
from reference.worker import CANCEL_MARK, FAIL_MARK

__all__ = ["ACCOUNTS", "provision"]

#: Provisioned accounts: name → tier (see reference/tiers.toml).
ACCOUNTS = {
    "primary": "studio",
    "second": "studio",
    "low-limit": "low-limit",
    # Accounts of the suite's other chains on the low-limit tier (the rolling window; the
    # credits and the concurrency limit), so that they run beside the per-minute one: a
    # window or credits shared by an account's keys never couples them.
    "low-window": "low-limit",
    "low-credits": "low-limit",
    "low-daily": "low-daily",
    "restricted-models": "no-video",
    "high-limit": "high-limit",
    "low-concurrency": "low-concurrency",
}
#: The accounts the profile signs in to (their console sessions and passwords). The others
#: get no password: nobody is given one, and hashing it cost 20 ms of CPU at every start.
SIGNED_IN = ("primary", "second")
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
        # A second key of the low-limit account: the per-minute limit is per key (§8).
        ("low-limit-second", "low-limit", SCOPES),
        ("low-limit-window", "low-window", SCOPES),
        ("low-limit-credits", "low-credits", SCOPES),
        # The daily request limit and its reset at 00:00 UTC (§8).
        ("low-daily", "low-daily", SCOPES),
        ("restricted-models", "restricted-models", SCOPES),
        # A high per-minute limit verified under load (genapi-conformance load), and a
        # second key of its account that must not be throttled meanwhile.
        ("high-limit", "high-limit", SCOPES),
        ("high-limit-second", "high-limit", SCOPES),
        # A small concurrent_limit under large rate limits (genapi-conformance load).
        ("low-concurrency", "low-concurrency", SCOPES),
    ]
    return roles


def _ensure_accounts(store: Store) -> dict[str, tuple[str, str, str | None]]:
    """Account name → (id, email, fresh password or None, see :data:`SIGNED_IN`);
    creates missing accounts."""
    found: dict[str, tuple[str, str, str | None]] = {}
    with store.transaction() as conn:
        for name, tier in ACCOUNTS.items():
            email = f"{name}@reference.invalid"
            password = secrets.token_urlsafe(18) if name in SIGNED_IN else None
            row = conn.execute("SELECT id FROM accounts WHERE name = ?", (name,)).fetchone()
            if row is None:
                account_id = accounts.create_account(
                    conn, name=name, email=email, password=password, tier=tier
                )
            else:
                account_id = row["id"]
                conn.execute(
                    "UPDATE accounts SET password_hash = ?, tier = ? WHERE id = ?",
                    (accounts.stored_password(password), tier, account_id),
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
            id_form=config.choices.id_form,
        )
        entry: dict[str, Any] = {
            "key": created.value,
            "key_id": created.key_id,
            "account": account,
            "scopes": list(scopes),
            "signing_secret": signing_secret_for(
                config.master_secret, created.key_id, config.choices.hmac_keying
            ),
        }
        if role == "revoked":
            accounts.revoke_key(store, made[account][0], created.key_id)
            entry["revoked"] = True
        keys[role] = entry
    sessions: dict[str, dict[str, Any]] = {}
    for name in SIGNED_IN:
        account_id, email, password = made[name]
        token, _ = service.authenticator.issue_session(account_id, PROVISIONED_SESSION_TTL_S)
        sessions[name] = {"token": token, "email": email, "password": password}
    choices = config.choices
    profile: dict[str, Any] = {
        "name": "reference (embedded)" if choices == Choices() else "reference variant (embedded)",
        "base_url": config.base_url,
        "key_prefix": config.key_prefix,
        "api_version": API_VERSION,
        "adapter": _adapter(choices),
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
        "budgets": {
            "max_requests_per_rate_check": 200,
            "destructive": True,
            # The dearest operation's price: what `run --budget-credits` counts a submit at.
            "credits_per_submit": max(service.authenticator.tiers.prices.values()),
        },
        "timing": {"tolerance_seconds": 0.6},
        # The wire choices (spec §6): the brand word of the delivery headers and the HMAC
        # keying (reference.webhooks.signing); and which requests the limiter counts.
        "wire": {"header_brand": choices.header_brand, "secret_keying": choices.hmac_keying},
        "rate": {"request": "reads" if choices.rate_counted == "every-request" else "submits"},
    }
    if config.test_clock:
        # The test-mode clock (reference.clock): the suite moves it across 00:00 UTC.
        profile["clock"] = {
            "method": "POST",
            "path": TEST_CLOCK_PATH,
            "body": {"advance_seconds": "{seconds}"},
            "status": 200,
        }
    if config.dns_server is not None:
        host, port = config.dns_server
        shown = f"[{host}]" if ":" in host else host
        profile["dns"] = {"server": f"{shown}:{port}", "domain": "rebind.genapi.test"}
    _write_private(profile_path, tomli_w.dumps(profile))
    return profile


def _adapter(choices: Choices) -> dict[str, Any]:
    """The ``[adapter]`` declaration of the console the choices give: the spec shows no
    request for the log-in and the keys, and no console payload (§4, §5.4, §5.8).

    The reference's own console is the suite's preset ``reference``; any other is
    declared in full, from the descriptions its routes are built from.
    """
    own = Choices()
    if (choices.console_api, choices.console_credential, choices.console_webhook_payloads) == (
        own.console_api,
        own.console_credential,
        own.console_webhook_payloads,
    ):
        return {"preset": "reference"}
    api = console_api(choices)
    hook = VARIANT_WEBHOOK_FIELDS if choices.console_webhook_payloads == "variant" else {}
    revoke_method, revoke_path = api.revoke
    credential: dict[str, Any] = {"scheme": choices.console_credential}
    if choices.console_credential == "cookie":
        credential["cookie"] = SESSION_COOKIE
    return {
        "credential": credential,
        "login": {
            "method": "POST",
            "path": api.login_path,
            "body": {api.email_field: "{email}", api.password_field: "{password}"},
            "status": 200,
            "token": f"/{api.token_field}",
        },
        "create_key": {
            "method": "POST",
            "path": api.keys_path,
            "body": {api.name("name"): "{name}", api.name("scopes"): "{scopes}"},
            "status": api.create_status,
            "id": f"/{api.name('id')}",
            "key": f"/{api.name('key')}",
        },
        "key_detail": {
            "method": "GET",
            "path": api.keys_path + "/{id}",
            "status": 200,
            "name": f"/{api.name('name')}",
            "scopes": f"/{api.name('scopes')}",
            "signing_secret": f"/{api.name('signing_secret')}",
        },
        "revoke_key": {
            "method": revoke_method,
            "path": revoke_path.replace("{key_id}", "{id}"),
            "status": api.revoke_status,
        },
        "list_keys": {
            "method": "GET",
            "path": api.keys_path,
            "status": 200,
            "list": "" if api.keys_listed_bare else "/keys",
            "item_id": f"/{api.name('id')}",
        },
        "create_webhook": {
            "method": "POST",
            "path": "/api/webhooks",
            "body": {hook.get("url", "url"): "{url}", hook.get("events", "events"): "{events}"},
            "status": 200 if hook else 201,
            "id": "/id",
            "secret": f"/{hook.get('secret', 'secret')}",
        },
        "list_webhooks": {
            "method": "GET",
            "path": "/api/webhooks",
            "status": 200,
            "list": "" if hook else "/webhooks",
            "item_id": "/id",
            "item_url": f"/{hook.get('url', 'url')}",
        },
        "test_webhook": {"method": "POST", "path": "/api/webhooks/{id}/test", "status": 200},
        "delete_webhook": {
            "method": "DELETE",
            "path": "/api/webhooks/{id}",
            "status": 200 if hook else 204,
        },
    }


def _write_private(path: Path, text: str) -> None:
    """Write the profile readable by its owner only: it holds keys and tokens."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".part")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(partial, path)
