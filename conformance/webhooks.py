"""Verify Generation API webhook deliveries in your own receiver.

The suite's signature verification (:mod:`conformance.observe.signatures`) as a small
public helper, for receivers and for ``genapi-conformance verify-signature``::

    from conformance.webhooks import DeliveryDeduper, verify_webhook

    seen = DeliveryDeduper()

    def handle(headers, raw_body):           # the raw bytes, before any JSON parsing
        result = verify_webhook(raw_body, headers, secret, seen=seen)
        if not result.valid:
            return 400                       # result.reason says why, never the secret
        if result.duplicate:
            return 200                       # at-least-once: already handled, acknowledge
        ...

A delivery is valid when its ``X-Service-Signature`` (``t=<unix_timestamp>,v1=<hex>``) is
the HMAC-SHA256, keyed with the webhook secret, of the timestamp, a dot and the exact raw
body, compared in constant time (spec §6 Signature 1-3). When it is not, the reason names
the likely cause where one reproduces the digest: the other secret keying, the secret
without its prefix, a re-serialised JSON body, a body signed without the timestamp, or
(with ``others``) another secret. A missing header is named (and another brand's
signature header, when one came), a stale or future t by how far it is beyond the
tolerance; a t that looks like milliseconds is a warning (``result.warnings``) even in a
valid delivery.

The spec leaves the timestamp tolerance window open (§6 Signature 4): *tolerance_s* is
the receiver's own policy against replays (default 300 s, the common choice); pass None
to skip it, as when re-checking a saved delivery. Deliveries are at-least-once and
receivers dedupe on the delivery id (§6 Behaviour): *seen* does that;
:func:`delivery_id_of` reads the id from the headers (under the deployment's brand word).
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from conformance.observe.signatures import verify_signature
from conformance.secrets import Secret
from conformance.target.wire import SecretKeying, WireProfile

__all__ = [
    "DEFAULT_TOLERANCE_S",
    "DeliveryDeduper",
    "WebhookCheck",
    "delivery_id_of",
    "verify_webhook",
]

#: The receiver's default replay window: the spec states none, 5 minutes is common.
DEFAULT_TOLERANCE_S = 300.0
#: A t above this is not a plausible unix time in seconds (year 5138) but is one in ms.
_MILLISECONDS_FROM = 10**11


@dataclass(frozen=True)
class WebhookCheck:
    """What :func:`verify_webhook` found.

    ``valid``: the signature verifies and the timestamp is within the tolerance.
    ``reason``: why not (None when valid): the header missing, its format, the timestamp
    outside the tolerance and by how much, or the mismatch with its likely cause.
    ``warnings``: what is suspect even in a valid delivery (a t in milliseconds).
    ``duplicate``: the delivery id was seen before by the :class:`DeliveryDeduper`
    passed (a valid duplicate is still valid).
    """

    valid: bool
    reason: str | None = None
    timestamp: int | None = None
    age_s: float | None = None
    delivery_id: str | None = None
    duplicate: bool = False
    warnings: tuple[str, ...] = ()


def _header(headers: Mapping[str, str], name: str) -> str | None:
    wanted = name.lower()
    return next((value for key, value in headers.items() if key.lower() == wanted), None)


def delivery_id_of(headers: Mapping[str, str], *, brand: str = "Service") -> str | None:
    """The delivery id of ``X-<brand>-Delivery`` in *headers* (names in any case), or None
    when it is absent or blank."""
    value = _header(headers, WireProfile(header_brand=brand).header("Delivery"))
    return (value.strip() or None) if value is not None else None


class DeliveryDeduper:
    """Delivery ids seen so far, the oldest forgotten past *capacity* (bounded memory)."""

    def __init__(self, capacity: int = 10_000) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self._capacity = capacity
        self._seen: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, delivery_id: object) -> bool:
        """Whether *delivery_id* was noted (without noting it)."""
        return delivery_id in self._seen

    def seen_before(self, delivery_id: str) -> bool:
        """Whether *delivery_id* was seen; notes it either way."""
        if delivery_id in self._seen:
            self._seen.move_to_end(delivery_id)
            return True
        self._seen[delivery_id] = None
        if len(self._seen) > self._capacity:
            self._seen.popitem(last=False)
        return False

    def seen_delivery(self, headers: Mapping[str, str], *, brand: str = "Service") -> bool:
        """Whether the delivery with *headers* was seen (by :func:`delivery_id_of`); notes
        it. A delivery without an id is never taken for a duplicate."""
        delivery_id = delivery_id_of(headers, brand=brand)
        return delivery_id is not None and self.seen_before(delivery_id)


def _delivery_id(headers: Mapping[str, str], brand: str, raw_body: bytes) -> str | None:
    """The delivery id: its header, else the body's ``id`` (spec §6: the same value)."""
    found = delivery_id_of(headers, brand=brand)
    if found:
        return found
    try:
        body = json.loads(raw_body)
    except ValueError:
        return None
    value = body.get("id") if isinstance(body, dict) else None
    return value if isinstance(value, str) else None


