"""Faults of the callback URL rules (spec §2, §4, §7), one rule each.

The suite's URL checks (``conformance/checks/test_url_*.py``) must catch each of these;
each names the requirement id it breaks. (The faults of target selection act, and are
declared, in ``targets.py``.)
A *waiver* accepts a URL that netguard refused for one rule only, as a service that
forgot that rule would: it then connects where the URL points (the egress guard still
keeps every connection on loopback). A *refusal* refuses a URL netguard accepted. With
no fault switched on, :func:`active` is one test of an empty set and nothing else here
runs.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

import httpx

from reference.aio import run_db
from reference.errors import ApiError
from reference.fault import Fault, Faults, declared_in
from reference.netguard import CallbackPolicy, CallbackRejected, HostNotResolved, ValidatedTarget
from reference.netguard.urls import parse_ipv4_host

from .attempts import Attempts
from .dispatcher import AttemptSender
from .envelopes import timestamp_now
from .records import DeliveryRow
from .sender import AttemptResult

__all__ = [
    "DECLARED",
    "active",
    "automatic_sender",
    "on_refused_redeliver",
    "validate",
]

# Faults injected here (``--fault NAME``; the registry, ``reference/faults.py``, collects them).
CALLBACK_SCHEME_UNCHECKED = Fault(
    "callback-scheme-unchecked",
    "URL-SCHEME-03",
    "callback URLs of any scheme pass",
)
CALLBACK_UNRESOLVABLE_ACCEPTED = Fault(
    "callback-unresolvable-accepted",
    "URL-RESOLVE-01",
    "a callback host name that does not resolve is accepted",
)
CALLBACK_NAME_ADDRESS_UNCHECKED = Fault(
    "callback-name-address-unchecked",
    "URL-RESOLVE-02",
    "the addresses a callback host name resolves to are not checked (literals are)",
)
CALLBACK_HOSTLESS_ACCEPTED = Fault(
    "callback-hostless-accepted",
    "URL-RESOLVE-07",
    "a URL without a host is accepted",
)
CALLBACK_LOOPBACK_ACCEPTED = Fault(
    "callback-loopback-accepted",
    "URL-LOOP-01",
    "dotted IPv4 loopback hosts (127.0.0.0/8) are accepted",
)
CALLBACK_IPV6_LOOPBACK_ACCEPTED = Fault(
    "callback-ipv6-loopback-accepted",
    "URL-LOOP-02",
    "the [::1] host is accepted",
)
CALLBACK_IPV4_SPELLING_UNCHECKED = Fault(
    "callback-ipv4-spelling-unchecked",
    "URL-LOOP-03",
    "numeric spellings of loopback (127.2, 2130706434, 0x7f000002) are accepted",
)
CALLBACK_PRIVATE_172_ACCEPTED = Fault(
    "callback-private-172-accepted",
    "URL-PRIV-02",
    "172.16.0.0/12 hosts are accepted",
)
CALLBACK_PRIVATE_192_ACCEPTED = Fault(
    "callback-private-192-accepted",
    "URL-PRIV-03",
    "192.168.0.0/16 hosts are accepted",
)
CALLBACK_SHARED_SPACE_ACCEPTED = Fault(
    "callback-shared-space-accepted",
    "URL-PRIV-04",
    "100.64.0.0/10 hosts (with the metadata address 100.100.100.200) are accepted",
)
CALLBACK_UNIQUE_LOCAL_ACCEPTED = Fault(
    "callback-unique-local-accepted",
    "URL-PRIV-05",
    "fc00::/7 hosts are accepted",
)
CALLBACK_LINK_LOCAL_ACCEPTED = Fault(
    "callback-link-local-accepted",
    "URL-LINK-01",
    "169.254.0.0/16 hosts are accepted",
)
CALLBACK_METADATA_ACCEPTED = Fault(
    "callback-metadata-accepted",
    "URL-LINK-02",
    "the metadata host 169.254.169.254 passes",
)
CALLBACK_IPV6_LINK_LOCAL_ACCEPTED = Fault(
    "callback-ipv6-link-local-accepted",
    "URL-LINK-03",
    "fe80::/10 hosts are accepted",
)
CALLBACK_IPV6_METADATA_ACCEPTED = Fault(
    "callback-ipv6-metadata-accepted",
    "URL-LINK-04",
    "[fd00:ec2::254] is accepted",
)
CALLBACK_MAPPED_UNCHECKED = Fault(
    "callback-mapped-unchecked",
    "URL-MAPPED-01",
    "IPv4-mapped IPv6 hosts are accepted",
)
CALLBACK_UNSPECIFIED_ACCEPTED = Fault(
    "callback-unspecified-accepted",
    "URL-UNSPEC-01",
    "0.0.0.0/8 hosts (0.0.0.0 included) are accepted",
)
CALLBACK_IPV6_UNSPECIFIED_ACCEPTED = Fault(
    "callback-ipv6-unspecified-accepted",
    "URL-UNSPEC-02",
    "the [::] host is accepted",
)
CALLBACK_IPV4_SPECIAL_ACCEPTED = Fault(
    "callback-ipv4-special-accepted",
    "URL-IANA-01",
    "IPv4 documentation, benchmarking, IETF, reserved and broadcast hosts are accepted",
)
CALLBACK_IPV6_SPECIAL_ACCEPTED = Fault(
    "callback-ipv6-special-accepted",
    "URL-IANA-02",
    "IPv6 documentation, discard-only, benchmarking, IETF and SRv6 hosts are accepted",
)
CALLBACK_LENGTH_UNCHECKED = Fault(
    "callback-length-unchecked",
    "URL-LEN-02",
    "callback URLs over 2048 characters pass",
)
WEBHOOK_URL_UNCHECKED = Fault(
    "webhook-url-unchecked",
    "TARGET-BIND-03",
    "webhook.url is not held to the callback URL rules (callback_url still is)",
)
CALLBACK_URL_REPAIRED = Fault(
    "callback-url-repaired",
    "URL-FORM-03",
    "http:/host (one slash) is accepted",
)
CALLBACK_WHITESPACE_STRIPPED = Fault(
    "callback-whitespace-stripped",
    "URL-FORM-04",
    "whitespace and control characters pass",
)
CALLBACK_PARSER_LENIENT = Fault(
    "callback-parser-lenient",
    "URL-FORM-05",
    "backslashes, malformed IPv4 and percent-encoded hosts pass",
)
CALLBACK_UNICODE_HOST_UNCHECKED = Fault(
    "callback-unicode-host-unchecked",
    "URL-FORM-06",
    "hosts with non-ASCII characters pass",
)
CALLBACK_PORT_UNCHECKED = Fault(
    "callback-port-unchecked",
    "URL-FORM-02",
    "port 0 and ports over 65535 pass",
)
CALLBACK_MULTICAST_ACCEPTED = Fault(
    "callback-multicast-accepted",
    "URL-MCAST-01",
    "multicast callback hosts pass",
)
CALLBACK_DEPRECATED_RANGE_ACCEPTED = Fault(
    "callback-deprecated-range-accepted",
    "URL-DEPR-01",
    "fec0::/10, 192.88.99.0/24 pass",
)
CALLBACK_EMBEDDED_IPV4_UNCHECKED = Fault(
    "callback-embedded-ipv4-unchecked",
    "URL-MAPPED-02",
    "IPv4-compatible, SIIT, NAT64, 6to4 and Teredo forms of private IPv4 pass",
)
CALLBACK_ANY_PUBLIC_ADDRESS = Fault(
    "callback-any-public-address",
    "URL-RESOLVE-03",
    "a callback name passes when one of its addresses is public",
)
REGISTERED_URL_UNCHECKED = Fault(
    "registered-url-unchecked",
    "HOOK-URL-01",
    "POST /api/webhooks registers any URL (the callback URL rules are not applied)",
)
CALLBACK_FRAGMENT_NOT_COUNTED = Fault(
    "callback-fragment-not-counted",
    "URL-LEN-03",
    "the fragment is not counted to 2048",
)
CALLBACK_LIMIT_2047 = Fault(
    "callback-limit-2047",
    "URL-LEN-01",
    "callback URLs of 2048 characters are refused",
)
CALLBACK_HTTP_REFUSED = Fault(
    "callback-http-refused",
    "URL-SCHEME-01",
    "http callback URLs are refused",
)
CALLBACK_HTTPS_REFUSED = Fault(
    "callback-https-refused",
    "URL-SCHEME-02",
    "https callback URLs are refused",
)
CALLBACK_SCHEME_CASE_SENSITIVE = Fault(
    "callback-scheme-case-sensitive",
    "URL-SCHEME-04",
    "HTTP:// (upper case) is refused",
)
REDELIVER_SENDS_BEFORE_CHECKING = Fault(
    "redeliver-sends-before-checking",
    "REDLV-VALIDATE-01",
    "redeliver posts to where the target resolves now, then validates (and answers 400)",
)
RETRY_ADDRESS_UNCHECKED = Fault(
    "retry-address-unchecked",
    "URL-RESOLVE-05",
    "retries connect wherever the callback name resolves to then, unchecked",
)
REDELIVER_REFUSAL_SENDS_TO_PINNED = Fault(
    "redeliver-refusal-sends-to-pinned",
    "REDLV-REBIND-02",
    "a redeliver refused for a now-private target still posts to the submit-time address",
)
REDELIVER_REFUSAL_RECORDED = Fault(
    "redeliver-refusal-recorded",
    "REDLV-REBIND-03",
    "a redeliver refused for a now-private target records a failed attempt",
)
BAD_TARGET_422 = Fault(
    "bad-target-422",
    "TARGET-URL-01",
    "a callback target failing validation gets 422",
)
SCHEME_REFUSED_422 = Fault(
    "callback-scheme-422",
    "ERR-400-01",
    "a callback target whose scheme is neither http nor https is answered 422",
)
UNRESOLVABLE_502 = Fault(
    "callback-unresolvable-502",
    "ERR-400-02",
    "a callback host name that does not resolve is answered 502 (taken for an upstream error)",
)
LOOKUP_TIMEOUT_504 = Fault(
    "callback-lookup-timeout-504",
    "URL-RESOLVE-04",
    "a callback host name whose DNS lookup times out is answered 504, not 400",
)
PRIVATE_403 = Fault(
    "callback-private-403",
    "ERR-400-03",
    "a callback target in a private range (10/8, 172.16/12, 192.168/16) is answered 403",
)
TOO_LONG_414 = Fault(
    "callback-too-long-414",
    "ERR-400-04",
    "a callback target over 2048 characters is answered 414 (URI Too Long)",
)
CALLBACK_NON_STRING_ACCEPTED = Fault(
    "callback-non-string-accepted",
    "URL-FORM-07",
    "a callback_url that is not a string is accepted (as its text, unvalidated)",
)
#: Every fault above (what :func:`active` asks about).
DECLARED: Final = declared_in(globals())


@dataclass(frozen=True)
class _Seen:
    """What a waiver decides on: netguard's rule, the host as written, its address."""

    rule: str
    host: str
    address: ipaddress.IPv4Address | ipaddress.IPv6Address | None
    spelled: bool  # a numeric IPv4 host other than the dotted quad (127.2, 2130706434)
    where: str
    url: str = ""
    reason: str = ""
    resolved: tuple[str, ...] = ()  # the addresses a host name resolved to

    @property
    def v4(self) -> bool:
        return isinstance(self.address, ipaddress.IPv4Address)

    @property
    def v6(self) -> bool:
        return isinstance(self.address, ipaddress.IPv6Address)

    @property
    def name(self) -> bool:
        return self.address is None


