"""Kept-alive delivery connections: reused per target, never past the pin or the guard.

Every TCP connection the delivery client opens is seen where httpcore dials it
(``anyio.connect_tcp``), so a test can tell one connection carrying two deliveries from two
connections. Real connections go only to 127.0.0.1 / 127.0.0.2 (run through scripts/test).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from scripted_target import Receiver, Reply

from reference.netguard import PINNED_ADDRESS_EXTENSION, GuardedTransport, make_delivery_client
from reference.webhooks.sender import DeliveryRequest, send_attempt

pytestmark = pytest.mark.anyio

DEADLINE_S = 10.0
PIN = {PINNED_ADDRESS_EXTENSION: "127.0.0.1"}


@pytest.fixture
def dials(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, int]]]:
    """The (address, port) of every TCP connection opened, in order."""
    opened: list[tuple[str, int]] = []
    connect = anyio.connect_tcp

    async def recording(remote_host: Any, remote_port: int, **kwargs: Any) -> Any:
        opened.append((str(remote_host), remote_port))
        return await connect(remote_host, remote_port, **kwargs)

    monkeypatch.setattr(anyio, "connect_tcp", recording)
    yield opened


def guarded_client(idle_s: float) -> tuple[GuardedTransport, httpx.AsyncClient]:
    """A client over a transport whose pools close after ``idle_s`` idle seconds."""
    transport = GuardedTransport(idle_s=idle_s)
    return transport, httpx.AsyncClient(transport=transport, trust_env=False)


def delivery(url: str, address: str, n: int = 1) -> DeliveryRequest:
    return DeliveryRequest(
        delivery_id=f"evt_{n}",
        event_type="generation.completed",
        generation_id=f"gen_{n}",
        url=url,
        address=address,
        body=b'{"n": %d}' % n,
        attempt=1,
        secret="whsec_test",
    )


async def test_two_deliveries_to_one_receiver_share_one_connection(
    receiver: Receiver, dials: list[tuple[str, int]]
) -> None:
    """The receiver's reply has a body ("ok"): it is read, so the connection is reused."""
    async with make_delivery_client(5.0) as client:
        with anyio.fail_after(DEADLINE_S):
            for n in (1, 2):
                url = receiver.url("/hook")
                result = await send_attempt(client, delivery(url, "127.0.0.1", n), timeout_s=5.0)
                assert result.succeeded, result
    assert [a.header("x-service-generation") for a in receiver.arrivals("/hook")] == [
        "gen_1",
        "gen_2",
    ]
    assert dials == [("127.0.0.1", receiver.port)]


async def test_a_connection_is_never_reused_for_another_validated_address(
    receiver: Receiver, canary: Receiver, dials: list[tuple[str, int]]
) -> None:
    """One URL, two pins (the name rebound between validations): each pin gets its own
    connection, and a later delivery pinned to the first address reuses the first one."""
    url = f"http://hook.example.invalid:{receiver.port}/hook"
    async with make_delivery_client(5.0) as client:
        with anyio.fail_after(DEADLINE_S):
            for n, address in enumerate(("127.0.0.1", "127.0.0.2", "127.0.0.1")):
                result = await send_attempt(client, delivery(url, address, n), timeout_s=5.0)
                assert result.succeeded, result
    assert len(receiver.arrivals("/hook")) == 2
    assert len(canary.arrivals("/hook")) == 1
    assert dials == [("127.0.0.1", receiver.port), ("127.0.0.2", receiver.port)]


async def test_a_connection_is_not_shared_between_host_names(
    receiver: Receiver, dials: list[tuple[str, int]]
) -> None:
    """Same address and port, another URL host: its own connection (for https, its own
    verified server name)."""
    async with make_delivery_client(5.0) as client:
        with anyio.fail_after(DEADLINE_S):
            for n, host in enumerate(("a.example.invalid", "b.example.invalid")):
                url = f"http://{host}:{receiver.port}/hook"
                result = await send_attempt(client, delivery(url, "127.0.0.1", n), timeout_s=5.0)
                assert result.succeeded, result
    assert [a.header("host") for a in receiver.arrivals("/hook")] == [
        f"a.example.invalid:{receiver.port}",
        f"b.example.invalid:{receiver.port}",
    ]
    assert dials == [("127.0.0.1", receiver.port)] * 2


