"""The delivery client's transport: connect only to the validated address, only to loopback.

Two walls stand between a callback URL and the network (deliveries reach loopback only,
unless the service is started with ``--egress any``):

1. **Pinning.** Each request carries the address :class:`~reference.netguard.urls.CallbackPolicy`
   checked, in ``request.extensions["genapi.pinned_address"]``. The transport connects to
   that IP and nothing else: the URL's host is swapped for the IP, the ``Host`` header keeps
   the URL's host, and for https the TLS server name (``sni_hostname``) is the URL's host
   too. There is no second DNS lookup, so a name rebound after validation changes nothing.
   A request without a pinned address is refused.
2. **Egress guard.** Unless built with ``egress="any"``, the transport refuses every
   destination outside loopback (127.0.0.0/8, ::1) whatever the validator decided, before
   any socket is opened. The reference's default and test configurations use loopback
   egress; ``"any"`` exists only behind an explicit flag for a real deployment.

Refusals raise :class:`EgressRefused`, an :class:`httpx.TransportError`, so a delivery
loop that records transport errors as failed attempts records these the same way.

Connections are kept alive and reused, one pool per (scheme, pinned address, port, URL
host): a pooled connection was opened to the very address this request is pinned to (and
for https was verified for the same server name), so reuse never bypasses the pin, and
both walls are checked for every request before any pool is looked at. A pool that has
been idle for ``idle_s`` (2 s by default, under the 5 s keep-alive of common servers, so a
reused connection is rarely one the server is closing) is closed by a timer, and at most
``max_pools`` pools are kept (the least recently used idle one goes first).
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Literal

import httpcore  # noqa: F401 - see below
import httpx

# httpx imports httpcore only when its first transport is made: here, at start-up, not
# during the first delivery (measured: ~180 ms of the event loop, in the latency's tail).

__all__ = [
    "EGRESS_MODES",
    "PINNED_ADDRESS_EXTENSION",
    "EgressRefused",
    "GuardedTransport",
    "make_delivery_client",
]

#: The request extension that names the address to connect to.
PINNED_ADDRESS_EXTENSION = "genapi.pinned_address"
Egress = Literal["loopback", "any"]
EGRESS_MODES: tuple[str, ...] = ("loopback", "any")

_LOOPBACK_V4 = ipaddress.IPv4Network("127.0.0.0/8")
_LOOPBACK_V6 = ipaddress.IPv6Address("::1")

#: Seconds a target's pool may sit idle before its connections are closed.
IDLE_CLOSE_S = 2.0
#: Idle keep-alive connections kept per target. Few: httpcore's pool polls every idle
#: connection on each request and response (32 of them cost more CPU per delivery than a
#: fresh connection each); a burst beyond this opens connections that close after use.
KEEPALIVE_PER_TARGET = 8
#: Targets with a pool at once; past this, the least recently used idle pool is closed.
MAX_POOLS = 32

#: (scheme, pinned address, port, URL host): what a reusable connection must match.
PoolKey = tuple[str, str, int, str]


class EgressRefused(httpx.TransportError):
    """The transport would not open a connection for this request (nothing was sent)."""


def _is_loopback(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    # Explicit ranges, not ipaddress.is_loopback (see addresses.py on library verdicts).
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped in _LOOPBACK_V4
        return address == _LOOPBACK_V6
    return address in _LOOPBACK_V4


@dataclass
class _Pool:
    """The keep-alive connections to one target, and whether any is in use."""

    transport: httpx.AsyncBaseTransport
    last_used: float = field(default_factory=time.monotonic)
    active: int = 0


class _ReleasingStream(httpx.AsyncByteStream):
    """A response body that tells its pool when the exchange is over (body closed)."""

    def __init__(self, inner: httpx.AsyncByteStream, pool: _Pool) -> None:
        self._inner = inner
        self._pool: _Pool | None = pool

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            pool, self._pool = self._pool, None
            if pool is not None:  # aclose may be called twice; release once
                pool.active -= 1
                pool.last_used = time.monotonic()


class GuardedTransport(httpx.AsyncBaseTransport):
    """An httpx transport that dials the pinned address and, by default, only loopback.

    ``inner`` replaces the per-target pools with one transport for every request (tests
    pass a recording one); by default each target gets an :class:`httpx.AsyncHTTPTransport`
    of its own (keep-alive, no proxies, no retries).
    """

    def __init__(
        self,
        egress: str = "loopback",
        inner: httpx.AsyncBaseTransport | None = None,
        *,
        idle_s: float = IDLE_CLOSE_S,
        max_pools: int = MAX_POOLS,
    ) -> None:
        if egress not in EGRESS_MODES:
            raise ValueError(f"egress must be one of {EGRESS_MODES}, not {egress!r}")
        self.egress = egress
        self._inner = inner
        self._idle_s = idle_s
        self._max_pools = max_pools
        self._pools: dict[PoolKey, _Pool] = {}
        self._sweep_timer: asyncio.TimerHandle | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self._tls: ssl.SSLContext | None = None

    @property
    def pool_keys(self) -> list[PoolKey]:
        """The targets that have a pool now (what a test checks reuse against)."""
        return list(self._pools)

    def check(self, request: httpx.Request) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
        """The address this request may be sent to, or :class:`EgressRefused`."""
        pinned = request.extensions.get(PINNED_ADDRESS_EXTENSION)
        if not isinstance(pinned, str):
            raise EgressRefused(
                f"refusing {request.method} {request.url.host}: no validated address "
                f"(request extension {PINNED_ADDRESS_EXTENSION!r})",
                request=request,
            )
        try:
            address = ipaddress.ip_address(pinned)
        except ValueError:
            raise EgressRefused(
                f"refusing {request.method} {request.url.host}: pinned address {pinned!r} "
                "is not an IP address",
                request=request,
            ) from None
        if self.egress == "loopback" and not _is_loopback(address):
            raise EgressRefused(
                f"egress guard: refusing to connect to {address} for {request.url.host} "
                "(this configuration allows loopback destinations only)",
                request=request,
            )
        return address

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        address = self.check(request)
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        extensions = dict(request.extensions)
        if request.url.scheme == "https":
            # TLS keeps verifying the URL's host name, not the IP dialled.
            extensions["sni_hostname"] = request.url.raw_host.decode("ascii")
        pinned = httpx.Request(
            request.method,
            request.url.copy_with(host=str(address)),
            # Built from the original URL: carries Host (the URL's host), never re-derived.
            headers=request.headers,
            stream=request.stream,
            extensions=extensions,
        )
        if self._inner is not None:
            return await self._inner.handle_async_request(pinned)
        key = (pinned.url.scheme, str(address), pinned.url.port or 0, request.url.host)
        pool = self._pool_for(key)
        pool.active += 1
        try:
            response = await pool.transport.handle_async_request(pinned)
        except BaseException:
            pool.active -= 1
            pool.last_used = time.monotonic()
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_ReleasingStream(response.stream, pool),
            extensions=response.extensions,
        )

    def _pool_for(self, key: PoolKey) -> _Pool:
        # Never awaits: a pool found or made here is counted active before anything else
        # runs, so neither the sweep nor another request can close it or make a second.
        pool = self._pools.pop(key, None)
        if pool is None:
            if len(self._pools) >= self._max_pools:
                self._close_least_recently_used()
            limits = httpx.Limits(
                max_connections=None,  # the dispatcher bounds concurrent deliveries
                max_keepalive_connections=KEEPALIVE_PER_TARGET,
                keepalive_expiry=self._idle_s,
            )
            if self._tls is None:
                # Made once and shared: building TLS settings (loading the CA bundle)
                # costs about 30 ms of the event loop, too much for every new target.
                self._tls = httpx.create_ssl_context()
            pool = _Pool(httpx.AsyncHTTPTransport(verify=self._tls, retries=0, limits=limits))
        self._pools[key] = pool  # re-inserted last: the dict is in least-recent-use order
        self._arm_sweep()
        return pool

    def _close_least_recently_used(self) -> None:
        for key, pool in self._pools.items():
            if pool.active == 0:
                del self._pools[key]
                self._close_later(pool.transport)
                return

    def _close_later(self, transport: httpx.AsyncBaseTransport) -> None:
        task = asyncio.ensure_future(transport.aclose())
        self._closing.add(task)  # held until done: a bare task may be collected
        task.add_done_callback(self._closing.discard)

    def _arm_sweep(self) -> None:
        if self._sweep_timer is None:
            loop = asyncio.get_running_loop()
            self._sweep_timer = loop.call_later(self._idle_s, self._sweep)

    def _sweep(self) -> None:
        """Close the pools idle for ``idle_s``; look again while any pool is left."""
        self._sweep_timer = None
        now = time.monotonic()
        for key, pool in list(self._pools.items()):
            if pool.active == 0 and now - pool.last_used >= self._idle_s:
                del self._pools[key]
                self._close_later(pool.transport)
        if self._pools:
            self._arm_sweep()

    async def aclose(self) -> None:
        if self._sweep_timer is not None:
            self._sweep_timer.cancel()
            self._sweep_timer = None
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            await pool.transport.aclose()
        if self._closing:
            await asyncio.wait(self._closing)
        if self._inner is not None:
            await self._inner.aclose()


def make_delivery_client(timeout_s: float, egress: str = "loopback") -> httpx.AsyncClient:
    """The client webhook deliveries are sent with.

    Redirects are not followed (spec §6 "Redirects: not followed"; a 3xx is the target's
    reply and counts as a failed attempt); cookies a target sets are never kept. Proxy
    environment variables and ``.netrc`` are ignored (``trust_env=False``): the connection
    goes to the pinned address. ``timeout_s``
    bounds each phase (connect, write, read, pool); a caller enforcing spec §6's 10 s per
    attempt overall should also wrap the call in a deadline.

    Usage::

        target = await policy.validate(url)
        await client.post(target.url, content=body, headers=headers,
                          extensions={"genapi.pinned_address": target.address})
    """
    return httpx.AsyncClient(
        transport=GuardedTransport(egress=egress),
        timeout=httpx.Timeout(timeout_s),
        follow_redirects=False,
        trust_env=False,
        # No cookies: a cookie one receiver sets must never ride on a later delivery (of
        # another account, to a target under the same domain).
        cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])),
    )
