"""The callback-URL policy: spec §4 "Callback URL requirements", plus hardening.

The spec's rules: scheme http or https; the host must resolve, and to a public address
(loopback, private and link-local ranges, the cloud metadata address rejected); at most
2048 characters. The reference implements them as follows (choices where the spec is
silent are marked INTERPRETATION and mirrored by ``fixtures/callback_urls.yaml``):

- The URL is parsed once, with httpx's parser: the same parser that sends the delivery,
  so validator and sender cannot disagree on the host (two parsers that read one URL
  differently are a known way past an SSRF check).
- Length counts the characters (code points) of the string as submitted, fragment and
  all (INTERPRETATION).
- Every resolved address must be public, not only one (INTERPRETATION: OWASP's webhook
  guidance; the spec's "resolve to a public address" does not say any or every).
- Host spellings a resolver would turn into an IPv4 address (``2130706433``, ``0x7f.1``,
  ``0177.0.0.1``, ``10.1``) are read as that address, as the WHATWG URL parser and glibc
  do, and judged without DNS; a host that ends in a number but is no valid IPv4 address
  is rejected.
- Rejected as unusable or ambiguous (hardening the spec does not list, each justified):
  whitespace and control characters (parsers repair them differently), a backslash
  (WHATWG parsers read it as ``/``, httpx as userinfo: ``http://127.0.0.2:9\\@127.0.0.1/``
  would reach different hosts), percent-encoding in the host, IPv6 zone ids (they name a
  local interface), port 0 or above 65535 (no connection can be made).
- Userinfo (``http://user:pass@host/``) is ACCEPTED: RFC 3986 allows it, the spec is
  silent, and a receiver may use it for Basic authentication; the host after ``@`` is
  what is judged and what is dialled.

The :class:`ValidatedTarget` carries the one address the delivery client must connect to
(``reference.netguard.transport``), so no second DNS lookup can rebind the delivery.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass

import httpx

from reference.netguard.addresses import IPAddress, IPNetwork, classify, parse_allow_cidrs
from reference.netguard.resolver import HostNotResolved, Resolver

__all__ = [
    "MAX_URL_LENGTH",
    "CallbackPolicy",
    "CallbackRejected",
    "ValidatedTarget",
    "parse_ipv4_host",
]

#: Spec §4 and §8: "Maximum length 2048 characters".
MAX_URL_LENGTH = 2048
ALLOWED_SCHEMES = ("http", "https")
DEFAULT_PORTS = {"http": 80, "https": 443}
#: A backstop over the resolver's own timeout: validation never waits longer than this.
RESOLVE_DEADLINE_S = 5.0

_AUTHORITY = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<authority>[^/?#]*)")


def mask_userinfo(url: str) -> str:
    """*url* with its userinfo (``user:pass@``) shown as ``***@``, for every echo of a
    target URL: the credentials are kept and sent as Basic auth, never shown again."""
    match = _AUTHORITY.match(url)
    if match is None or "@" not in match["authority"]:
        return url
    host = match["authority"].rsplit("@", 1)[1]
    return f"{match['scheme']}***@{host}{url[match.end() :]}"


#: Where a refused host name's resolver answers go (never into the 400 body).
log = logging.getLogger("reference.netguard")

_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_DECIMAL = re.compile(r"[0-9]+")
_OCTAL = re.compile(r"0[0-7]*")
_HEX = re.compile(r"0[xX][0-9a-fA-F]*")


class CallbackRejected(Exception):
    """A callback URL fails the policy. ``reason`` is a sentence for the 400 body.

    ``rule`` is the short id of the deciding rule (``scheme``, ``length``, ``unresolvable``,
    ``loopback``, ``private-10/8`` ...), as in ``fixtures/callback_urls.yaml``.
    """

    def __init__(
        self,
        reason: str,
        rule: str = "policy",
        resolved: tuple[str, ...] = (),
        *,
        timed_out: bool = False,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.rule = rule
        #: Under ``unresolvable``: the lookup got no answer in time (not a "no such name").
        self.timed_out = timed_out
        #: The addresses a host name resolved to: logged, never in ``reason`` (a 400 body
        #: must not show a caller what the service's resolver answers).
        self.resolved = resolved


@dataclass(frozen=True, slots=True)
class ValidatedTarget:
    """A callback URL that passed the policy, and the address to deliver to.

    ``url`` is the URL as submitted (what is recorded and posted to); ``host`` the host as
    httpx parsed it (ASCII, IDNA-encoded, IPv6 without brackets), which the delivery keeps
    as its ``Host`` header and TLS server name; ``address`` the single checked IP address
    the connection must go to.
    """

    url: str
    host: str
    port: int
    scheme: str
    address: str


def _ipv4_part(text: str) -> int | None:
    """One dot-separated part of a WHATWG / inet_aton IPv4 spelling, or None if invalid."""
    if _HEX.fullmatch(text):
        return int(text[2:], 16) if len(text) > 2 else 0
    if len(text) > 1 and _OCTAL.fullmatch(text):
        return int(text, 8)
    if _DECIMAL.fullmatch(text) and not (len(text) > 1 and text.startswith("0")):
        return int(text)
    return None


def _ends_in_number(labels: list[str]) -> bool:
    last = labels[-1]
    return bool(_DECIMAL.fullmatch(last) or _HEX.fullmatch(last))


def parse_ipv4_host(host: str) -> ipaddress.IPv4Address | None:
    """Read a host the way the WHATWG URL parser (and glibc's inet_aton) reads IPv4.

    Returns the address for any spelling (``127.1``, ``0x7f.1``, ``0177.0.0.1``,
    ``2130706433``, ``10.0.0.1.``) and ``None`` for an ordinary host name; raises
    :class:`ValueError` for a host that ends in a number but is no valid IPv4 address
    (WHATWG: failure).
    """
    labels = host.split(".")
    if len(labels) > 1 and labels[-1] == "":
        labels = labels[:-1]  # one trailing dot is allowed
    if not labels or labels == [""] or not _ends_in_number(labels):
        return None
    if len(labels) > 4:
        raise ValueError(f"{host!r}: more than four parts")
    parts = [_ipv4_part(label) for label in labels]
    numbers = [part for part in parts if part is not None]
    if len(numbers) != len(parts):
        raise ValueError(f"{host!r}: a part is not a decimal, octal or hex number")
    *leading, last = numbers
    if any(number > 255 for number in leading) or last >= 256 ** (5 - len(numbers)):
        raise ValueError(f"{host!r}: a part is out of range")
    value = last
    for index, number in enumerate(leading):
        value += number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def _has_unsafe_character(url: str) -> str | None:
    for char in url:
        code = ord(char)
        if char.isspace():
            return f"whitespace (U+{code:04X})"
        if code < 0x20 or 0x7F <= code <= 0x9F:
            return f"a control character (U+{code:04X})"
    return None


class CallbackPolicy:
    """Validates callback and webhook URLs (spec §4) and pins the address to deliver to.

    ``allow_cidrs`` is the test-mode allowlist (e.g. ``("127.0.0.1/32",)`` for the suite's
    loopback receiver): addresses in it count as public. Empty by default.
    """

    def __init__(self, resolver: Resolver, allow_cidrs: Iterable[str | IPNetwork] = ()) -> None:
        self.resolver = resolver
        self.allow_cidrs: tuple[IPNetwork, ...] = parse_allow_cidrs(
            str(cidr) for cidr in allow_cidrs
        )

    async def validate(self, url: object) -> ValidatedTarget:
        """Check ``url``; return where to deliver, or raise :class:`CallbackRejected`."""
        if not isinstance(url, str):
            raise CallbackRejected("callback URL must be a string", "syntax")
        if len(url) > MAX_URL_LENGTH:
            raise CallbackRejected(
                f"callback URL must be at most {MAX_URL_LENGTH} characters "
                f"(this one has {len(url)})",
                "length",
            )
        unsafe = _has_unsafe_character(url)
        if unsafe is not None:
            raise CallbackRejected(f"callback URL must not contain {unsafe}", "characters")
        if "\\" in url:
            raise CallbackRejected(
                "callback URL must not contain a backslash (URL parsers disagree on its meaning)",
                "backslash",
            )
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise CallbackRejected(f"callback URL is not a valid URL: {exc}", "syntax") from exc
        scheme = parsed.scheme
        if scheme not in ALLOWED_SCHEMES:
            raise CallbackRejected("callback URL must use http or https", "scheme")
        host = parsed.raw_host.decode("ascii")
        if not host:
            raise CallbackRejected("callback URL must have a host name", "host-missing")
        port = self._port(parsed)
        addresses = await self._addresses(host)
        for address in addresses:
            verdict = classify(address, self.allow_cidrs)
            if verdict.public:
                continue
            if ":" in host or parse_ipv4_host(host) is not None:  # a literal: as written
                raise CallbackRejected(
                    f"callback URL must resolve to public addresses only: {verdict.reason}",
                    verdict.rule,
                )
            resolved = tuple(str(a) for a in addresses)
            log.info(
                "callback host %s resolves to %s: %s", host, ", ".join(resolved), verdict.reason
            )
            raise CallbackRejected(
                f"callback URL must resolve to public addresses only: {host} resolves to "
                f"an address that is not public ({verdict.rule})",
                verdict.rule,
                resolved,
            )
        chosen = addresses[0]
        if isinstance(chosen, ipaddress.IPv6Address) and chosen.ipv4_mapped is not None:
            chosen = chosen.ipv4_mapped  # the same destination, reachable without IPv6
        return ValidatedTarget(url=url, host=host, port=port, scheme=scheme, address=str(chosen))

    @staticmethod
    def _port(parsed: httpx.URL) -> int:
        port = parsed.port if parsed.port is not None else DEFAULT_PORTS[parsed.scheme]
        if not 1 <= port <= 65535:
            raise CallbackRejected(
                f"callback URL port must be between 1 and 65535 (got {port})", "port"
            )
        return port

    async def _addresses(self, host: str) -> list[IPAddress]:
        """The addresses ``host`` stands for: a literal, an IPv4 spelling, or DNS."""
        if "%" in host:
            if ":" in host:
                raise CallbackRejected(
                    "callback URL must not carry an IPv6 zone id (it names a local interface)",
                    "zone-id",
                )
            raise CallbackRejected("callback URL host must not be percent-encoded", "host-syntax")
        if ":" in host:
            # httpx accepted the bracketed literal; a zone id was refused above.
            return [ipaddress.IPv6Address(host)]
        try:
            spelled = parse_ipv4_host(host)
        except ValueError as exc:
            raise CallbackRejected(
                f"callback URL host {host!r} ends in a number but is not a valid IPv4 address",
                "invalid-ip",
            ) from exc
        if spelled is not None:
            return [spelled]
        name = host[:-1] if host.endswith(".") else host
        labels = name.split(".")
        if len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
            raise CallbackRejected(
                f"callback URL host {host!r} is not a valid host name", "host-syntax"
            )
        try:
            async with asyncio.timeout(RESOLVE_DEADLINE_S):
                return await self.resolver.resolve(host)
        except HostNotResolved as exc:
            raise CallbackRejected(
                f"callback URL host {host!r} does not resolve ({exc.why})",
                "unresolvable",
                timed_out=exc.timed_out,
            ) from exc
        except TimeoutError as exc:
            raise CallbackRejected(
                f"callback URL host {host!r} does not resolve (no answer within "
                f"{RESOLVE_DEADLINE_S:g} s)",
                "unresolvable",
                timed_out=True,
            ) from exc