async def test_the_guard_refuses_a_non_loopback_pin_even_with_a_pooled_connection(
    receiver: Receiver, dials: list[tuple[str, int]]
) -> None:
    url = f"http://hook.example.invalid:{receiver.port}/hook"
    async with make_delivery_client(5.0) as client:
        with anyio.fail_after(DEADLINE_S):
            first = await send_attempt(client, delivery(url, "127.0.0.1", 1), timeout_s=5.0)
            refused = await send_attempt(client, delivery(url, "10.0.0.1", 2), timeout_s=5.0)
    assert first.succeeded
    assert not refused.succeeded
    assert refused.status == 0
    assert "egress guard" in (refused.error or "")
    assert len(receiver.arrivals("/hook")) == 1
    assert dials == [("127.0.0.1", receiver.port)]


async def test_idle_connections_are_closed_after_the_bound_busy_ones_are_not(
    receiver: Receiver, dials: list[tuple[str, int]]
) -> None:
    """A response still being read holds its pool open past the idle bound; once it is
    closed, the pool goes after the bound, and the next delivery dials again."""
    transport, client = guarded_client(idle_s=0.1)
    async with client:
        with anyio.fail_after(DEADLINE_S):
            request = client.build_request("POST", receiver.url("/hook"), extensions=PIN)
            response = await client.send(request, stream=True)
            # Not a synchronisation: three idle bounds must pass while the body is unread.
            await anyio.sleep(0.3)
            assert transport.pool_keys == [("http", "127.0.0.1", receiver.port, "127.0.0.1")]
            assert await response.aread() == b"ok"
            await response.aclose()
            while transport.pool_keys:  # bounded by fail_after: the sweep runs after 0.1 s
                await anyio.sleep(0.05)
            assert (await client.post(receiver.url("/hook"), extensions=PIN)).status_code == 200
    assert dials == [("127.0.0.1", receiver.port)] * 2


async def test_past_max_pools_the_least_recently_used_idle_pool_is_closed(
    receiver: Receiver,
) -> None:
    transport = GuardedTransport(max_pools=2)
    async with httpx.AsyncClient(transport=transport, trust_env=False) as client:
        with anyio.fail_after(DEADLINE_S):
            for host in ("a.example.invalid", "b.example.invalid", "a.example.invalid"):
                url = f"http://{host}:{receiver.port}/hook"
                assert (await client.post(url, extensions=PIN)).status_code == 200
            await client.post(f"http://c.example.invalid:{receiver.port}/hook", extensions=PIN)
            hosts = [key[3] for key in transport.pool_keys]
    assert hosts == ["a.example.invalid", "c.example.invalid"]


async def test_a_cookie_a_receiver_sets_rides_on_no_later_delivery(receiver: Receiver) -> None:
    """A target's Set-Cookie is never sent back: the next delivery (which may be another
    account's, to another path of the same host) carries no Cookie header."""
    receiver.script("/set", [Reply(200, headers=(("Set-Cookie", "session=abc; Path=/"),))])
    async with make_delivery_client(5.0) as client:
        with anyio.fail_after(DEADLINE_S):
            for n, path in enumerate(("/set", "/set", "/other")):
                result = await send_attempt(
                    client, delivery(receiver.url(path), "127.0.0.1", n), timeout_s=5.0
                )
                assert result.succeeded, result
    arrivals = receiver.arrivals("/set") + receiver.arrivals("/other")
    assert len(arrivals) == 3
    assert all(a.header("cookie") is None for a in arrivals)
