"""Webhook signature verification (spec §6 "Signature"), the suite's one implementation.

A delivery carries ``X-<brand>-Signature: t=<unix_timestamp>,v1=<hex_digest>`` (the spec
writes the brand word as "Service"; the profile's ``[wire] header_brand`` names the
deployment's). The signed string is the timestamp, a dot, then the exact raw request body
(§6 Signature 1); the digest is HMAC-SHA256 with the webhook secret, hex-encoded (§6
Signature 2). The suite verifies on the raw bytes as received, before any JSON parsing,
and compares in constant time (§6 Signature 3), as it asks every receiver to.

"HMAC-SHA256 with the webhook secret" leaves one choice open: how the secret string
becomes the HMAC key. The profile declares it (``[wire] secret_keying``, see
:func:`hmac_key`): ``utf8``, the whole string's UTF-8 bytes with its prefix (the literal
reading, Stripe's way, the default), or ``base64-after-prefix``, the text after the
secret's prefix base64-decoded (the Standard Webhooks way). **The declared keying alone
decides.** When a signature does not verify with it, :func:`verify_signature` tries the
other keying, then the mistakes an implementation plausibly made (the secret without its
prefix, a re-serialized JSON body, the body without the timestamp, another key's secret)
**only to name the cause** in the failure message. An alternative never makes a
signature pass.

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
from typing import TYPE_CHECKING, Final

from conformance.secrets import Secret
from conformance.target.wire import SECRET_KEYINGS, SecretKeying, WireProfile

if TYPE_CHECKING:
    from conformance.observe.receiver import Delivery

__all__ = [
    "KEYING_WORDS",
    "ParsedSignature",
    "Resigning",
    "SignatureFormatError",
    "Verification",
    "hmac_key",
    "keying_diagnosis",
    "parse_signature_header",
    "resigning",
    "signature_digest",
    "verify_delivery",
    "verify_signature",
]

#: The deployment a caller names no other of: the spec's neutral header names, utf8 keying.
SPEC_WIRE: Final = WireProfile()

#: Each keying as a failure message names it.
KEYING_WORDS: Final[dict[SecretKeying, str]] = {
    "utf8": "the secret string's UTF-8 bytes (its prefix included)",
    "base64-after-prefix": (
        "the base64-decoded secret (the text after its prefix, as Standard Webhooks does)"
    ),
}

#: A secret's prefix: a short word and an underscore (``whsec_``, a per-key ``k3y_``).
_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9]*_")

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


@dataclass(frozen=True)
class Resigning:
    """How a later attempt's signature t moved on from an earlier one's: by about the time
    between their arrivals when each attempt is signed afresh (SIG-TS-02, SIG-TS-03)."""

    #: Seconds between the two arrivals (the receiver's clock).
    gap: float
    #: How far t moved (the sender's clock: whole seconds).
    moved: int
    #: How far *moved* may be from *gap*: one second of t's rounding, plus the tolerance.
    slack: float

    @property
    def afresh(self) -> bool:
        return abs(self.moved - self.gap) <= self.slack


def resigning(
    earlier: tuple[float, ParsedSignature],
    later: tuple[float, ParsedSignature],
    tolerance_s: float,
) -> Resigning:
    """:class:`Resigning` of two attempts, each given as (arrival time, its signature)."""
    return Resigning(
        gap=later[0] - earlier[0],
        moved=later[1].timestamp - earlier[1].timestamp,
        slack=1 + tolerance_s,
    )


def parse_signature_header(value: str | None, wire: WireProfile = SPEC_WIRE) -> ParsedSignature:
    """Parse ``t=<unix_timestamp>,v1=<hex_digest>`` strictly (spec §6 Delivery request).

    Exactly two elements, t then v1, no whitespace, t in decimal digits, v1 64 hex digits
    (either case: lowercase is judged apart, SIG-HEX-01). Anything else raises
    :class:`SignatureFormatError` saying what differs (*wire* names the header).
    """
    if value is None:
        raise SignatureFormatError(f"the delivery has no {wire.header('Signature')} header")
    problem = _format_problem(value)
    if problem is not None:
        raise SignatureFormatError(problem)
    t_part, v1_part = value.split(",")
    return ParsedSignature(t_part.removeprefix("t="), v1_part.removeprefix("v1="))


def _reveal(secret: Secret | str) -> str:
    return secret.reveal() if isinstance(secret, Secret) else secret


def _hmac(key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hashlib.sha256).digest()


def _base64_decoded(text: str) -> bytes | None:
    """*text* base64-decoded, in the standard or the URL-safe alphabet (padding restored);
    None when it is not strictly base64 in either. Where both decode, they agree."""
    padded = text + "=" * (-len(text) % 4)
    for altchars in (None, b"-_"):
        try:
            decoded = base64.b64decode(padded, altchars=altchars, validate=True)
        except (binascii.Error, ValueError):
            continue
        if decoded:
            return decoded
    return None


def hmac_key(secret: Secret | str, keying: SecretKeying) -> bytes | None:
    """The HMAC key that *secret* gives under *keying* (spec §6 Signature 2).

    ``utf8``: the whole secret string's UTF-8 bytes, prefix included. ``base64-after-
    prefix``: the text after the secret's prefix (a word and an underscore, such as
    ``whsec_``; the whole text when there is none), base64-decoded in either alphabet:
    what the Standard Webhooks libraries do with ``whsec_`` secrets. None when the secret
    cannot be keyed so (that text is not base64).
    """
    value = _reveal(secret)
    if keying == "utf8":
        return value.encode("utf-8")
    prefix = _PREFIX.match(value)
    return _base64_decoded(value[prefix.end() :] if prefix else value)


def signature_digest(
    secret: Secret | str, timestamp: str | int, raw_body: bytes, keying: SecretKeying = "utf8"
) -> str:
    """The hex HMAC-SHA256 of ``"<timestamp>." + raw_body`` keyed with the secret under
    *keying* (spec §6 Signature 1 and 2); ValueError when the secret cannot be so keyed."""
    key = hmac_key(secret, keying)
    if key is None:
        raise ValueError(f"the secret cannot be keyed as {keying}: it is not base64")
    message = f"{timestamp}.".encode("ascii") + raw_body
    return _hmac(key, message).hex()


def keying_diagnosis(found: SecretKeying, declared: SecretKeying) -> str:
    """The sentence naming a signature made with the keying the profile does not declare."""
    return (
        f"signed with {KEYING_WORDS[found]}; the profile declares {declared}: set [wire] "
        f'secret_keying = "{found}" if that is the deployment\'s choice'
    )


@dataclass(frozen=True)
class Verification:
    """The outcome of verifying one delivery's signature.

    ``ok`` only for the declared keying (``declared``) over the exact raw bytes.
    Otherwise ``problem`` says why (a format problem, or a mismatch); ``keying_found``
    is the other keying when it reproduces the digest, and ``explanation`` names any
    other alternative that does.
    """

    ok: bool
    parsed: ParsedSignature | None = None
    problem: str | None = None
    explanation: str | None = None
    declared: SecretKeying = "utf8"
    keying_found: SecretKeying | None = None

    @property
    def message(self) -> str:
        """One sentence for an assertion message (never a secret's value)."""
        if self.ok:
            return "the signature verifies"
        text = self.problem or "the signature does not verify"
        if self.keying_found is not None:
            text += f"; {keying_diagnosis(self.keying_found, self.declared)}"
        elif self.explanation:
            text += f"; it matches {self.explanation}"
        return text


# -- diagnosis: alternatives, only to explain a mismatch ---------------------------------


def _keys(label: str, secret: str, declared: SecretKeying) -> Iterator[tuple[str, bytes]]:
    """Keys an implementation may have derived from *secret*: under each keying (the
    declared one unlabelled), and the secret without its prefix as a string."""
    for keying in (declared, *(k for k in SECRET_KEYINGS if k != declared)):
        key = hmac_key(secret, keying)
        if key is not None:
            yield (label if keying == declared else f"{label} as {KEYING_WORDS[keying]}"), key
    prefix = _PREFIX.match(secret)
    if prefix:
        yield f"{label} without its {prefix.group()} prefix", secret[prefix.end() :].encode()


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
    declared: SecretKeying,
    others: Mapping[str, Secret | str],
) -> str | None:
    """The name of the keying and body that reproduce the digest, or None."""
    keys = list(_keys(label, secret, declared))
    for other_label, other in others.items():
        value = _reveal(other)
        if value != secret:
            keys += list(_keys(other_label, value, declared))
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
    wire: WireProfile = SPEC_WIRE,
    label: str = "the webhook secret",
    others: Mapping[str, Secret | str] | None = None,
) -> Verification:
    """Verify one delivery: *header* (the signature header's value) over *raw_body*.

    The digest must equal HMAC-SHA256 of ``"<t>." + raw_body`` keyed with *secret* under
    the keying *wire* declares, compared in constant time. On a mismatch the other keying
    is tried (:attr:`Verification.keying_found`), then the alternatives of the module
    docstring (*others* maps labels to other secrets, e.g. another key's) to fill
    :attr:`Verification.explanation`; they never make ``ok`` true. *label* labels the
    secret in messages; *wire* also names the header.
    """
    declared = wire.secret_keying
    try:
        parsed = parse_signature_header(header, wire)
    except SignatureFormatError as error:
        problem = f"malformed {wire.header('Signature')}: {error}"
        return Verification(ok=False, problem=problem, declared=declared)
    value = _reveal(secret)
    message = f"{parsed.timestamp_text}.".encode("ascii") + raw_body
    key = hmac_key(value, declared)
    if key is not None and hmac.compare_digest(_hmac(key, message), parsed.digest):
        return Verification(ok=True, parsed=parsed, declared=declared)
    if key is None:
        problem = (
            f"{label} cannot key the HMAC as the profile declares ({declared}): the text "
            "after its prefix is not base64"
        )
    else:
        problem = (
            f"the signature does not verify with {label} keyed as declared ({declared}) "
            f"over '<t>.' + the raw body ({len(raw_body)} bytes)"
        )
    for keying in (k for k in SECRET_KEYINGS if k != declared):
        other_key = hmac_key(value, keying)
        if other_key is not None and hmac.compare_digest(_hmac(other_key, message), parsed.digest):
            return Verification(
                ok=False, parsed=parsed, problem=problem, declared=declared, keying_found=keying
            )
    return Verification(
        ok=False,
        parsed=parsed,
        problem=problem,
        explanation=_explain(parsed, raw_body, label, value, declared, others or {}),
        declared=declared,
    )


def verify_delivery(
    delivery: Delivery,
    secret: Secret | str,
    *,
    label: str = "the webhook secret",
    others: Mapping[str, Secret | str] | None = None,
) -> Verification:
    """Verify *delivery*'s signature header under the wire conventions it arrived with
    (the profile's, through the receiver): its header name and its declared keying."""
    wire = delivery.wire
    return verify_signature(
        delivery.headers.get(wire.header("Signature")),
        delivery.raw_body,
        secret,
        wire=wire,
        label=label,
        others=others,
    )
