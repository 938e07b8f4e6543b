"""Name resolution for callback hosts, always bounded by a timeout.

Spec §4: "The hostname must resolve to a public address. A hostname that does not resolve
is rejected." Every resolver here answers the full list of addresses (A and AAAA) so that
the policy can require every one of them to be public, and raises :class:`HostNotResolved`
for NXDOMAIN, an empty answer and a timeout alike (the spec does not distinguish them).

Nothing is cached: the policy resolves at submit and again at redeliver (spec §3, a host
that now resolves to a private address gives 400), so a rebinding must be seen.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import dns.asyncresolver
import dns.exception
import dns.rdatatype
import dns.resolver

from reference.netguard.addresses import IPAddress

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "DnsServerResolver",
    "HostNotResolved",
    "HostsFileResolver",
    "Resolver",
    "SystemResolver",
]

DEFAULT_TIMEOUT_S = 2.0


class HostNotResolved(Exception):
    """The name has no address: NXDOMAIN, no A/AAAA answer, or no answer in time."""

    def __init__(self, host: str, why: str, *, timed_out: bool = False) -> None:
        super().__init__(f"{host} does not resolve ({why})")
        self.host = host
        self.why = why
        #: No answer came in time (rather than an answer saying there is no address).
        self.timed_out = timed_out


@runtime_checkable
class Resolver(Protocol):
    """Resolves a host name to every address it has (IPv4 and IPv6), within a timeout."""

    async def resolve(self, host: str) -> list[IPAddress]: ...


def _unique(addresses: Sequence[IPAddress]) -> list[IPAddress]:
    """Keep the first occurrence of each address, in answer order."""
    return list(dict.fromkeys(addresses))


class SystemResolver:
    """The operating system's resolver (``getaddrinfo``), run in a thread, bounded in time.

    A lookup that outlives the timeout is abandoned (the thread finishes in the background;
    ``getaddrinfo`` cannot be cancelled) and reported as not resolving.
    """

    def __init__(self, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s

    async def resolve(self, host: str) -> list[IPAddress]:
        loop = asyncio.get_running_loop()
        try:
            infos = await asyncio.wait_for(
                loop.getaddrinfo(host, None, type=socket.SOCK_STREAM), self.timeout_s
            )
        except TimeoutError as exc:
            raise HostNotResolved(
                host, f"no answer within {self.timeout_s:g} s", timed_out=True
            ) from exc
        except (socket.gaierror, UnicodeError) as exc:
            raise HostNotResolved(host, str(exc)) from exc
        addresses: list[IPAddress] = []
        for family, _type, _proto, _canon, sockaddr in infos:
            if family in (socket.AF_INET, socket.AF_INET6):
                # A scope id ("fe80::1%eth0") is dropped: link-local is rejected anyway.
                text = str(sockaddr[0]).split("%", 1)[0]
                addresses.append(ipaddress.ip_address(text))
        if not addresses:
            raise HostNotResolved(host, "no IPv4 or IPv6 address")
        return _unique(addresses)


class HostsFileResolver:
    """Names from a hosts-format file (``ADDRESS NAME [ALIAS...]``), re-read on every lookup.

    Re-reading lets a test rebind a name between submit and redeliver. Names the file does
    not list go to ``fallback`` (if given), else do not resolve. Matching ignores case and a
    trailing dot.
    """

    def __init__(self, path: Path | str, fallback: Resolver | None = None) -> None:
        # No timeout of its own: reading a local file is bounded; the fallback has one.
        self.path = Path(path)
        self.fallback = fallback

    def lookup_file(self, host: str) -> list[IPAddress]:
        """Every address the file gives ``host``, in file order (empty: not listed)."""
        wanted = host.rstrip(".").lower()
        found: list[IPAddress] = []
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return found
        for line in text.splitlines():
            fields = line.split("#", 1)[0].split()
            if len(fields) < 2:
                continue
            names = {name.rstrip(".").lower() for name in fields[1:]}
            if wanted in names:
                try:
                    found.append(ipaddress.ip_address(fields[0]))
                except ValueError:
                    continue  # a malformed line says nothing about this name
        return _unique(found)

    async def resolve(self, host: str) -> list[IPAddress]:
        found = self.lookup_file(host)
        if found:
            return found
        if self.fallback is None:
            raise HostNotResolved(host, f"not listed in {self.path.name}")
        return await self.fallback.resolve(host)


class DnsServerResolver:
    """Asks one DNS server (A and AAAA), e.g. the one the suite runs on loopback.

    The system configuration (``/etc/resolv.conf``, search domains) is not used, and
    nothing is cached.
    """

    def __init__(self, host: str, port: int, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.host = host
        self.port = port
        self.timeout_s = timeout_s

    def _resolver(self) -> dns.asyncresolver.Resolver:
        resolver = dns.asyncresolver.Resolver(configure=False)
        resolver.nameservers = [self.host]
        resolver.port = self.port
        resolver.timeout = self.timeout_s
        resolver.lifetime = self.timeout_s
        resolver.cache = None
        return resolver

    async def resolve(self, host: str) -> list[IPAddress]:
        resolver = self._resolver()
        name = host if host.endswith(".") else f"{host}."

        async def query(rdtype: dns.rdatatype.RdataType) -> list[IPAddress]:
            answer = await resolver.resolve(
                name, rdtype, search=False, raise_on_no_answer=False, lifetime=self.timeout_s
            )
            if answer.rrset is None:
                return []
            return [ipaddress.ip_address(rdata.address) for rdata in answer.rrset]

        try:
            # One after the other, under one deadline: NXDOMAIN on A ends the lookup.
            async with asyncio.timeout(self.timeout_s):
                v4 = await query(dns.rdatatype.A)
                v6 = await query(dns.rdatatype.AAAA)
        except dns.resolver.NXDOMAIN as exc:
            raise HostNotResolved(host, "NXDOMAIN") from exc
        except (TimeoutError, dns.exception.Timeout) as exc:
            raise HostNotResolved(
                host, f"no answer within {self.timeout_s:g} s", timed_out=True
            ) from exc
        except dns.exception.DNSException as exc:
            raise HostNotResolved(host, f"DNS error: {exc}") from exc
        addresses = [*v4, *v6]
        if not addresses:
            raise HostNotResolved(host, "no A or AAAA record")
        return _unique(addresses)