_LINK_LOCAL_V4: Final = ipaddress.ip_network("169.254.0.0/16")
_RELAY_ANYCAST: Final = ipaddress.ip_network("192.88.99.0/24")
_TRANSLATED_RULES: Final = frozenset({"ipv4-compatible", "siit", "nat64", "6to4", "teredo"})
_ONE_SLASH: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:/?[^/]")
_SHARED_V4: Final = ipaddress.ip_network("100.64.0.0/10")
_IANA_V4_RULES: Final = frozenset(
    {"ietf-protocol", "documentation", "benchmarking", "reserved", "broadcast"}
)
_IANA_V6_RULES: Final = frozenset(
    {"documentation", "discard-only", "dummy", "benchmarking", "ietf-protocol", "srv6"}
)
#: Rules decided by the URL's form rather than by an address.
_FORM_RULES: Final = frozenset(
    {"syntax", "length", "characters", "backslash", "scheme", "host-missing", "port"}
    | {"zone-id", "host-syntax", "invalid-ip", "unresolvable"}
)

#: Waivers: fault → the refusals it lets through (spec §4 callback URL rules).
_WAIVERS: Final[Mapping[Fault, Callable[[_Seen], bool]]] = MappingProxyType(
    {
        CALLBACK_SCHEME_UNCHECKED: lambda s: s.rule == "scheme",
        CALLBACK_UNRESOLVABLE_ACCEPTED: lambda s: s.rule == "unresolvable",
        CALLBACK_NAME_ADDRESS_UNCHECKED: lambda s: s.name and s.rule not in _FORM_RULES,
        CALLBACK_HOSTLESS_ACCEPTED: lambda s: s.rule == "host-missing",
        CALLBACK_LOOPBACK_ACCEPTED: lambda s: s.rule == "loopback" and s.v4 and not s.spelled,
        CALLBACK_IPV6_LOOPBACK_ACCEPTED: lambda s: s.rule == "loopback" and s.v6,
        CALLBACK_IPV4_SPELLING_UNCHECKED: lambda s: s.rule == "loopback" and s.spelled,
        CALLBACK_PRIVATE_172_ACCEPTED: lambda s: s.rule == "private-172.16/12",
        CALLBACK_PRIVATE_192_ACCEPTED: lambda s: s.rule == "private-192.168/16",
        CALLBACK_SHARED_SPACE_ACCEPTED: lambda s: (
            s.v4 and s.address in _SHARED_V4 and s.rule in ("cgnat", "metadata")
        ),
        CALLBACK_UNIQUE_LOCAL_ACCEPTED: lambda s: s.rule == "unique-local",
        CALLBACK_LINK_LOCAL_ACCEPTED: lambda s: s.rule == "link-local" and s.v4,
        CALLBACK_METADATA_ACCEPTED: lambda s: (
            s.rule == "metadata" and s.v4 and s.address in _LINK_LOCAL_V4
        ),
        CALLBACK_IPV6_LINK_LOCAL_ACCEPTED: lambda s: (
            (s.rule == "link-local" and s.v6) or s.rule == "zone-id"
        ),
        CALLBACK_IPV6_METADATA_ACCEPTED: lambda s: s.rule == "metadata" and s.v6,
        CALLBACK_MAPPED_UNCHECKED: lambda s: s.rule == "ipv4-mapped",
        CALLBACK_UNSPECIFIED_ACCEPTED: lambda s: s.v4 and s.rule in ("unspecified", "this-network"),
        CALLBACK_IPV6_UNSPECIFIED_ACCEPTED: lambda s: s.rule == "unspecified" and s.v6,
        CALLBACK_IPV4_SPECIAL_ACCEPTED: lambda s: s.v4 and s.rule in _IANA_V4_RULES,
        CALLBACK_IPV6_SPECIAL_ACCEPTED: lambda s: s.v6 and s.rule in _IANA_V6_RULES,
        CALLBACK_LENGTH_UNCHECKED: lambda s: s.rule == "length",
        WEBHOOK_URL_UNCHECKED: lambda s: s.where == "webhook.url",
        # Interpretations (the suite warns): forms and ranges the spec does not name.
        CALLBACK_URL_REPAIRED: lambda s: (
            s.rule == "host-missing" and _ONE_SLASH.match(s.url) is not None
        ),
        CALLBACK_WHITESPACE_STRIPPED: lambda s: s.rule == "characters",
        CALLBACK_PARSER_LENIENT: lambda s: (
            s.rule in ("backslash", "invalid-ip", "syntax")
            or (s.rule == "host-syntax" and "%" in s.url.split("//", 1)[-1].split("/", 1)[0])
        ),
        CALLBACK_UNICODE_HOST_UNCHECKED: lambda s: (
            not s.url.split("//", 1)[-1].split("/", 1)[0].isascii()
        ),
        CALLBACK_PORT_UNCHECKED: lambda s: s.rule == "port",
        CALLBACK_MULTICAST_ACCEPTED: lambda s: s.rule == "multicast",
        CALLBACK_DEPRECATED_RANGE_ACCEPTED: lambda s: (
            s.rule == "site-local"
            or (s.rule == "reserved" and s.v4 and s.address in _RELAY_ANYCAST)
        ),
        CALLBACK_EMBEDDED_IPV4_UNCHECKED: lambda s: s.rule in _TRANSLATED_RULES,
        CALLBACK_ANY_PUBLIC_ADDRESS: lambda s: s.name and len(s.resolved) > 1,
        REGISTERED_URL_UNCHECKED: lambda s: s.where == "url",
        CALLBACK_FRAGMENT_NOT_COUNTED: lambda s: (
            s.rule == "length" and len(s.url.split("#", 1)[0]) <= 2048
        ),
    }
)

