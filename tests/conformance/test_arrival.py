"""Arrival times come from the kernel's stamp of a request's first byte: a receiver whose
threads run late still times a request by when it came, its first connection too; a
request the server had read ahead or a closed connection has no stamp, and is not waited
for."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from conformance.observe.arrival import await_stamping, enable_stamps, first_byte_at
from conformance.observe.receiver import Receiver
from conformance.target.profile import ReceiverProfile

#: How late the server side looks in these tests: far beyond any clock conversion error.
LATE = 1.0
#: The error allowed in moving a stamp from the wall clock to the monotonic one.
CLOCKS = 0.25


@pytest.fixture
def connected() -> Iterator[tuple[socket.socket, socket.socket]]:
    """A loopback TCP connection: (the server's side, with stamps on; the client's)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname()[:2], timeout=5)
        server, _ = listener.accept()
    with server, client:
        server.settimeout(5)
        if not enable_stamps(server):
            pytest.skip("this platform has no SO_TIMESTAMPNS")
        # The kernel may turn stamping on only a moment after the option was set: the
        # stimulus below must not race it.
        assert await_stamping(), "the kernel stamps nothing this connection receives"
        yield server, client


def test_a_late_reader_gets_the_time_the_first_byte_came(
    connected: tuple[socket.socket, socket.socket],
) -> None:
    server, client = connected
    before = time.monotonic()
    client.sendall(b"POST / HTTP/1.1\r\n")
    sent = time.monotonic()
    time.sleep(LATE)  # the server side runs late: the stimulus, not a synchronisation
    stamp = first_byte_at(server, lambda: False)
    assert stamp is not None
    assert before - CLOCKS <= stamp <= sent + CLOCKS
    assert server.recv(100) == b"POST / HTTP/1.1\r\n", "the peek consumed nothing"


def test_a_request_already_read_ahead_is_not_waited_for(
    connected: tuple[socket.socket, socket.socket],
) -> None:
    server, _client = connected
    started = time.monotonic()
    assert first_byte_at(server, lambda: True) is None
    assert time.monotonic() - started < LATE


def test_a_closed_connection_has_no_stamp(connected: tuple[socket.socket, socket.socket]) -> None:
    server, client = connected
    client.shutdown(socket.SHUT_WR)
    assert first_byte_at(server, lambda: False) is None


def _post(path: str, body: bytes = b"{}") -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: r\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver(ReceiverProfile(listen_host="127.0.0.1", listen_port=0)) as started:
        yield started


def test_the_receiver_times_requests_by_their_first_byte(receiver: Receiver) -> None:
    endpoint = receiver.endpoint("late-rest")
    sent: list[float] = []
    for number in range(2):
        with socket.create_connection((receiver.host, receiver.port), timeout=5) as client:
            request = _post(endpoint.path)
            sent.append(time.monotonic())
            client.sendall(request[:1])  # the first byte, then the rest after a while:
            time.sleep(LATE)  # the server cannot read the request before it is whole
            client.sendall(request[1:])
            endpoint.wait_for(number + 1, timeout=10)
            assert client.recv(4096).startswith(b"HTTP/1.1 200")
    arrived = [delivery.arrived_at for delivery in endpoint.deliveries]
    assert arrived == pytest.approx(sent, abs=CLOCKS)