def _missing_header(headers: Mapping[str, str], wire: WireProfile) -> str:
    """Why the signature header is missing: another brand's, when one was sent."""
    wanted = wire.header("Signature")
    reason = f"missing header: the delivery has no {wanted} header"
    for name in headers:
        lowered = name.lower()
        if lowered.startswith("x-") and lowered.endswith("-signature") and len(name) > 12:
            brand = name[2:-10]
            return f"{reason}; it has {name}: pass brand={brand!r} (the deployment's header brand)"
    return reason


def _outside_tolerance(age: float, tolerance_s: float) -> str:
    beyond = abs(age) - tolerance_s
    if age > 0:
        return (
            f"stale timestamp: t is {age:.0f} s old, {beyond:.0f} s beyond the "
            f"{tolerance_s:g} s tolerance (a replay, or a delivery checked late)"
        )
    return (
        f"timestamp in the future: t is {-age:.0f} s ahead, {beyond:.0f} s beyond the "
        f"{tolerance_s:g} s tolerance (the sender's or this clock is off)"
    )


def verify_webhook(
    raw_body: bytes,
    headers: Mapping[str, str],
    secret: Secret | str,
    *,
    brand: str = "Service",
    keying: SecretKeying = "utf8",
    tolerance_s: float | None = DEFAULT_TOLERANCE_S,
    now: float | None = None,
    seen: DeliveryDeduper | None = None,
    others: Mapping[str, Secret | str] | None = None,
) -> WebhookCheck:
    """Verify one delivery from its *raw_body* and *headers* (names in any case).

    *brand*: the word in the deployment's header names (``X-<brand>-Signature``).
    *keying*: how the secret becomes the HMAC key, ``utf8`` (the whole string, the
    literal reading) or ``base64-after-prefix`` (Standard Webhooks). *now*: the unix time
    to judge the timestamp against (default: the clock). *seen*: dedupe on the delivery
    id; only a valid delivery is noted, so a forged copy cannot shadow the real one.
    *others*: other secrets by label, only to name the cause of a mismatch.
    """
    wire = WireProfile(header_brand=brand, secret_keying=keying)
    delivery_id = _delivery_id(headers, brand, raw_body)
    header = _header(headers, wire.header("Signature"))
    if header is None:
        return WebhookCheck(False, _missing_header(headers, wire), delivery_id=delivery_id)
    verification = verify_signature(header, raw_body, secret, wire=wire, others=others)
    parsed = verification.parsed
    timestamp = None if parsed is None else parsed.timestamp
    warnings: tuple[str, ...] = ()
    if timestamp is not None and timestamp >= _MILLISECONDS_FROM:
        warnings = (f"t={timestamp} looks like milliseconds; the spec's t is unix seconds",)
    # Judged as the spec's unix seconds, as any receiver would: a t in milliseconds lands
    # far in the future, and the warning says why.
    age = None if timestamp is None else (time.time() if now is None else now) - timestamp
    reason: str | None = None
    if not verification.ok:
        reason = verification.message
    elif tolerance_s is not None and age is not None and abs(age) > tolerance_s:
        reason = _outside_tolerance(age, tolerance_s)
    if reason is not None:
        reason = "; ".join((reason, *warnings))
        return WebhookCheck(False, reason, timestamp, age, delivery_id, warnings=warnings)
    duplicate = seen is not None and delivery_id is not None and seen.seen_before(delivery_id)
    return WebhookCheck(True, None, timestamp, age, delivery_id, duplicate, warnings)