#: Refusals: fault → why an accepted target is refused (None: not refused).
_REFUSALS: Final[Mapping[Fault, Callable[[ValidatedTarget], str | None]]] = MappingProxyType(
    {
        CALLBACK_LIMIT_2047: lambda t: (
            "longer than 2047 characters" if len(t.url) >= 2048 else None
        ),
        CALLBACK_HTTP_REFUSED: lambda t: "http is not allowed" if t.scheme == "http" else None,
        CALLBACK_HTTPS_REFUSED: lambda t: "https is not allowed" if t.scheme == "https" else None,
        CALLBACK_SCHEME_CASE_SENSITIVE: lambda t: (
            "the scheme must be lower case"
            if t.url.split(":", 1)[0] not in ("http", "https")
            else None
        ),
    }
)


def active(faults: Faults) -> bool:
    """Whether any fault of this module is on (the cheap test before :func:`validate`)."""
    return faults.any_on(DECLARED)


def _address(host: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address | None, bool]:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0]), False
    except ValueError:
        pass
    try:
        spelled = parse_ipv4_host(host)
    except ValueError:
        return None, False
    return spelled, spelled is not None


def _seen(rejected: CallbackRejected, url: str, where: str) -> _Seen:
    try:
        host = httpx.URL(url).host
    except httpx.InvalidURL:
        host = ""
    address, spelled = _address(host)
    return _Seen(
        rejected.rule, host, address, spelled, where, url, rejected.reason, rejected.resolved
    )


