"""Per-request delivery targets: parsing, selection, validation and bindings (spec §2, §4).

Target selection rules (spec §4): first match wins, ``webhook.id`` then ``webhook.url``
then ``callback_url``. A bad or foreign webhook id is a 404; a target that fails the
callback URL rules is a 400; both happen before any credit is spent, because the
generation core selects the target before it charges.

``events`` of a binding: "Event names to subscribe to" (spec §2). An explicit list
REPLACES the defaults (generation.completed, generation.failed), so ``["generation.
cancelled"]`` subscribes to cancellation only. The list must be a non-empty array of
known event names (400 otherwise): a typo would otherwise silently subscribe to nothing.
A ``webhook`` object with ``events`` but neither ``id`` nor ``url`` applies its events to
``callback_url``; with no ``callback_url`` either it is a 400.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal

import httpx

from reference.auth import KeyContext
from reference.config import Choices, Config
from reference.errors import ApiError
from reference.fault import Fault, Faults
from reference.netguard import (
    CallbackPolicy,
    CallbackRejected,
    DnsServerResolver,
    HostNotResolved,
    HostsFileResolver,
    Resolver,
    SystemResolver,
    ValidatedTarget,
    mask_userinfo,
)
from reference.store import Store

from . import event_faults, url_faults
from .envelopes import ALL_EVENTS, DEFAULT_EVENTS, timestamp_now

__all__ = [
    "Binding",
    "BindingMode",
    "Targets",
    "binding_from_row",
    "chosen_events",
    "parse_events",
    "policy_from_config",
    "validate_target",
]

# Faults injected here (``--fault NAME``; the registry, ``reference/faults.py``, collects them).
LOSING_TARGET_NOTIFIED = Fault(
    "losing-target-notified",
    "TARGET-ORDER-04",
    "the targets that lose the resolution order receive the events as well",
)
WEBHOOK_WITHOUT_TARGET_ACCEPTED = Fault(
    "webhook-without-target-accepted",
    "TARGET-URL-03",
    "a webhook object with neither id nor url is accepted (no target)",
)
PRECEDENCE_CALLBACK_FIRST = Fault(
    "precedence-callback-first",
    "TARGET-ORDER-01",
    "callback_url wins over webhook.url and webhook.id",
)
ACCEPTS_PRIVATE_CALLBACK = Fault(
    "accepts-private-callback",
    "URL-PRIV-01",
    "callback targets are not validated: private and loopback URLs are accepted",
)
UNKNOWN_WEBHOOK_ID_400 = Fault(
    "unknown-webhook-id-400",
    "TARGET-ID-01",
    "an unknown webhook id is answered 400",
)
FOREIGN_WEBHOOK_ID_ACCEPTED = Fault(
    "foreign-webhook-id-accepted",
    "TARGET-ID-02",
    "webhook.id may name another account's registered webhook",
)
INLINE_MODE_MISLABELLED = Fault(
    "inline-mode-mislabelled",
    "TARGET-BIND-05",
    'GET /v1/generations/{id} shows an inline binding with mode "callback"',
)

REGISTERED_WEBHOOK_IGNORED = Fault(
    "registered-webhook-ignored",
    "TARGET-BIND-01",
    "webhook.id binds no target",
)
WEBHOOK_URL_IGNORED = Fault(
    "webhook-url-ignored",
    "TARGET-BIND-02",
    "webhook.url binds no target",
)
CALLBACK_URL_IGNORED = Fault(
    "callback-url-ignored",
    "TARGET-ORDER-03",
    "a callback_url binds no target",
)
PRECEDENCE_CALLBACK_OVER_URL = Fault(
    "precedence-callback-over-url",
    "TARGET-ORDER-02",
    "callback_url wins over webhook.url (webhook.id still first)",
)
LOSING_CALLBACK_UNCHECKED = Fault(
    "losing-callback-unchecked",
    "TARGET-ORDER-05",
    "a callback_url that loses to webhook.id or webhook.url is not validated",
)
LISTED_EVENTS_DROPPED = Fault(
    "listed-events-dropped",
    "TARGET-BIND-04",
    "a binding that lists its events receives none of them",
)


#: Target selection (spec §4 rule 1): fault → the candidate it drops or demotes.
_ORDER_FAULTS: Final = MappingProxyType(
    {
        REGISTERED_WEBHOOK_IGNORED: "drop id",
        WEBHOOK_URL_IGNORED: "drop url",
        CALLBACK_URL_IGNORED: "drop callback",
        PRECEDENCE_CALLBACK_OVER_URL: "swap url callback",
    }
)


def _faulty_order(faults: Faults, kinds: tuple[str, ...]) -> tuple[str, ...]:
    """The resolution order (``id``, ``url``, ``callback``) with the order faults applied."""
    found = list(kinds)
    for fault, change in _ORDER_FAULTS.items():
        if not faults.on(fault):
            continue
        verb, *what = change.split()
        if verb == "drop" and what[0] in found:
            found.remove(what[0])
        elif verb == "swap" and set(what) <= set(found):
            i, j = found.index(what[0]), found.index(what[1])
            found[i], found[j] = found[j], found[i]
    return tuple(found)


BindingMode = Literal["inline", "registered", "callback"]


@dataclass(frozen=True)
class Binding:
    """Where and how a generation's events are delivered.

    ``address`` is the IP address validated at submit: automatic attempts connect to it
    (no second DNS lookup between check and use). ``key_id`` names the API key whose
    per-key secret signs inline and callback deliveries (spec §5.6); the secret itself is
    derived again when needed and is never stored with the binding.
    """

    mode: BindingMode
    url: str
    address: str
    events: tuple[str, ...]
    account_id: str
    key_id: str
    webhook_id: str | None = None
    #: Only under the fault LOSING_TARGET_NOTIFIED: the targets that lost (spec §4).
    losers: tuple[Binding, ...] = ()

    def view(self) -> dict[str, Any]:
        """What GET /v1/generations/{id} shows under ``webhook`` (never a secret)."""
        return {
            "mode": self.mode,
            "id": self.webhook_id,
            "url": mask_userinfo(self.url),
            "events": list(self.events),
        }


def parse_events(
    value: Any, *, where: str, choices: Choices | None = None
) -> tuple[str, ...] | None:
    """Validate an ``events`` field; ``None`` when absent (the caller picks defaults).

    With the choice ``unknown_event_names = "ignore"`` unknown names are dropped (a list
    of unknown names only is then taken as absent).
    """
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise ApiError(400, f"{where} must be a non-empty array of event names")
    if choices is not None and choices.unknown_event_names == "ignore":
        value = [item for item in value if item in ALL_EVENTS] or None
        if value is None:
            return None
    names: list[str] = []
    for item in value:
        if not isinstance(item, str) or item not in ALL_EVENTS:
            raise ApiError(
                400,
                f"{where} holds an unknown event name {item!r}; "
                f"known names: {', '.join(ALL_EVENTS)}",
            )
        if item not in names:
            names.append(item)
    return tuple(names)


def chosen_events(events: tuple[str, ...] | None, choices: Choices) -> tuple[str, ...] | None:
    """A binding's events under the choice ``events_list``: as listed, or added to the
    defaults (spec §6 "sent by default" read as always)."""
    if events is None or choices.events_list == "replaces-defaults":
        return events
    return tuple(dict.fromkeys((*DEFAULT_EVENTS, *events)))


async def validate_target(policy: CallbackPolicy, url: Any, *, where: str) -> ValidatedTarget:
    """Run the callback URL rules of spec §4 through netguard; 400 with its reason."""
    if not isinstance(url, str):
        raise ApiError(400, f"{where} must be a string URL")
    try:
        return await policy.validate(url)
    except CallbackRejected as rejected:
        raise ApiError(400, f"{where} is not an allowed callback target: {rejected}") from None


def registered_webhook_row(
    conn_or_rows: sqlite3.Connection, webhook_id: str, account_id: str
) -> sqlite3.Row | None:
    """A live registered webhook of this account, or None (unknown, foreign or deleted)."""
    row: sqlite3.Row | None = conn_or_rows.execute(
        "SELECT * FROM webhooks WHERE id = ? AND account_id = ? AND deleted_at IS NULL",
        (webhook_id, account_id),
    ).fetchone()
    return row


def events_from_row(row: sqlite3.Row | Mapping[str, Any]) -> tuple[str, ...]:
    events = json.loads(row["events"])
    return tuple(str(e) for e in events) if events else DEFAULT_EVENTS


def events_json(events: Sequence[str]) -> str:
    return json.dumps(list(events))


def policy_from_config(config: Config) -> CallbackPolicy:
    """The callback URL policy of spec §4 with the test-mode resolvers of the config."""
    resolver: Resolver = SystemResolver()
    if config.dns_server is not None:
        resolver = DnsServerResolver(*config.dns_server)
    if config.hosts_file is not None:
        resolver = HostsFileResolver(config.hosts_file, fallback=resolver)
    return CallbackPolicy(resolver, config.allow_cidrs)


class Targets:
    """Target selection at submit, URL validation, and the stored bindings (spec §4)."""

    def __init__(
        self, store: Store, faults: Faults, policy: CallbackPolicy, choices: Choices
    ) -> None:
        self.store = store
        self.faults = faults
        self.policy = policy
        self.choices = choices
        #: Only under the fault LOSING_TARGET_NOTIFIED: the targets that lost, per
        #: generation, from its submit until its event is queued.
        self.losers: dict[str, tuple[Binding, ...]] = {}

    async def select(self, body: Mapping[str, Any], key: KeyContext) -> Binding | None:
        """Apply the target selection rules; None when the body names no target.

        First match wins: webhook.id, then webhook.url, then callback_url (spec §4). Every
        target the body names is checked all the same (an unknown id is a 404, a URL that
        breaks the callback rules a 400, even when it loses the resolution order): a body
        that carries a private URL is refused rather than silently half-used.
        """
        webhook = body.get("webhook")
        callback_url = body.get("callback_url")
        if webhook is not None and not isinstance(webhook, dict):
            raise ApiError(400, "webhook must be an object with `id` or `url`, and `events`")
        webhook = webhook or {}
        choices = self.choices
        if webhook and webhook.get("id") is None and webhook.get("url") is None:
            if not self.faults.on(WEBHOOK_WITHOUT_TARGET_ACCEPTED):
                if choices.empty_binding == "refuse":
                    raise ApiError(400, "webhook needs an `id` (registered webhook) or a `url`")
        requested = webhook.get("events")
        if event_faults.active(self.faults):
            requested = event_faults.known_events_only(self.faults, requested, ALL_EVENTS)
        events = parse_events(requested, where="webhook.events", choices=choices)
        events = chosen_events(events, choices)
        if events is not None and self.faults.on(LISTED_EVENTS_DROPPED):
            # A placeholder name no event has: the listed set subscribes to none, and the
            # defaults do not apply either.
            events = ("(dropped)",)
        candidates: dict[str, Binding] = {}
        # The choice losing_targets = "ignored": only the first match is looked at.
        first_only = choices.losing_targets == "ignored"
        if webhook.get("id") is not None:
            candidates["id"] = await self._registered_binding(webhook["id"], events, key)
        if webhook.get("url") is not None and not (first_only and candidates):
            target = await self.validated(webhook["url"], where="webhook.url")
            candidates["url"] = _binding("inline", target, events, key)
        if first_only and candidates:
            callback_url = None
        skips_loser = self.faults.on(LOSING_CALLBACK_UNCHECKED) and bool(candidates)
        if callback_url is not None and not skips_loser:
            target = await self.validated(callback_url, where="callback_url")
            candidates["callback"] = _binding("callback", target, events, key)
        order: tuple[str, ...] = ("id", "url", "callback")
        if self.faults.on(PRECEDENCE_CALLBACK_FIRST):
            order = ("callback", "url", "id")
        if self.faults.any_on(_ORDER_FAULTS):
            order = _faulty_order(self.faults, order)
        for choice in order:
            if choice in candidates:
                if self.faults.on(LOSING_TARGET_NOTIFIED):
                    losers = tuple(b for c, b in candidates.items() if c != choice)
                    return dataclasses.replace(candidates[choice], losers=losers)
                return candidates[choice]
        return None

    async def validated(self, url: Any, *, where: str) -> ValidatedTarget:
        """A callback URL checked against the rules of spec §4 (400 when it breaks one)."""
        if self.faults.on(ACCEPTS_PRIVATE_CALLBACK) and isinstance(url, str):
            return await self.unchecked(url, where=where)
        if url_faults.active(self.faults):
            return await url_faults.validate(self.policy, self.faults, url, where=where)
        return await validate_target(self.policy, url, where=where)

    async def unchecked(self, url: str, *, where: str) -> ValidatedTarget:
        """For faults only: where a naive service would connect, with no address check.

        The host is resolved through the configured resolver and its first address used;
        the egress guard still keeps any connection on loopback.
        """
        try:
            parsed = httpx.URL(url)
            host = parsed.host
            try:
                address = str(ipaddress.ip_address(host))
            except ValueError:
                address = str((await self.policy.resolver.resolve(host))[0])
        except (httpx.InvalidURL, HostNotResolved, IndexError) as exc:
            raise ApiError(400, f"{where} cannot be reached: {exc}") from None
        return ValidatedTarget(
            url=url,
            host=host,
            port=parsed.port or (443 if parsed.scheme == "https" else 80),
            scheme=parsed.scheme,
            address=address,
        )

    async def _registered_binding(
        self, webhook_id: Any, events: tuple[str, ...] | None, key: KeyContext
    ) -> Binding:
        unknown = ApiError(
            400 if self.faults.on(UNKNOWN_WEBHOOK_ID_400) else 404,
            "webhook.id names no registered webhook of this account (unknown or deleted)",
        )
        if not isinstance(webhook_id, str):
            raise unknown
        rows = self.store.read(
            "SELECT * FROM webhooks WHERE id = ? AND account_id = ? AND deleted_at IS NULL",
            (webhook_id, key.account_id),
        )
        if not rows and self.faults.on(FOREIGN_WEBHOOK_ID_ACCEPTED):
            rows = self.store.read(
                "SELECT * FROM webhooks WHERE id = ? AND deleted_at IS NULL", (webhook_id,)
            )
        if not rows:
            raise unknown
        row = rows[0]
        # The registered URL passed validation at creation; resolve it again now so the
        # delivery connects to an address checked at submit (no stale pin).
        target = await self.validated(row["url"], where="the registered webhook's url")
        return _binding(
            "registered", target, events or events_from_row(row), key, webhook_id=webhook_id
        )

    def record(self, conn: sqlite3.Connection, generation_id: str, binding: Binding) -> None:
        """Store the binding in the submit transaction of the generation core."""
        if binding.losers:  # the fault LOSING_TARGET_NOTIFIED only
            self.losers[generation_id] = binding.losers
        conn.execute(
            "INSERT INTO webhook_bindings (generation_id, account_id, key_id, mode, webhook_id,"
            " url, address, events, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                generation_id,
                binding.account_id,
                binding.key_id,
                binding.mode,
                binding.webhook_id,
                binding.url,
                binding.address,
                events_json(binding.events),
                timestamp_now(),
            ),
        )

    def view(self, generation_id: str) -> dict[str, Any] | None:
        """What GET /v1/generations/{id} shows under ``webhook`` (mode, id, url, events)."""
        rows = self.store.read(
            "SELECT * FROM webhook_bindings WHERE generation_id = ?", (generation_id,)
        )
        view = binding_from_row(rows[0]).view() if rows else None
        if view is not None and self.faults.on(INLINE_MODE_MISLABELLED):
            view["mode"] = "callback" if view["mode"] == "inline" else view["mode"]
        return view


def _binding(
    mode: BindingMode,
    target: ValidatedTarget,
    events: tuple[str, ...] | None,
    key: KeyContext,
    webhook_id: str | None = None,
) -> Binding:
    return Binding(
        mode=mode,
        url=target.url,
        address=str(target.address),
        events=events or DEFAULT_EVENTS,
        account_id=key.account_id,
        key_id=key.key_id,
        webhook_id=webhook_id,
    )


def binding_from_row(row: sqlite3.Row) -> Binding:
    """A binding as ``webhook_bindings`` stores it."""
    return Binding(
        mode=row["mode"],
        url=row["url"],
        address=row["address"],
        events=tuple(json.loads(row["events"])),
        account_id=row["account_id"],
        key_id=row["key_id"],
        webhook_id=row["webhook_id"],
    )
