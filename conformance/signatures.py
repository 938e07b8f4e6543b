"""Webhook signature verification (spec §6 "Signature"), the suite's one implementation.

A delivery carries ``X-Service-Signature: t=<unix_timestamp>,v1=<hex_digest>``. The
signed string is the timestamp, a dot, then the exact raw request body (§6 Signature 1);
the digest is HMAC-SHA256 with the webhook secret, hex-encoded (§6 Signature 2). The
suite verifies on the raw bytes as received, before any JSON parsing, and compares in
constant time (§6 Signature 3), as it asks every receiver to.

The key is the secret string's UTF-8 bytes *as shown*, ``whsec_`` prefix included: the
literal reading of "HMAC-SHA256 with the webhook secret" (catalog SIG-HMAC-03). When a
signature does not verify, :func:`verify_signature` tries the alternatives an
implementation plausibly used instead (the Standard Webhooks keying, which strips
``whsec_`` and base64-decodes the rest; the secret without its prefix; a re-serialized
JSON body; the body without the timestamp; another key's secret) **only to name the
cause** in the failure message. An alternative never makes a signature pass.

Nothing here ever puts a secret's value into a message: secrets are named by label.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from .secrets import Secret

__all__ = [
    "SIGNATURE_HEADER",
    "ParsedSignature",
    "SignatureFormatError",
    "Verification",
    "parse_signature_header",
    "signature_digest",
    "verify_signature",
]

#: The header that carries the signature (spec §6, brand word replaced by "Service").
SIGNATURE_HEADER: Final = "X-Service-Signature"

#: An HMAC-SHA256 digest is 32 bytes: 64 hex digits.
DIGEST_HEX_DIGITS: Final = 64

_DIGITS = re.compile(r"[0-9]+")
_HEX = re.compile(r"[0-9a-fA-F]+")
_BASE64ISH = re.compile(r"[A-Za-z0-9+/]+=*")


class SignatureFormatError(ValueError):
    """The header is not of the form ``t=<unix_timestamp>,v1=<hex_digest>``; the message
    says precisely what differs."""


@dataclass(frozen=True)
class ParsedSignature:
    """A well-formed signature header.

    ``timestamp_text`` is the t value exactly as sent: the signed string uses it as is.
    """

    timestamp_text: str
    digest_hex: str

    @property
    def timestamp(self) -> int:
        return int(self.timestamp_text)

    @property
    def digest(self) -> bytes:
        return bytes.fromhex(self.digest_hex)

    @property
    def lowercase(self) -> bool:
        """Whether the hex digest is lowercase (catalog SIG-HEX-01, an interpretation)."""
        return self.digest_hex == self.digest_hex.lower()


def _format_problem(value: str) -> str | None:
    """What makes *value* differ from ``t=<digits>,v1=<64 hex digits>``, or None."""
    form = "the spec's form is t=<unix_timestamp>,v1=<hex_digest> (§6)"
    if not value:
        return f"the header is empty; {form}"
    if not value.isascii():
        return f"the header holds non-ASCII characters; {form}"
    if any(c.isspace() for c in value):
        return f"the header holds whitespace; {form}, without spaces"
    parts = value.split(",")
    names = [part.partition("=")[0] for part in parts]
    if len(parts) != 2:
        extra = ""
        if names.count("v1") > 1:
            extra = " (several v1 signatures, as in Stripe's key rotation, are not in the form)"
        return f"the header has {len(parts)} comma-separated elements {names}, expected 2{extra}"
    if names == ["v1", "t"]:
        return f"the elements come in the order v1, t; {form}"
    for part, name in zip(parts, ("t", "v1"), strict=True):
        key, sep, _ = part.partition("=")
        if not sep or key != name:
            return f"expected an element {name}=..., saw {part[:24]!r}; {form}"
    timestamp = parts[0].removeprefix("t=")
    if not _DIGITS.fullmatch(timestamp):
        return f"t is {timestamp[:24]!r}, expected a unix timestamp in decimal digits"
    digest = parts[1].removeprefix("v1=")
    if not _HEX.fullmatch(digest):
        hint = ""
        if _BASE64ISH.fullmatch(digest):
            hint = " (it looks base64-encoded, as Standard Webhooks encodes; the spec says hex)"
        return f"v1 is not hexadecimal{hint}"
    if len(digest) != DIGEST_HEX_DIGITS:
        return f"v1 has {len(digest)} hex digits; an HMAC-SHA256 digest has {DIGEST_HEX_DIGITS}"
    return None


def parse_signature_header(value: str | None) -> ParsedSignature:
    """Parse ``t=<unix_timestamp>,v1=<hex_digest>`` strictly (spec §6 Delivery request).

    Exactly two elements, t then v1, no whitespace, t in decimal digits, v1 64 hex digits
    (either case: lowercase is judged apart, SIG-HEX-01). Anything else raises
    :class:`SignatureFormatError` saying what differs.
    """
    if value is None:
        raise SignatureFormatError(f"the delivery has no {SIGNATURE_HEADER} header")
    problem = _format_problem(value)
    if problem is not None:
        raise SignatureFormatError(problem)
    t_part, v1_part = value.split(",")
    return ParsedSignature(t_part.removeprefix("t="), v1_part.removeprefix("v1="))


def _reveal(secret: Secret | str) -> str:
    return secret.reveal() if isinstance(secret, Secret) else secret


def _hmac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def signature_digest(secret: Secret | str, timestamp: str | int, raw_body: bytes) -> str:
    """The hex HMAC-SHA256 of ``"<timestamp>." + raw_body`` keyed with the secret's UTF-8
    bytes as shown (spec §6 Signature 1 and 2, the literal keying)."""
    message = f"{timestamp}.".encode("ascii") + raw_body
    return _hmac(_reveal(secret).encode("utf-8"), message).hex()


@dataclass(frozen=True)
class Verification:
    """The outcome of verifying one delivery's signature.

    ``ok`` only for the literal keying over the exact raw bytes. Otherwise ``problem``
    says why (a format problem, or a mismatch) and ``explanation`` names the
    alternative that reproduces the digest, when one does.
    """

    ok: bool
    parsed: ParsedSignature | None = None
    problem: str | None = None
    explanation: str | None = None

    @property
    def message(self) -> str:
        """One sentence for an assertion message (never a secret's value)."""
        if self.ok:
            return "the signature verifies"
        text = self.problem or "the signature does not verify"
        if self.explanation:
            text += f"; it matches {self.explanation}"
        return text


# -- diagnosis: alternative keyings, only to explain a mismatch --------------------------


def _base64_decodings(text: str) -> Iterator[bytes]:
    """*text* base64-decoded in the standard and the URL-safe alphabet (padding restored),
    where it decodes strictly."""
    padded = text + "=" * (-len(text) % 4)
    seen: set[bytes] = set()
    for altchars in (None, b"-_"):
        try:
            decoded = base64.b64decode(padded, altchars=altchars, validate=True)
        except (binascii.Error, ValueError):
            continue
        if decoded and decoded not in seen:
            seen.add(decoded)
            yield decoded


def _key_variants(name: str, secret: str) -> Iterator[tuple[str, bytes]]:
    """Keys an implementation may have derived from *secret* instead of its UTF-8 bytes."""
    standard = "the Standard Webhooks keying; the spec's key is the secret string as shown"
    if secret.startswith("whsec_"):
        rest = secret.removeprefix("whsec_")
        for decoded in _base64_decodings(rest):
            yield f"{name} base64-decoded after stripping whsec_ ({standard})", decoded
        yield f"{name} without its whsec_ prefix", rest.encode("utf-8")
    else:
        for decoded in _base64_decodings(secret):
            yield f"{name} base64-decoded ({standard})", decoded


def _reserialized(raw_body: bytes) -> Iterator[tuple[str, bytes]]:
    """Re-serializations of the JSON body that a signer may have signed instead."""
    try:
        parsed = json.loads(raw_body)
    except ValueError:
        return
    forms: list[tuple[str, Callable[[object], str]]] = [
        ("json.dumps defaults", lambda v: json.dumps(v)),
        ("compact separators", lambda v: json.dumps(v, separators=(",", ":"))),
        ("sorted keys", lambda v: json.dumps(v, sort_keys=True)),
        (
            "compact separators, sorted keys",
            lambda v: json.dumps(v, sort_keys=True, separators=(",", ":")),
        ),
        ("non-ASCII unescaped", lambda v: json.dumps(v, ensure_ascii=False)),
        (
            "compact, non-ASCII unescaped",
            lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ":")),
        ),
        ("indented", lambda v: json.dumps(v, indent=2)),
    ]
    seen = {raw_body}
    for label, dump in forms:
        body = dump(parsed).encode("utf-8")
        if body not in seen:
            seen.add(body)
            yield f"a re-serialized JSON body ({label}), not the raw bytes sent", body
    for label, body in (
        ("the body with a trailing newline", raw_body + b"\n"),
        ("the body without its trailing newline", raw_body.rstrip(b"\r\n")),
    ):
        if body not in seen:
            seen.add(body)
            yield label, body


