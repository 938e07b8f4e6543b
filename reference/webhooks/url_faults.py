"""Faults of the callback URL rules and target selection (spec §2, §4), one rule each.

The suite's URL and target checks (``conformance/checks/test_url_*.py``,
``test_target_*.py``) must catch each of these (``reference/faults.py`` registers them
with the requirement id each one breaks). A *waiver* accepts a URL that netguard refused
for one rule only, as a service that forgot that rule would: it then connects where the
URL points (the egress guard still keeps every connection on loopback). A *refusal*
refuses a URL netguard accepted. With no fault of this module on, :func:`active` is one
set intersection and nothing else here runs.
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
from reference.faults import Faults
from reference.netguard import CallbackPolicy, CallbackRejected, HostNotResolved, ValidatedTarget
from reference.netguard.urls import parse_ipv4_host

from .attempts import Attempts
from .envelopes import timestamp_now
from .records import DeliveryRow
from .sender import AttemptResult

__all__ = [
    "NAMES",
    "active",
    "listed_events",
    "on_refused_redeliver",
    "order",
    "skips_loser",
    "validate",
]


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

#: Waivers: fault name → the refusals it lets through (spec §4 callback URL rules).
_WAIVERS: Final[Mapping[str, Callable[[_Seen], bool]]] = MappingProxyType(
    {
        "callback-scheme-unchecked": lambda s: s.rule == "scheme",
        "callback-unresolvable-accepted": lambda s: s.rule == "unresolvable",
        "callback-name-address-unchecked": lambda s: s.name and s.rule not in _FORM_RULES,
        "callback-hostless-accepted": lambda s: s.rule == "host-missing",
        "callback-loopback-accepted": lambda s: s.rule == "loopback" and s.v4 and not s.spelled,
        "callback-ipv6-loopback-accepted": lambda s: s.rule == "loopback" and s.v6,
        "callback-ipv4-spelling-unchecked": lambda s: s.rule == "loopback" and s.spelled,
        "callback-private-172-accepted": lambda s: s.rule == "private-172.16/12",
        "callback-private-192-accepted": lambda s: s.rule == "private-192.168/16",
        "callback-shared-space-accepted": lambda s: (
            s.v4 and s.address in _SHARED_V4 and s.rule in ("cgnat", "metadata")
        ),
        "callback-unique-local-accepted": lambda s: s.rule == "unique-local",
        "callback-link-local-accepted": lambda s: s.rule == "link-local" and s.v4,
        "callback-metadata-accepted": lambda s: (
            s.rule == "metadata" and s.v4 and s.address in _LINK_LOCAL_V4
        ),
        "callback-ipv6-link-local-accepted": lambda s: (
            (s.rule == "link-local" and s.v6) or s.rule == "zone-id"
        ),
        "callback-ipv6-metadata-accepted": lambda s: s.rule == "metadata" and s.v6,
        "callback-mapped-unchecked": lambda s: s.rule == "ipv4-mapped",
        "callback-unspecified-accepted": lambda s: (
            s.v4 and s.rule in ("unspecified", "this-network")
        ),
        "callback-ipv6-unspecified-accepted": lambda s: s.rule == "unspecified" and s.v6,
        "callback-ipv4-special-accepted": lambda s: s.v4 and s.rule in _IANA_V4_RULES,
        "callback-ipv6-special-accepted": lambda s: s.v6 and s.rule in _IANA_V6_RULES,
        "callback-length-unchecked": lambda s: s.rule == "length",
        "webhook-url-unchecked": lambda s: s.where == "webhook.url",
        # Interpretations (the suite warns): forms and ranges the spec does not name.
        "callback-url-repaired": lambda s: (
            s.rule == "host-missing" and _ONE_SLASH.match(s.url) is not None
        ),
        "callback-whitespace-stripped": lambda s: s.rule == "characters",
        "callback-parser-lenient": lambda s: (
            s.rule in ("backslash", "invalid-ip", "syntax")
            or (s.rule == "host-syntax" and "%" in s.url.split("//", 1)[-1].split("/", 1)[0])
        ),
        "callback-unicode-host-unchecked": lambda s: (
            not s.url.split("//", 1)[-1].split("/", 1)[0].isascii()
        ),
        "callback-port-unchecked": lambda s: s.rule == "port",
        "callback-multicast-accepted": lambda s: s.rule == "multicast",
        "callback-deprecated-range-accepted": lambda s: (
            s.rule == "site-local"
            or (s.rule == "reserved" and s.v4 and s.address in _RELAY_ANYCAST)
        ),
        "callback-embedded-ipv4-unchecked": lambda s: s.rule in _TRANSLATED_RULES,
        "callback-any-public-address": lambda s: s.name and " resolves to " in s.reason,
        "registered-url-unchecked": lambda s: s.where == "url",
        "callback-fragment-not-counted": lambda s: (
            s.rule == "length" and len(s.url.split("#", 1)[0]) <= 2048
        ),
    }
)

#: Refusals: fault name → why an accepted target is refused (None: not refused).
_REFUSALS: Final[Mapping[str, Callable[[ValidatedTarget], str | None]]] = MappingProxyType(
    {
        "callback-limit-2047": lambda t: (
            "longer than 2047 characters" if len(t.url) >= 2048 else None
        ),
        "callback-http-refused": lambda t: "http is not allowed" if t.scheme == "http" else None,
        "callback-https-refused": lambda t: "https is not allowed" if t.scheme == "https" else None,
        "callback-scheme-case-sensitive": lambda t: (
            "the scheme must be lower case"
            if t.url.split(":", 1)[0] not in ("http", "https")
            else None
        ),
    }
)

#: Target selection (spec §4 rule 1): fault name → the candidate it drops or demotes.
_ORDER_FAULTS: Final = MappingProxyType(
    {
        "registered-webhook-ignored": "drop id",
        "webhook-url-ignored": "drop url",
        "callback-url-ignored": "drop callback",
        "precedence-callback-over-url": "swap url callback",
    }
)

#: Redeliver to a target that now fails validation (spec §3): what a fault does anyway
#: before the 400.
_REDELIVER_FAULTS: Final = MappingProxyType(
    {
        "redeliver-sends-before-checking": "send to the new address",
        "redeliver-refusal-sends-to-pinned": "send to the address pinned at submit",
        "redeliver-refusal-recorded": "record a failed attempt",
    }
)

#: Every fault name this module implements (``unknown-webhook-id-400``,
#: ``foreign-webhook-id-accepted`` and ``inline-mode-mislabelled`` are asked for in
#: service.py; ``bad-target-422`` here).
NAMES: Final = (
    frozenset(_WAIVERS)
    | frozenset(_REFUSALS)
    | frozenset(_ORDER_FAULTS)
    | {"bad-target-422", "unknown-webhook-id-400", "foreign-webhook-id-accepted"}
    | {"inline-mode-mislabelled"}
    | frozenset(_REDELIVER_FAULTS)
    | {"losing-callback-unchecked", "webhook-without-target-accepted"}
    | {"callback-non-string-accepted", "listed-events-dropped"}
)


def listed_events(faults: Faults, events: tuple[str, ...]) -> tuple[str, ...]:
    """The events a binding subscribes to; under its fault a listed set subscribes to none
    (a placeholder name no event has, so the defaults do not apply either)."""
    return ("(dropped)",) if "listed-events-dropped" in faults.enabled else events


def skips_loser(faults: Faults, candidates: Mapping[str, Any]) -> bool:
    """Whether a callback_url that loses the order (another target won) goes unvalidated."""
    return "losing-callback-unchecked" in faults.enabled and bool(candidates)


def order(faults: Faults, kinds: tuple[str, ...]) -> tuple[str, ...]:
    """The resolution order (``id``, ``url``, ``callback``) with the active faults applied."""
    found = list(kinds)
    for name, change in _ORDER_FAULTS.items():
        if name not in faults.enabled:
            continue
        verb, *what = change.split()
        if verb == "drop" and what[0] in found:
            found.remove(what[0])
        elif verb == "swap" and set(what) <= set(found):
            i, j = found.index(what[0]), found.index(what[1])
            found[i], found[j] = found[j], found[i]
    return tuple(found)


def active(faults: Faults) -> bool:
    """Whether any fault of this module is on (the cheap test before :func:`validate`)."""
    return bool(faults.enabled & NAMES)


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
    return _Seen(rejected.rule, host, address, spelled, where, url, rejected.reason)


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


async def validate(
    policy: CallbackPolicy, faults: Faults, url: Any, *, where: str
) -> ValidatedTarget:
    """netguard's validation, with the active faults of this module applied."""
    if (
        not isinstance(url, str)
        and url is not None
        and "callback-non-string-accepted" in (faults.enabled)
    ):
        return await _unchecked(policy, str(url), where)
    try:
        target = await policy.validate(url)
    except CallbackRejected as rejected:
        if isinstance(url, str):
            seen = _seen(rejected, url, where)
            on = faults.enabled
            if any(name in on and waive(seen) for name, waive in _WAIVERS.items()):
                return await _unchecked(policy, url, where)
        status = 422 if "bad-target-422" in faults.enabled else 400
        raise ApiError(status, f"{where} is not an allowed callback target: {rejected}") from None
    for name, refuse in _REFUSALS.items():
        why = refuse(target) if name in faults.enabled else None
        if why is not None:
            raise ApiError(400, f"{where} is not an allowed callback target: {why}")
    return target


async def on_refused_redeliver(
    faults: Faults, policy: CallbackPolicy, attempts: Attempts, row: DeliveryRow, reason: str
) -> None:
    """What the redeliver faults do before the 400 of a target that now fails (spec §3)."""
    on = faults.enabled
    address: str | None = None
    if "redeliver-sends-before-checking" in on:
        address = (await _unchecked(policy, row.target_url, "target")).address
    elif "redeliver-refusal-sends-to-pinned" in on:
        address = row.address
    if address is not None:
        generation_id = row.generation_id or "unknown"
        await attempts.manual(
            row, address=address, generation_id=generation_id, trigger="redeliver"
        )
    elif "redeliver-refusal-recorded" in on:
        refused = AttemptResult(
            n=row.attempt_count + 1, at=timestamp_now(), status=0, ms=0, error=f"refused: {reason}"
        )
        await run_db(attempts.record_manual, row.id, refused, "redeliver", "failed")
