"""The callback URLs the URL checks submit: fixture vectors and Hypothesis strategies.

Spec §4 "Callback URL requirements" (and §7, §8): scheme http or https, a host that
resolves to a public address, no loopback, private or link-local address, at most 2048
characters. Two sources of URLs feed the checks in ``conformance/checks/test_url_*.py``:

* :func:`fixture_vectors`: ``fixtures/callback_urls.yaml``, each vector naming the
  catalog requirement it exercises;
* the strategies below: variants built from small pieces (an address drawn from one
  range of ``fixtures/special_purpose_addresses.yaml``, which names the requirement of
  each range and how firmly it is held, a spelling of it, an IPv6 form that embeds it, a
  length just past 2048, a scheme that is not http(s)).

Which requirement a URL breaks is data, never code here; the one
consequence the checks share: :func:`case_ids` (a broken MUST rule in webhook.url also
breaks TARGET-BIND-03).

Safety. Every URL submitted is the receiver's or one the implementation must reject, and
a wrongly accepted one must not reach a host off the machine in any harmful way:

* a vector naming a requirement is never a public address (``deliverable: false``), a
  name only the suite's DNS serves, ``localhost``, a spelling that a differently-reading
  parser turns into a public address (a dotted part with a leading zero: ``0177.0.0.2`` is
  177.0.0.2 read as decimal) or an IPv6 form that embeds a public IPv4 address:
  :func:`fixture_vectors` refuses such a vector;
* reject vectors aim at the discard port 9, except that a host which is *this machine*
  (loopback, unspecified, their embedded forms) is aimed at the canary's port when the
  implementation runs here too, so that a wrong acceptance is seen connecting;
* 127.0.0.1, the receiver's address under the implementation's test allowlist, is never
  drawn as a reject host, in any spelling (URL-RESOLVE-06).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from hypothesis import strategies as st

import genapi_spec
from conformance.catalog import Level, load_catalog
from genapi_spec.address_tables import (
    AddressRange,
    IPAddress,
    address_ranges,
    deciding_range,
    embedding_of,
    embeddings,
)

__all__ = [
    "ALLOWLISTED",
    "FIELDS",
    "MAX_URL_LENGTH",
    "AddressRange",
    "UrlVector",
    "aim",
    "bad_schemes",
    "case_ids",
    "embedded_ipv6_hosts",
    "embedding_requirement",
    "fixture_vectors",
    "host_is_this_machine",
    "ipv4_in",
    "ipv4_spellings",
    "ipv6_in",
    "is_must",
    "iut_on_this_machine",
    "literal_address",
    "must_reject_vector",
    "overlong_urls",
    "reject_ranges",
    "unresolvable_hosts",
]

#: Spec §4, §8: the longest callback URL accepted.
MAX_URL_LENGTH: Final = 2048
#: Addresses the implementation's test allowlist may legitimately cover (the suite's
#: receiver listens on 127.0.0.1, which an implementation under test allowlists as
#: public): never drawn as a reject vector, in any spelling.
ALLOWLISTED: Final = frozenset({ipaddress.ip_address("127.0.0.1")})
#: The discard port: where reject vectors aim (a vulnerable IUT really dials them).
DISCARD_PORT: Final = 9

#: The requirement a broken callback URL rule in webhook.url also breaks (spec §2: the
#: binding's url "Must satisfy the callback URL rules").
WEBHOOK_URL_RULES: Final = "TARGET-BIND-03"


def is_must(requirement_id: str) -> bool:
    """Whether the catalog states *requirement_id* as a MUST (else an interpretation)."""
    return load_catalog()[requirement_id].level is Level.MUST


def case_ids(field: str, *ids: str) -> tuple[str, ...]:
    """The ids a case that submits a URL in *field* cites.

    With webhook.url, a URL that breaks only MUST rules also breaks TARGET-BIND-03; a URL
    judged by an interpretation (a recent registry entry, a deprecated range) cites no MUST
    in either field, so accepting it can only warn.
    """
    if field == "webhook.url" and all(is_must(i) for i in ids):
        return (*ids, WEBHOOK_URL_RULES)
    return ids


# -- address ranges ----------------------------------------------------------------------


def reject_ranges() -> list[AddressRange]:
    """The non-public ranges the suite draws hosts from: those that name a requirement."""
    return [entry for entry in address_ranges() if entry.requirement is not None]


def embedding_requirement(*, equivalent: bool) -> str:
    """The requirement an IPv6 form of a non-public IPv4 address breaks: URL-MAPPED-01 for
    the IPv4-mapped form (``equivalent``), the translated forms' one otherwise."""
    (requirement,) = {e.requirement for e in embeddings() if e.equivalent is equivalent}
    return requirement


