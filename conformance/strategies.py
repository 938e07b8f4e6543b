"""The callback URLs the URL checks submit: fixture vectors and Hypothesis strategies.

Spec §4 "Callback URL requirements" (and §7, §8): scheme http or https, a host that
resolves to a public address, no loopback, private or link-local address, at most 2048
characters. Two sources of URLs feed the checks in ``conformance/checks/test_url_*.py``:

* :func:`fixture_vectors`: ``fixtures/callback_urls.yaml``, each vector tied to the
  catalog requirement it exercises (:func:`vector_requirements`);
* the strategies below: variants built from small pieces (an address drawn from one
  range of ``fixtures/special_purpose_addresses.yaml``, a spelling of it, an IPv6 form
  that embeds it, a length just past 2048, a scheme that is not http(s)).

Safety (DESIGN.md "Safety rules"). Every URL submitted is the receiver's or one the
implementation must reject, and a wrongly accepted one must not reach a host off the
machine in any harmful way:

* vectors marked ``deliverable: false`` (public addresses) are never submitted;
* reject vectors aim at the discard port 9, except that a host which is *this machine*
  (loopback, unspecified, their embedded forms) is aimed at the canary's port when the
  implementation runs here too, so that a wrong acceptance is seen connecting;
* spellings that a differently-reading parser turns into a public address are left out:
  a dotted part with a leading zero (``0177.0.0.2`` is 177.0.0.2 read as decimal) and
  IPv6 forms that embed a public IPv4 address;
* ``localhost`` is never a reject vector (URL-RESOLVE-06: the receiver's loopback
  address is public under the implementation's test allowlist), nor is 127.0.0.1 or the
  receiver's own address in any spelling.
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

__all__ = [
    "ALLOWLISTED",
    "FIELDS",
    "MAX_URL_LENGTH",
    "AddressRange",
    "UrlVector",
    "address_ranges",
    "aim",
    "bad_schemes",
    "embedded_ipv6_hosts",
    "fixture_vectors",
    "host_is_this_machine",
    "ipv4_in",
    "ipv4_spellings",
    "ipv6_in",
    "iut_on_this_machine",
    "overlong_urls",
    "range_requirement",
    "reject_ranges",
    "unresolvable_hosts",
    "vector_requirements",
]

#: Spec §4, §8: the longest callback URL accepted.
MAX_URL_LENGTH: Final = 2048
#: Addresses the implementation's test allowlist may legitimately cover (DESIGN.md, the
#: loopback rule): never drawn as a reject vector, in any spelling.
ALLOWLISTED: Final = frozenset({ipaddress.ip_address("127.0.0.1")})
#: The discard port: where reject vectors aim (a vulnerable IUT really dials them).
DISCARD_PORT: Final = 9

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


# -- address ranges ----------------------------------------------------------------------


@dataclass(frozen=True)
class AddressRange:
    """One entry of ``fixtures/special_purpose_addresses.yaml``."""

    network: IPNetwork
    name: str
    rule: str
    public: bool | None  # None: the registry says N/A (decided by an embedded address)

    @property
    def slug(self) -> str:
        """A readable test id: ``private-10/8-10.0.0.0/8``."""
        return f"{self.rule}-{self.network}"


@cache
def address_ranges() -> tuple[AddressRange, ...]:
    """Every range of the address tables (IPv4, IPv6 and the extra non-public ones)."""
    data = genapi_spec.load_fixture("special_purpose_addresses.yaml")
    found: list[AddressRange] = []
    for table in ("ipv4", "ipv6"):
        for row in data[table]:
            found.append(
                AddressRange(
                    ipaddress.ip_network(row["prefix"]),
                    row["name"],
                    row["rule"],
                    row["globally_reachable"],
                )
            )
    for row in data["extra"]:
        found.append(
            AddressRange(ipaddress.ip_network(row["prefix"]), row["name"], row["rule"], False)
        )
    return tuple(found)


def _longest_match(address: IPAddress) -> AddressRange | None:
    best: AddressRange | None = None
    for entry in address_ranges():
        if entry.network.version == address.version and address in entry.network:
            if best is None or entry.network.prefixlen > best.network.prefixlen:
                best = entry
    return best


#: Rules whose IPv6 form is an embedding of IPv4 (judged through what they carry).
_EMBEDDING_RULES: Final = frozenset({"ipv4-mapped", "ipv4-compatible", "siit", "nat64", "6to4"})

#: The requirement a non-public address of each rule breaks, by IP version. A rule not
#: listed (IPv6 space merely "reserved by IETF") has no catalog statement: not drawn.
_V4_RULE_IDS: Final = {
    "this-network": "URL-UNSPEC-01",
    "unspecified": "URL-UNSPEC-01",
    "private-10/8": "URL-PRIV-01",
    "private-172.16/12": "URL-PRIV-02",
    "private-192.168/16": "URL-PRIV-03",
    "cgnat": "URL-PRIV-04",
    "loopback": "URL-LOOP-01",
    "link-local": "URL-LINK-01",
    "ietf-protocol": "URL-IANA-01",
    "documentation": "URL-IANA-01",
    "benchmarking": "URL-IANA-01",
    "broadcast": "URL-IANA-01",
    "multicast": "URL-MCAST-01",
}
_V6_RULE_IDS: Final = {
    "loopback": "URL-LOOP-02",
    "unspecified": "URL-UNSPEC-02",
    "unique-local": "URL-PRIV-05",
    "link-local": "URL-LINK-03",
    "zone-id": "URL-LINK-03",
    "metadata": "URL-LINK-04",
    "ipv4-mapped": "URL-MAPPED-01",
    "ipv4-compatible": "URL-MAPPED-02",
    "siit": "URL-MAPPED-02",
    "nat64": "URL-MAPPED-02",
    "6to4": "URL-MAPPED-02",
    "teredo": "URL-MAPPED-02",
    "documentation": "URL-IANA-02",
    "discard-only": "URL-IANA-02",
    "dummy": "URL-IANA-02",
    "benchmarking": "URL-IANA-02",
    "ietf-protocol": "URL-IANA-02",
    "srv6": "URL-IANA-02",
    "multicast": "URL-MCAST-01",
    "site-local": "URL-DEPR-01",
}


def range_requirement(entry: AddressRange) -> str | None:
    """The catalog id a host in *entry* breaks (None: public, or no statement covers it)."""
    if entry.public is not False:
        return None
    if entry.network.version == 4:
        if entry.rule == "metadata":
            # 169.254.169.254 is the metadata address the spec names; 100.100.100.200
            # sits in the shared address space (URL-PRIV-04 names it).
            return "URL-LINK-02" if entry.network.overlaps(_LINK_LOCAL_V4) else "URL-PRIV-04"
        if entry.rule == "reserved":
            return "URL-DEPR-01" if entry.network == _RELAY_ANYCAST else "URL-IANA-01"
        return _V4_RULE_IDS.get(entry.rule)
    if entry.rule == "reserved":
        return None
    return _V6_RULE_IDS.get(entry.rule)


_LINK_LOCAL_V4: Final = ipaddress.ip_network("169.254.0.0/16")
_RELAY_ANYCAST: Final = ipaddress.ip_network("192.88.99.0/24")


def reject_ranges() -> list[AddressRange]:
    """Non-public ranges to draw hosts from, each with a requirement (embeddings apart)."""
    return [
        entry
        for entry in address_ranges()
        if range_requirement(entry) is not None and entry.rule not in _EMBEDDING_RULES
    ]


def _usable(address: IPAddress, entry: AddressRange, avoid: frozenset[IPAddress]) -> bool:
    """*address* is judged by *entry* itself (not a more specific entry) and not allowlisted."""
    return address not in ALLOWLISTED and address not in avoid and _longest_match(address) == entry


def _addresses_in(entry: AddressRange, avoid: frozenset[IPAddress]) -> st.SearchStrategy[IPAddress]:
    network = entry.network
    first, last = int(network.network_address), int(network.broadcast_address)

    def make(number: int) -> IPAddress:
        if network.version == 4:
            return ipaddress.IPv4Address(number)
        return ipaddress.IPv6Address(number)

    def usable(address: IPAddress) -> bool:
        return _usable(address, entry, avoid)

    # The ends of a range are where off-by-one mistakes live: draw them often.
    edges = st.sampled_from(sorted({first, min(first + 1, last), max(last - 1, first), last}))
    numbers = st.one_of(edges, st.integers(first, last))
    return numbers.map(make).filter(usable)


def ipv4_in(
    entry: AddressRange, avoid: Iterable[IPAddress] = ()
) -> st.SearchStrategy[ipaddress.IPv4Address]:
    """IPv4 addresses that *entry* (an IPv4 range) decides."""
    if entry.network.version != 4:
        raise ValueError(f"{entry.slug} is not an IPv4 range")
    return _addresses_in(entry, frozenset(avoid))  # type: ignore[return-value]


def ipv6_in(
    entry: AddressRange, avoid: Iterable[IPAddress] = ()
) -> st.SearchStrategy[ipaddress.IPv6Address]:
    """IPv6 addresses that *entry* (an IPv6 range) decides."""
    if entry.network.version != 6:
        raise ValueError(f"{entry.slug} is not an IPv6 range")
    return _addresses_in(entry, frozenset(avoid))  # type: ignore[return-value]


# -- spellings and embeddings --------------------------------------------------------------


def _dotted(value: int) -> str:
    return ".".join(str((value >> shift) & 0xFF) for shift in (24, 16, 8, 0))


def ipv4_spellings(address: ipaddress.IPv4Address) -> st.SearchStrategy[tuple[str, bool]]:
    """Host spellings of *address*: ``(host, canonical)``, canonical for the dotted quad.

    The forms glibc's inet_aton and the WHATWG URL parser read as the same address
    (FACTS-webhooks-ssrf.md): one integer (decimal, hex), short forms (``a.b``,
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


def host_is_this_machine(host: str) -> bool:
    """Whether a connection to *host* (a literal in any spelling) stays on this machine.

    Loopback, unspecified (0.0.0.0 and [::] reach local listeners) and the IPv6 forms that
    carry them. Numeric IPv4 spellings are read as glibc does (``inet_aton``: a local
    parse, no lookup). Host names are never this machine here: nothing resolves them.
    """
    text = host.strip("[]").split("%", 1)[0]
    address: IPAddress | None
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        try:
            address = ipaddress.IPv4Address(socket.inet_aton(text.rstrip(".")))
        except OSError:
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
#: body is built with :func:`conformance.events.target_body`.
FIELDS: Final[tuple[Literal["callback_url", "webhook.url"], ...]] = ("callback_url", "webhook.url")


# -- fixture vectors -----------------------------------------------------------------------


@dataclass(frozen=True)
class UrlVector:
    """One vector of ``fixtures/callback_urls.yaml``, with the requirement it exercises.

    ``template`` still holds the placeholders (``{receiver}``...): :meth:`render` fills
    them in once the receiver runs.
    """

    template: str
    verdict: str
    rule: str
    why: str
    requirement_ids: tuple[str, ...]
    length: int | None = None

    @property
    def case_id(self) -> str:
        """A readable parametrisation id, e.g. ``private-10/8-http://10.0.0.1:9/-400``."""
        shown = self.template.replace("{receiver_authority}", "RECV").replace("{receiver}", "RECV")
        shown = shown.encode("unicode_escape").decode("ascii")
        if self.length is not None:
            shown = f"{shown.replace('{pad}', '')}({self.length}-chars)"
        return f"{self.rule}-{shown[:60]}-{'400' if self.verdict == 'reject' else 'accepted'}"

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


def _has_leading_zero_part(host: str) -> bool:
    return any(len(p) > 1 and p.startswith("0") and p[1:2].isdigit() for p in host.split("."))


def _carried_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address any embedding form (mapped, translated, tunnelled) carries."""
    value = int(address)
    for network in _LOW32_FORMS:
        if address in network:
            return ipaddress.IPv4Address(value & 0xFFFFFFFF)
    if address in _SIX_TO_FOUR:
        return ipaddress.IPv4Address((value >> 80) & 0xFFFFFFFF)
    if address in _TEREDO:
        return ipaddress.IPv4Address(~value & 0xFFFFFFFF)
    return None


_LOW32_FORMS: Final = tuple(
    ipaddress.IPv6Network(n)
    for n in ("::ffff:0:0/96", "::/96", "::ffff:0:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48")
)
_SIX_TO_FOUR: Final = ipaddress.IPv6Network("2002::/16")
_TEREDO: Final = ipaddress.IPv6Network("2001::/32")


def _embeds_public_ipv4(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if not isinstance(address, ipaddress.IPv6Address):
        return False
    embedded = _carried_ipv4(address)
    if embedded is None:
        return False
    match = _longest_match(embedded)
    return match is None or match.public is True


#: Vectors whose requirement is not the one their rule suggests (by template).
_OVERRIDES: Final[dict[str, tuple[str, ...]]] = {
    "http:/{receiver_authority}/repairable": ("URL-FORM-03",),
    "http://%31%32%37.0.0.2:9/": ("URL-FORM-05",),
    "http://127。0。0。2:9/": ("URL-FORM-06",),
    "http://①②⑦.0.0.2:9/": ("URL-FORM-06",),
    "http://169.254.43518:9/": ("URL-LINK-02",),
    "http://192.88.99.1:9/": ("URL-DEPR-01",),
    "{receiver}/len#{pad}": ("URL-LEN-03",),
    "{receiver}/hook": ("URL-SCHEME-01",),
    "{receiver}/hook?attempt=1&x=%2F": ("URL-SCHEME-01",),
    "{receiver}/": ("URL-SCHEME-01",),
    "{receiver}/p%C3%A4th/with%20escapes": ("URL-SCHEME-01",),
    "HTTP://{receiver_authority}/upper-scheme": ("URL-SCHEME-04",),
    "hTTp://{receiver_authority}/mixed-scheme": ("URL-SCHEME-04",),
    "https://{receiver_authority}/tls": ("URL-SCHEME-02",),
    "{receiver}/len?pad={pad}@2048": ("URL-LEN-01",),
}

_RULE_IDS: Final = {
    "scheme": "URL-SCHEME-03",
    "length": "URL-LEN-02",
    "host-missing": "URL-RESOLVE-07",
    "invalid-ip": "URL-FORM-05",
    "syntax": "URL-FORM-05",
    "backslash": "URL-FORM-05",
    "port": "URL-FORM-02",
    "characters": "URL-FORM-04",
    "unresolvable": "URL-RESOLVE-01",
}


def vector_requirements(row: dict[str, Any]) -> tuple[str, ...] | None:
    """The catalog ids a fixture vector exercises; None when the suite must not submit it.

    Not submitted: public addresses (``deliverable: false``), vectors that need names
    the suite does not serve (``requires``), ``localhost`` (URL-RESOLVE-06), spellings a
    decimal-reading parser turns public, embeddings of a public address, and accepted
    vectors no stated rule decides (userinfo, fragments, non-ASCII paths).
    """
    template = str(row.get("url") or row.get("url_template"))
    if row.get("requires") or (row["verdict"] == "accept" and not row.get("deliverable")):
        return None
    key = template if row.get("length") != MAX_URL_LENGTH else f"{template}@{MAX_URL_LENGTH}"
    if key in _OVERRIDES:
        return _OVERRIDES[key]
    if row["verdict"] == "accept":
        return None
    host = _host_of(template)
    if host.lower().rstrip(".") == "localhost" or _has_leading_zero_part(host):
        return None
    if _embeds_public_ipv4(host):
        return None
    rule = str(row["rule"])
    if rule in _RULE_IDS:
        return (_RULE_IDS[rule],)
    if rule == "host-syntax":
        # Malformed names under .invalid: refused as malformed or as unresolvable.
        return ("URL-RESOLVE-01",) if host.endswith(".invalid") else ("URL-FORM-05",)
    if rule == "zone-id":
        return ("URL-LINK-03",)
    return _address_requirement(host, rule)


def _address_requirement(host: str, rule: str) -> tuple[str, ...] | None:
    try:
        address: IPAddress = ipaddress.ip_address(host)
    except ValueError:
        try:
            address = ipaddress.IPv4Address(socket.inet_aton(host.rstrip(".")))
        except OSError:
            return None
        if address.version == 4 and address.is_loopback:
            return ("URL-LOOP-03",)  # a numeric alternative spelling of loopback
    entry = _longest_match(address)
    if entry is None:
        return None
    if entry.public is None or entry.rule in _EMBEDDING_RULES:
        return (_V6_RULE_IDS[rule],) if rule in _V6_RULE_IDS else None
    found = range_requirement(entry)
    return None if found is None else (found,)


@cache
def fixture_vectors() -> tuple[UrlVector, ...]:
    """The fixture's vectors the suite submits, each with its requirement ids."""
    data = genapi_spec.load_fixture("callback_urls.yaml")
    vectors: list[UrlVector] = []
    for row in data["vectors"]:
        ids = vector_requirements(row)
        if ids is None:
            continue
        vectors.append(
            UrlVector(
                template=str(row.get("url") or row.get("url_template")),
                verdict=str(row["verdict"]),
                rule=str(row["rule"]),
                why=str(row["why"]),
                requirement_ids=ids,
                length=row.get("length"),
            )
        )
    return tuple(vectors)