def _explain(
    parsed: ParsedSignature,
    raw_body: bytes,
    label: str,
    secret: str,
    others: Mapping[str, Secret | str],
) -> str | None:
    """The name of the keying that reproduces the digest, or None."""
    literal = secret.encode("utf-8")
    keys: list[tuple[str, bytes]] = [(label, literal)]
    keys += list(_key_variants(label, secret))
    for other_label, other in others.items():
        value = _reveal(other)
        if value == secret:
            continue
        keys.append((other_label, value.encode("utf-8")))
        keys += list(_key_variants(other_label, value))
    prefix = f"{parsed.timestamp_text}.".encode("ascii")
    bodies: list[tuple[str | None, bytes]] = [(None, prefix + raw_body)]
    bodies += [(body_label, prefix + body) for body_label, body in _reserialized(raw_body)]
    bodies.append(("the body alone, without the timestamp and dot", raw_body))
    bodies.append(
        (
            "the t value and the body without the dot",
            parsed.timestamp_text.encode("ascii") + raw_body,
        )
    )
    wanted = parsed.digest
    for key_label, key in keys:
        for body_label, message in bodies:
            if key is literal and body_label is None:
                continue  # the literal keying: already known not to match
            if hmac.compare_digest(_hmac(key, message), wanted):
                if body_label is None:
                    return f"a signature with {key_label}"
                return f"a signature with {key_label} over {body_label}"
    return None


