"""Webhook signatures (spec §6 "Signature").

The header is ``X-Service-Signature: t=<unix>,v1=<hex>`` where the digest is
HMAC-SHA256 over ``f"{t}."`` followed by the exact raw request body. The spec says
"HMAC-SHA256 with the webhook secret" and nothing about decoding it, so both readings are
open (the choice ``hmac_keying``): the reference keys the HMAC with the literal secret
string's UTF-8 bytes (a registered webhook's ``whsec_…`` secret with its prefix, or the
per-key secret of spec §5.6), as Stripe does; the variant base64-decodes the part after
``whsec_``, as Standard Webhooks libraries do. The digest is hex, lowercase by default
(the choice ``signature_hex_case``: any case is hex).
"""

from __future__ import annotations

import base64
import hashlib
import hmac

__all__ = [
    "SIGNATURE_HEADER",
    "WHSEC_PREFIX",
    "hmac_key",
    "parse_signature_header",
    "signature_digest",
    "signature_header",
]

#: Name of the signature header (spec §6, brand word replaced by "Service").
SIGNATURE_HEADER = "X-Service-Signature"
#: The prefix of registered webhooks' secrets (spec §2).
WHSEC_PREFIX = "whsec_"


def hmac_key(secret: str, keying: str = "utf8") -> bytes:
    """The HMAC key of ``secret``: its UTF-8 bytes, or for ``keying="base64-after-prefix"`` the
    base64 after ``whsec_`` decoded."""
    if keying == "base64-after-prefix":
        return base64.b64decode(secret.removeprefix(WHSEC_PREFIX), validate=True)
    return secret.encode("utf-8")


def signature_digest(secret: str, timestamp: int, body: bytes, keying: str = "utf8") -> str:
    """Hex HMAC-SHA256 of ``"<timestamp>." + body`` keyed with :func:`hmac_key`.

    ``body`` must be the bytes that go on the wire: signing a re-serialized copy of the
    JSON would produce a digest no receiver can verify (spec §6 Signature, item 1).
    """
    message = f"{timestamp}.".encode("ascii") + body
    return hmac.new(hmac_key(secret, keying), message, hashlib.sha256).hexdigest()


def signature_header(
    secret: str, timestamp: int, body: bytes, *, keying: str = "utf8", upper: bool = False
) -> str:
    """The header value ``t=<timestamp>,v1=<hex digest>`` (``upper``: upper-case hex)."""
    digest = signature_digest(secret, timestamp, body, keying)
    return f"t={timestamp},v1={digest.upper() if upper else digest}"


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