def _usable(address: IPAddress, entry: AddressRange, avoid: frozenset[IPAddress]) -> bool:
    """*address* is judged by *entry* itself (not a more specific entry) and not allowlisted."""
    return address not in ALLOWLISTED and address not in avoid and deciding_range(address) == entry


def _addresses_in(
    entry: AddressRange, avoid: Iterable[IPAddress], version: int
) -> st.SearchStrategy[IPAddress]:
    """Addresses that *entry*, a range of IP *version*, decides, none of *avoid*."""
    network = entry.network
    if network.version != version:
        raise ValueError(f"{entry.slug} is not an IPv{version} range")
    avoided = frozenset(avoid)
    first, last = int(network.network_address), int(network.broadcast_address)

    def make(number: int) -> IPAddress:
        if network.version == 4:
            return ipaddress.IPv4Address(number)
        return ipaddress.IPv6Address(number)

    def usable(address: IPAddress) -> bool:
        return _usable(address, entry, avoided)

    # The ends of a range are where off-by-one mistakes live: draw them often.
    edges = st.sampled_from(sorted({first, min(first + 1, last), max(last - 1, first), last}))
    numbers = st.one_of(edges, st.integers(first, last))
    return numbers.map(make).filter(usable)


def ipv4_in(
    entry: AddressRange, avoid: Iterable[IPAddress] = ()
) -> st.SearchStrategy[ipaddress.IPv4Address]:
    """IPv4 addresses that *entry* (an IPv4 range) decides."""
    return _addresses_in(entry, avoid, 4)  # type: ignore[return-value]


def ipv6_in(
    entry: AddressRange, avoid: Iterable[IPAddress] = ()
) -> st.SearchStrategy[ipaddress.IPv6Address]:
    """IPv6 addresses that *entry* (an IPv6 range) decides."""
    return _addresses_in(entry, avoid, 6)  # type: ignore[return-value]


# -- spellings and embeddings --------------------------------------------------------------


def _dotted(value: int) -> str:
    return ".".join(str((value >> shift) & 0xFF) for shift in (24, 16, 8, 0))


def ipv4_spellings(address: ipaddress.IPv4Address) -> st.SearchStrategy[tuple[str, bool]]:
    """Host spellings of *address*: ``(host, canonical)``, canonical for the dotted quad.

    The forms glibc's inet_aton and the WHATWG URL parser both read as the same
    address: one integer (decimal, hex), short forms (``a.b``,
    ``a.b.c``), hex parts, a trailing dot, ideographic full stops. Leading-zero (octal)
    forms are left out on purpose: a parser that reads them as decimal lands on a public
    address.
    """
    n = int(address)
    a, b, c, d = ((n >> shift) & 0xFF for shift in (24, 16, 8, 0))
    forms = [
        (_dotted(n), True),
        (str(n), False),
        (f"0x{n:08x}", False),
        (f"0X{n:X}", False),
        (f"{a}.{n & 0xFFFFFF}", False),
        (f"{a}.{b}.{n & 0xFFFF}", False),
        (f"0x{a:x}.{b}.{c}.{d}", False),
        (f"0x{a:x}.0x{b:x}.0x{c:x}.0x{d:x}", False),
        (f"{_dotted(n)}.", False),
    ]
    return st.sampled_from(forms)