def verify_signature(
    header: str | None,
    raw_body: bytes,
    secret: Secret | str,
    *,
    label: str = "the webhook secret",
    others: Mapping[str, Secret | str] | None = None,
) -> Verification:
    """Verify one delivery: *header* (the X-Service-Signature value) over *raw_body*.

    The digest must equal HMAC-SHA256 of ``"<t>." + raw_body`` keyed with *secret*'s
    UTF-8 bytes, compared in constant time. On a mismatch the alternatives (see the
    module docstring; *others* maps labels to other secrets, e.g. another key's) are
    tried to fill :attr:`Verification.explanation`; they never make ``ok`` true.
    *label* labels the secret in messages.
    """
    try:
        parsed = parse_signature_header(header)
    except SignatureFormatError as error:
        return Verification(ok=False, problem=f"malformed {SIGNATURE_HEADER}: {error}")
    value = _reveal(secret)
    message = f"{parsed.timestamp_text}.".encode("ascii") + raw_body
    expected = _hmac(value.encode("utf-8"), message)
    if hmac.compare_digest(expected, parsed.digest):
        return Verification(ok=True, parsed=parsed)
    return Verification(
        ok=False,
        parsed=parsed,
        problem=(
            f"the signature does not verify with {label} over "
            f"'<t>.' + the raw body ({len(raw_body)} bytes)"
        ),
        explanation=_explain(parsed, raw_body, label, value, others or {}),
    )
