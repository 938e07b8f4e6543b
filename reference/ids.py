"""Identifiers the service issues, in the form the choice ``id_form`` picks.

The spec states one form only: the event (delivery) id is ``evt_<hex>`` (§2 Event
envelope). Generation, registered-webhook and API-key ids are strings of a form it does
not show, so the reference's ``gen_``/``wh_``/``key_`` plus hex and the variant's UUIDs
(``serve --variant``) are equally right, and the event id's hex part has no stated
length (32 digits, or 20).
"""

from __future__ import annotations

import secrets
import uuid
from typing import Final, Literal

__all__ = ["IdKind", "new_id"]

IdKind = Literal["generation", "webhook", "key", "event"]

#: (prefix, hex digits) of each kind in the reference's form.
_PREFIXED_HEX: Final[dict[str, tuple[str, int]]] = {
    "generation": ("gen_", 24),
    "webhook": ("wh_", 24),
    "key": ("key_", 16),
    "event": ("evt_", 32),
}
#: Prefixes of the UUID form (a generation id is a bare UUID).
_UUID_PREFIX: Final[dict[str, str]] = {"generation": "", "webhook": "hook_", "key": "ak_"}
#: Hex digits of an event id in the UUID form (still ``evt_<hex>``, spec §2).
_VARIANT_EVENT_DIGITS: Final = 20


def new_id(kind: IdKind, form: str = "prefixed-hex") -> str:
    """A fresh random id of ``kind`` in ``form`` (``prefixed-hex`` or ``uuid``)."""
    if form == "uuid":
        if kind == "event":
            return "evt_" + secrets.token_hex(_VARIANT_EVENT_DIGITS // 2)
        prefix = _UUID_PREFIX[kind]
        return prefix + (uuid.uuid4().hex if prefix else str(uuid.uuid4()))
    prefix, digits = _PREFIXED_HEX[kind]
    return prefix + secrets.token_hex(digits // 2)