async def _unchecked(policy: CallbackPolicy, url: str, where: str) -> ValidatedTarget:
    """Where a service that skipped the rule would connect: the literal, else a lookup."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ApiError(400, f"{where} is not a URL: {exc}") from None
    address: Any = _address(parsed.host)[0]
    if address is None and parsed.host:
        try:
            address = (await policy.resolver.resolve(parsed.host))[0]
        except (HostNotResolved, IndexError, TimeoutError):
            address = None
    return ValidatedTarget(
        url=url,
        host=parsed.host,
        port=parsed.port or (443 if parsed.scheme == "https" else 80),
        scheme=parsed.scheme,
        address=str(address) if address is not None else "0.0.0.0",  # noqa: S104 (fails)
    )


def automatic_sender(faults: Faults, policy: CallbackPolicy, send: AttemptSender) -> AttemptSender:
    """How the dispatcher sends an automatic attempt: *send*, to the address validated at
    submit; under RETRY_ADDRESS_UNCHECKED a retry goes wherever the callback name
    resolves to at that moment, unchecked (a name rebound to a private address after
    the submit then gets the retries)."""
    if not faults.on(RETRY_ADDRESS_UNCHECKED):
        return send

    async def resolving_again(
        row: DeliveryRow, *, attempt: int, secret: str, address: str, generation_id: str
    ) -> AttemptResult:
        if attempt > 1:
            address = (await _unchecked(policy, row.target_url, "the retry's target")).address
        return await send(
            row, attempt=attempt, secret=secret, address=address, generation_id=generation_id
        )

    return resolving_again


#: The faults that give one §7 condition of a bad callback target its own status, by
#: the netguard rule that decides the condition.
_STATUS_BY_RULE: Final[tuple[tuple[Fault, Callable[[str], bool], int], ...]] = (
    (SCHEME_REFUSED_422, lambda rule: rule == "scheme", 422),
    (UNRESOLVABLE_502, lambda rule: rule == "unresolvable", 502),
    (PRIVATE_403, lambda rule: rule.startswith("private-"), 403),
    (TOO_LONG_414, lambda rule: rule == "length", 414),
)


def _refusal_status(faults: Faults, rule: str) -> int:
    """The status of a refused callback target: 400 (spec §7), unless a fault of this
    module answers the condition *rule* stands for with another."""
    for fault, matches, status in _STATUS_BY_RULE:
        if faults.on(fault) and matches(rule):
            return status
    return 400


async def validate(
    policy: CallbackPolicy, faults: Faults, url: Any, *, where: str
) -> ValidatedTarget:
    """netguard's validation, with the active faults of this module applied."""
    if not isinstance(url, str) and url is not None and faults.on(CALLBACK_NON_STRING_ACCEPTED):
        return await _unchecked(policy, str(url), where)
    try:
        target = await policy.validate(url)
    except CallbackRejected as rejected:
        if isinstance(url, str):
            seen = _seen(rejected, url, where)
            if any(faults.on(fault) and waive(seen) for fault, waive in _WAIVERS.items()):
                return await _unchecked(policy, url, where)
        status = 422 if faults.on(BAD_TARGET_422) else _refusal_status(faults, rejected.rule)
        if rejected.timed_out and faults.on(LOOKUP_TIMEOUT_504):
            status = 504
        raise ApiError(status, f"{where} is not an allowed callback target: {rejected}") from None
    for fault, refuse in _REFUSALS.items():
        why = refuse(target) if faults.on(fault) else None
        if why is not None:
            raise ApiError(400, f"{where} is not an allowed callback target: {why}")
    return target


async def on_refused_redeliver(
    faults: Faults, policy: CallbackPolicy, attempts: Attempts, row: DeliveryRow, reason: str
) -> None:
    """What the redeliver faults do before the 400 of a target that now fails (spec §3)."""
    address: str | None = None
    if faults.on(REDELIVER_SENDS_BEFORE_CHECKING):
        address = (await _unchecked(policy, row.target_url, "target")).address
    elif faults.on(REDELIVER_REFUSAL_SENDS_TO_PINNED):
        address = row.address
    if address is not None:
        generation_id = row.generation_id or "unknown"
        await attempts.manual(
            row, address=address, generation_id=generation_id, trigger="redeliver"
        )
    elif faults.on(REDELIVER_REFUSAL_RECORDED):
        refused = AttemptResult(
            n=row.attempt_count + 1, at=timestamp_now(), status=0, ms=0, error=f"refused: {reason}"
        )
        await run_db(attempts.record_manual, row.id, refused, "redeliver", "failed")
