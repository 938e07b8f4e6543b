"""Per-request delivery targets: parsing, selection and validation (spec §2, §4).

Target selection rules (spec §4): first match wins, ``webhook.id`` then ``webhook.url``
then ``callback_url``. A bad or foreign webhook id is a 404; a target that fails the
callback URL rules is a 400; both happen before CORE spends credits, because CORE calls
``select_target`` before it charges.

``events`` of a binding: "Event names to subscribe to" (spec §2). An explicit list
REPLACES the defaults (generation.completed, generation.failed), so ``["generation.
cancelled"]`` subscribes to cancellation only. The list must be a non-empty array of
known event names (400 otherwise): a typo would otherwise silently subscribe to nothing.
A ``webhook`` object with ``events`` but neither ``id`` nor ``url`` applies its events to
``callback_url``; with no ``callback_url`` either it is a 400.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from reference.config import Choices
from reference.errors import ApiError
from reference.netguard import CallbackPolicy, CallbackRejected, ValidatedTarget

from .envelopes import ALL_EVENTS, DEFAULT_EVENTS

__all__ = ["Binding", "BindingMode", "parse_events", "validate_target"]

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
    #: Only under the fault ``losing-target-notified``: the targets that lost (spec §4).
    losers: tuple[Binding, ...] = ()

    def view(self) -> dict[str, Any]:
        """What GET /v1/generations/{id} shows under ``webhook`` (never a secret)."""
        return {
            "mode": self.mode,
            "id": self.webhook_id,
            "url": self.url,
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
