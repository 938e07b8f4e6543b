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
"""

from __future__ import annotations

import ipaddress
from typing import Literal

import httpx

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


class EgressRefused(httpx.TransportError):
    """The transport would not open a connection for this request (nothing was sent)."""


def _is_loopback(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    # Explicit ranges, not ipaddress.is_loopback (see addresses.py on library verdicts).
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped in _LOOPBACK_V4
        return address == _LOOPBACK_V6
    return address in _LOOPBACK_V4


class GuardedTransport(httpx.AsyncBaseTransport):
    """An httpx transport that dials the pinned address and, by default, only loopback.

    ``inner`` is the transport that really connects (an :class:`httpx.AsyncHTTPTransport`
    by default, without proxies and without retries); tests may pass their own.
    """

    def __init__(
        self, egress: str = "loopback", inner: httpx.AsyncBaseTransport | None = None
    ) -> None:
        if egress not in EGRESS_MODES:
            raise ValueError(f"egress must be one of {EGRESS_MODES}, not {egress!r}")
        self.egress = egress
        self._inner = inner if inner is not None else httpx.AsyncHTTPTransport(retries=0)

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
        return await self._inner.handle_async_request(pinned)

    async def aclose(self) -> None:
        await self._inner.aclose()


def make_delivery_client(timeout_s: float, egress: str = "loopback") -> httpx.AsyncClient:
    """The client webhook deliveries are sent with.

    Redirects are not followed (spec §6 "Redirects: not followed"; a 3xx is the target's
    reply and counts as a failed attempt). Proxy environment variables and ``.netrc`` are
    ignored (``trust_env=False``): the connection goes to the pinned address. ``timeout_s``
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
    )
