"""The delivery transport: pinned address, egress guard, no redirects, no proxies.

Real connections go only to a server on 127.0.0.1 (run through scripts/test). Refusals
are proven to happen before any DNS lookup or socket connect.
"""

from __future__ import annotations

import socket
from typing import Any

import anyio
import httpcore
import httpx
import pytest
from scripted_target import Receiver, Reply

from reference.netguard import (
    PINNED_ADDRESS_EXTENSION,
    EgressRefused,
    GuardedTransport,
    make_delivery_client,
)

pytestmark = pytest.mark.anyio

DEADLINE_S = 10.0


def pin(address: str) -> dict[str, Any]:
    return {PINNED_ADDRESS_EXTENSION: address}


class RecordingTransport(httpx.AsyncBaseTransport):
    """Stands in for the real transport: records what it would have sent."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(204)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make any DNS lookup or socket connect fail loudly, and record the attempt."""
    attempts: list[str] = []

    def refuse(name: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            attempts.append(name)
            raise AssertionError(f"{name} was called: the guard let a request through")

        return fail

    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    monkeypatch.setattr(socket, "create_connection", refuse("create_connection"))
    monkeypatch.setattr(socket.socket, "connect", refuse("socket.connect"))
    monkeypatch.setattr(socket.socket, "connect_ex", refuse("socket.connect_ex"))
    monkeypatch.setattr(
        httpcore.AsyncConnectionPool, "handle_async_request", refuse("connection pool")
    )
    return attempts


async def test_delivery_goes_to_the_pinned_address_with_the_url_host_header(
    receiver: Receiver,
) -> None:
    """The name is never resolved (.invalid); the server on the pinned IP sees Host."""
    async with make_delivery_client(5.0) as client:
        url = f"http://hook.example.invalid:{receiver.port}/deliver?x=1"
        with anyio.fail_after(DEADLINE_S):
            response = await client.post(url, content=b"{}", extensions=pin("127.0.0.1"))
    assert response.status_code == 200
    seen = receiver.arrivals()
    assert [(a.method, a.path) for a in seen] == [("POST", "/deliver?x=1")]
    assert seen[0].header("host") == f"hook.example.invalid:{receiver.port}"
    assert seen[0].body == b"{}"


async def test_ipv4_mapped_pin_connects_to_the_ipv4_address(receiver: Receiver) -> None:
    async with make_delivery_client(5.0) as client:
        with anyio.fail_after(DEADLINE_S):
            response = await client.post(
                f"http://[::ffff:127.0.0.1]:{receiver.port}/m", extensions=pin("::ffff:127.0.0.1")
            )
    assert response.status_code == 200
    assert receiver.arrivals()[0].header("host") == f"[::ffff:127.0.0.1]:{receiver.port}"


@pytest.mark.parametrize(
    "address",
    [
        "10.0.0.1",
        "93.184.216.34",
        "169.254.169.254",
        "::ffff:10.0.0.1",
        "2606:4700::1111",
        "fe80::1",
    ],
)
async def test_egress_guard_refuses_non_loopback_without_connecting(
    no_network: list[str], address: str
) -> None:
    """Whatever the validator decided, loopback egress never opens a socket elsewhere."""
    async with make_delivery_client(5.0) as client:
        with pytest.raises(EgressRefused, match="egress guard"):
            await client.post("http://target.example.invalid:9/x", extensions=pin(address))
    assert no_network == []


async def test_egress_guard_refuses_before_the_inner_transport() -> None:
    inner = RecordingTransport()
    transport = GuardedTransport(inner=inner)
    async with httpx.AsyncClient(transport=transport) as client:
        for address in ("10.0.0.1", "93.184.216.34", "0.0.0.0", "::"):  # noqa: S104
            with pytest.raises(EgressRefused):
                await client.get("http://target.test:9/", extensions=pin(address))
    assert inner.requests == []


@pytest.mark.parametrize(
    "extensions", [{}, pin(""), pin("localhost"), {PINNED_ADDRESS_EXTENSION: 1}]
)
async def test_requests_without_a_valid_pinned_address_are_refused(
    no_network: list[str], extensions: dict[str, Any]
) -> None:
    for egress in ("loopback", "any"):
        async with make_delivery_client(5.0, egress=egress) as client:
            with pytest.raises(EgressRefused, match="address"):
                await client.post("http://127.0.0.1:9/x", extensions=extensions)
    assert no_network == []


async def test_any_egress_rewrites_to_the_pinned_address_and_keeps_host_and_sni() -> None:
    """With egress="any" the pin still decides; https keeps the URL host for TLS."""
    inner = RecordingTransport()
    async with httpx.AsyncClient(transport=GuardedTransport("any", inner=inner)) as client:
        await client.post("https://hooks.example.com/a?b", extensions=pin("93.184.216.34"))
        await client.post("http://hooks.example.com:8080/c", extensions=pin("2606:4700::1111"))
    https, http = inner.requests
    assert str(https.url) == "https://93.184.216.34/a?b"
    assert https.headers["host"] == "hooks.example.com"
    assert https.extensions["sni_hostname"] == "hooks.example.com"
    assert str(http.url) == "http://[2606:4700::1111]:8080/c"
    assert http.headers["host"] == "hooks.example.com:8080"
    assert "sni_hostname" not in http.extensions


async def test_loopback_egress_allows_all_of_127_and_ipv6_loopback() -> None:
    inner = RecordingTransport()
    async with httpx.AsyncClient(transport=GuardedTransport(inner=inner)) as client:
        for address in ("127.0.0.1", "127.0.0.2", "127.255.255.254", "::1", "::ffff:127.0.0.9"):
            response = await client.get("http://name.test/", extensions=pin(address))
            assert response.status_code == 204
    assert [r.url.host for r in inner.requests] == [
        "127.0.0.1",
        "127.0.0.2",
        "127.255.255.254",
        "::1",
        "127.0.0.9",
    ]


async def test_redirects_are_not_followed(receiver: Receiver) -> None:
    """Spec §6: redirects are not followed; the 3xx is the attempt's result."""
    receiver.script("/hook", [Reply(302, headers=(("location", receiver.url("/canary")),))])
    async with make_delivery_client(5.0) as client:
        with anyio.fail_after(DEADLINE_S):
            response = await client.post(
                receiver.url("/hook"), content=b"x", extensions=pin("127.0.0.1")
            )
    assert response.status_code == 302
    assert [a.path for a in receiver.arrivals()] == ["/hook"]


async def test_proxy_environment_is_ignored(
    monkeypatch: pytest.MonkeyPatch, receiver: Receiver
) -> None:
    """A proxy variable would reroute the delivery around the pin; it is not read."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.2:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with make_delivery_client(5.0) as client:
        with anyio.fail_after(DEADLINE_S):
            response = await client.post(receiver.url("/direct"), extensions=pin("127.0.0.1"))
    assert response.status_code == 200
    # Origin-form target: the request came directly, not through a proxy.
    assert [a.path for a in receiver.arrivals()] == ["/direct"]


async def test_timeout_bounds_a_silent_target(receiver: Receiver) -> None:
    receiver.script("/slow", [Reply(delay_s=3.0)])
    async with make_delivery_client(0.3) as client:
        with anyio.fail_after(DEADLINE_S), pytest.raises(httpx.ReadTimeout):
            await client.post(receiver.url("/slow"), extensions=pin("127.0.0.1"))


async def test_refusal_is_a_transport_error_a_delivery_loop_records() -> None:
    async with make_delivery_client(1.0) as client:
        with pytest.raises(httpx.TransportError):
            await client.get("http://10.0.0.1:9/", extensions=pin("10.0.0.1"))


def test_unknown_egress_mode_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="egress"):
        GuardedTransport("everywhere")
    with pytest.raises(ValueError, match="egress"):
        make_delivery_client(1.0, egress="")


def test_client_settings_follow_the_spec() -> None:
    client = make_delivery_client(10.0)
    assert client.follow_redirects is False
    assert client.trust_env is False
    assert client.timeout == httpx.Timeout(10.0)
