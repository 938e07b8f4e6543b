"""Webhook signatures (spec §6 "Signature").

The header is ``X-Service-Signature: t=<unix>,v1=<hex>`` where the digest is
HMAC-SHA256 over ``f"{t}."`` followed by the exact raw request body. The key is the
literal secret string's UTF-8 bytes: a registered webhook's ``whsec_…`` secret with its
prefix, or the per-key secret of the API key that made the request (spec §5.6). The
spec says "HMAC-SHA256 with the webhook secret" and nothing about decoding it, so the
reference takes the literal reading (as Stripe does) rather than base64-decoding the
part after ``whsec_`` (as Standard Webhooks libraries do).
"""

from __future__ import annotations

import hashlib
import hmac

__all__ = ["SIGNATURE_HEADER", "parse_signature_header", "signature_digest", "signature_header"]

#: Name of the signature header (spec §6, brand word replaced by "Service").
SIGNATURE_HEADER = "X-Service-Signature"


def signature_digest(secret: str, timestamp: int, body: bytes) -> str:
    """Hex HMAC-SHA256 of ``"<timestamp>." + body`` keyed with the secret's UTF-8 bytes.

    ``body`` must be the bytes that go on the wire: signing a re-serialized copy of the
    JSON would produce a digest no receiver can verify (spec §6 Signature, item 1).
    """
    message = f"{timestamp}.".encode("ascii") + body
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def signature_header(secret: str, timestamp: int, body: bytes) -> str:
    """The header value ``t=<timestamp>,v1=<hex digest>``."""
    return f"t={timestamp},v1={signature_digest(secret, timestamp, body)}"


def parse_signature_header(value: str) -> tuple[int, list[str]]:
    """Split a signature header into its timestamp and its ``v1`` digests.

    Used by the reference's own tests and by anyone verifying a delivery; raises
    ``ValueError`` when the header has no integer ``t`` or no ``v1``.
    """
    timestamp: int | None = None
    digests: list[str] = []
    for part in value.split(","):
        name, sep, item = part.strip().partition("=")
        if not sep:
            raise ValueError(f"signature header part without '=': {part!r}")
        if name == "t":
            timestamp = int(item)
        elif name == "v1":
            digests.append(item)
    if timestamp is None or not digests:
        raise ValueError("signature header needs t=<unix> and v1=<hex>")
    return timestamp, digests