def embedded_ipv6_hosts(
    address: ipaddress.IPv4Address,
) -> st.SearchStrategy[tuple[str, str]]:
    """Bracketed IPv6 hosts that embed *address*: ``(host, rule)``.

    ``ipv4-mapped`` forms reach *address* itself (RFC 4291 §2.5.5.2: URL-MAPPED-01); the
    translation and tunnel forms depend on translators (URL-MAPPED-02).
    """
    n = int(address)
    hi, lo = n >> 16, n & 0xFFFF
    dotted = _dotted(n)
    forms = [
        (f"[::ffff:{dotted}]", "ipv4-mapped"),
        (f"[::ffff:{hi:x}:{lo:x}]", "ipv4-mapped"),
        (f"[0:0:0:0:0:ffff:{hi:x}:{lo:x}]", "ipv4-mapped"),
        (f"[::FFFF:{hi:X}:{lo:X}]", "ipv4-mapped"),
        (f"[::{dotted}]", "ipv4-compatible"),
        (f"[::ffff:0:{dotted}]", "siit"),
        (f"[64:ff9b::{dotted}]", "nat64"),
        (f"[2002:{hi:x}:{lo:x}::1]", "6to4"),
        (f"[2001:0:4136:e378:8000:63bf:{hi ^ 0xFFFF:x}:{lo ^ 0xFFFF:x}]", "teredo"),
    ]
    if address.is_loopback or address.is_unspecified:
        # The IPv4-compatible form of 127.x / 0.x is no loopback in the IPv6 tables;
        # keep only forms whose verdict the tables give through the embedded address.
        forms = [f for f in forms if f[1] != "ipv4-compatible"]
    return st.sampled_from(forms)


def bad_schemes() -> st.SearchStrategy[str]:
    """Schemes other than http and https (any case): URL-SCHEME-03."""
    known = st.sampled_from(
        ["ftp", "file", "gopher", "ws", "wss", "ldap", "dict", "sftp", "tftp", "jar", "ftps"]
    )
    invented = st.from_regex(r"[a-z][a-z0-9+.\-]{0,9}", fullmatch=True)
    return (
        st.one_of(known, invented)
        .filter(lambda s: s.lower() not in {"http", "https"})
        .flatmap(lambda s: st.sampled_from([s, s.upper()]))
    )


def unresolvable_hosts() -> st.SearchStrategy[str]:
    """Host names under ``.invalid``, which never resolve (RFC 6761): URL-RESOLVE-01."""
    label = st.from_regex(r"[a-z0-9]([a-z0-9\-]{0,20}[a-z0-9])?", fullmatch=True)
    return st.lists(label, min_size=1, max_size=3).flatmap(
        lambda labels: st.sampled_from([".invalid", ".INVALID", ".invalid."]).map(
            lambda suffix: ".".join(labels) + suffix
        )
    )


def overlong_urls(base: str) -> st.SearchStrategy[str]:
    """URLs on *base* (the receiver) of 2049 characters and more: URL-LEN-02.

    Lengths crowd just past the limit, where an off-by-one hides; the padding sits in the
    path or the query (ASCII only, so every way of counting characters agrees).
    """
    lengths = st.one_of(
        st.integers(MAX_URL_LENGTH + 1, MAX_URL_LENGTH + 8),
        st.integers(MAX_URL_LENGTH + 9, 3 * MAX_URL_LENGTH),
    )
    shapes = st.sampled_from([base + "/len?pad=", base + "/len/", base + "/len?a=b&pad="])
    return st.tuples(shapes, lengths).map(
        lambda pair: pair[0] + "a" * max(1, pair[1] - len(pair[0]))
    )


# -- where a reject vector aims ------------------------------------------------------------


def _embedded_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    value = int(address)
    if value >> 32 == 0 or value >> 32 == 0xFFFF0000:  # ::/96, SIIT ::ffff:0:0:0/96
        return ipaddress.IPv4Address(value & 0xFFFFFFFF)
    return None


def literal_address(host: str) -> IPAddress | None:
    """The address a URL's host literal names (None: it names none, e.g. a host name).

    Brackets and an IPv6 zone id are left out; numeric IPv4 spellings are read as glibc
    does (``inet_aton``: a local parse, no lookup).
    """
    text = host.strip("[]").split("%", 1)[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(text.rstrip(".")))
    except OSError:
        return None


def host_is_this_machine(host: str) -> bool:
    """Whether a connection to *host* (a literal in any spelling) stays on this machine.

    Loopback, unspecified (0.0.0.0 and [::] reach local listeners) and the IPv6 forms that
    carry them, in any spelling :func:`literal_address` reads. Host names are never this
    machine here: nothing resolves them.
    """
    address = literal_address(host)
    if address is None:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        if address.is_loopback or address.is_unspecified:
            return True
        embedded = _embedded_v4(address)
        if embedded is None:
            return False
        address = embedded
    return bool(address.is_loopback or int(address) >> 24 == 0)


_PORT_9: Final = re.compile(
    rf"^(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^/?#]*):{DISCARD_PORT}(?=[/?#]|$)"
)


def aim(url: str, canary_port: int | None) -> str:
    """*url* with its port 9 turned to the canary's port when its host is this machine.

    *canary_port* is None when the implementation runs elsewhere (then 9 stays: the
    suite's canaries could not see the connection anyway).
    """
    if canary_port is None:
        return url
    match = _PORT_9.match(url)
    if match is None:
        return url
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        return url
    if not host_is_this_machine(host):
        return url
    return f"{match.group('head')}:{canary_port}{url[match.end() :]}"


def iut_on_this_machine(base_url: str, receiver_public_url: str) -> bool:
    """Whether the implementation runs here: then the canaries see what it connects to."""
    if receiver_public_url:
        return False  # reached through a tunnel: the IUT is elsewhere
    try:
        host = urlsplit(base_url).hostname or ""
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host.lower() == "localhost"


#: The two fields a callback URL is submitted in (spec §4 target selection rules); the
#: body is built with :func:`conformance.observe.events.target_body`.
FIELDS: Final[tuple[Literal["callback_url", "webhook.url"], ...]] = ("callback_url", "webhook.url")


# -- fixture vectors -----------------------------------------------------------------------


@dataclass(frozen=True)
class UrlVector:
    """One vector of ``fixtures/callback_urls.yaml`` that the suite submits.

    ``template`` still holds the placeholders (``{receiver}``...): :meth:`render` fills
    them in once the receiver runs.
    """

    template: str
    verdict: str
    rule: str
    why: str
    #: The catalog id the vector is judged by (its level: fail or warn).
    requirement: str
    length: int | None = None

    @property
    def case_id(self) -> str:
        """A readable parametrisation id, e.g. ``private-10/8-http://10.0.0.1:9/-400``."""
        shown = self.template.replace("{receiver_authority}", "RECV").replace("{receiver}", "RECV")
        shown = shown.encode("unicode_escape").decode("ascii")
        if self.length is not None:
            shown = f"{shown.replace('{pad}', '')}({self.length}-chars)"
        return f"{self.rule}-{shown[:60]}-{'400' if self.verdict == 'reject' else 'accepted'}"

    def context(self) -> str:
        """Why the vector has its verdict, for a failure message: its ``why`` and, for an
        address, the range that decides it (registry entry, RFC, year, ranking)."""
        found = _judging_range(self.template)
        return self.why if found is None else f"{self.why}; {found}"

    def render(self, receiver_base: str, canary_port: int | None = None) -> str:
        """The URL to submit: placeholders filled, local hosts aimed at the canary."""
        parts = urlsplit(receiver_base)
        authority = parts.netloc
        port = str(parts.port or (443 if parts.scheme == "https" else 80))
        url = (
            self.template.replace("{receiver_authority}", authority)
            .replace("{receiver_port}", port)
            .replace("{receiver}", receiver_base.rstrip("/"))
        )
        if self.length is not None:
            url = url.replace("{pad}", "a" * (self.length - len(url) + len("{pad}")))
            if len(url) != self.length:
                raise ValueError(f"cannot pad {self.template!r} to {self.length} characters")
        return aim(url, canary_port)


def _host_of(template: str) -> str:
    """The literal host of a vector's URL ('' when there is none or it will not parse)."""
    try:
        return urlsplit(template).hostname or ""
    except ValueError:
        return ""


def _judging_range(template: str) -> str | None:
    """The range that decides a vector's host, described with its requirement."""
    address = literal_address(_host_of(template))
    if address is None:
        return None
    entry = deciding_range(address)
    if isinstance(address, ipaddress.IPv6Address) and (entry is None or not entry.requirement):
        embedding = embedding_of(address)
        if embedding is not None:
            carried = embedding.carried(address)
            inner = deciding_range(carried)
            shown = inner.describe() if inner is not None else "a public address"
            return f"{embedding.name} form of {carried}, in {shown}"
    return None if entry is None else entry.judged()


def _has_leading_zero_part(host: str) -> bool:
    return any(len(p) > 1 and p.startswith("0") and p[1:2].isdigit() for p in host.split("."))


def _embeds_public_ipv4(host: str) -> bool:
    address = literal_address(host)
    if not isinstance(address, ipaddress.IPv6Address):
        return False
    embedding = embedding_of(address)
    if embedding is None:
        return False
    entry = deciding_range(embedding.carried(address))
    return entry is None or entry.public is True


def _unsafe(row: dict[str, Any]) -> str | None:
    """Why the suite must not submit a vector (None: it may)."""
    host = _host_of(str(row.get("url") or row.get("url_template")))
    if row.get("requires"):
        return f"it requires {row['requires']}"
    if row["verdict"] == "accept" and not row.get("deliverable"):
        return "it is a public address that must never be contacted"
    if host.rstrip(".") == "localhost":
        return "localhost is legitimately accepted under a test allowlist (URL-RESOLVE-06)"
    if _has_leading_zero_part(host):
        return "a parser reading leading zeros as decimal turns it into a public address"
    if _embeds_public_ipv4(host):
        return "it embeds a public IPv4 address"
    return None


@cache
def fixture_vectors() -> tuple[UrlVector, ...]:
    """The fixture's vectors that name a requirement: those the suite submits.

    Raises ValueError for a vector that names one but must not be submitted (see the
    safety rules above): the fixture is wrong, not the implementation.
    """
    data = genapi_spec.load_fixture("callback_urls.yaml")
    vectors: list[UrlVector] = []
    for row in data["vectors"]:
        if "requirement" not in row:
            continue
        template = str(row.get("url") or row.get("url_template"))
        unsafe = _unsafe(row)
        if unsafe is not None:
            raise ValueError(
                f"fixtures/callback_urls.yaml: {template!r} names {row['requirement']}, "
                f"but the suite must not submit it: {unsafe}"
            )
        vectors.append(
            UrlVector(
                template=template,
                verdict=str(row["verdict"]),
                rule=str(row["rule"]),
                why=str(row["why"]),
                requirement=str(row["requirement"]),
                length=row.get("length"),
            )
        )
    return tuple(vectors)


def must_reject_vector(url: str) -> UrlVector:
    """The reject vector *url*, whose requirement must be a MUST: a target every
    implementation refuses, for checks of other rules that need an invalid callback target
    (target selection). They may fail a MUST over it only because its own rule is one.
    """
    for vector in fixture_vectors():
        if vector.template == url and vector.verdict == "reject":
            if not is_must(vector.requirement):
                raise ValueError(f"{url} is judged by an interpretation ({vector.requirement})")
            return vector
    raise LookupError(f"no reject vector {url!r} in fixtures/callback_urls.yaml")
