"""The receiver under a flood: every delivery recorded exactly once with its raw bytes, or
refused with a counted reason once a documented cap is hit; endpoints never mix.

The flood is sent from this process over loopback (a thread pool of keep-alive clients),
so run through ``bash scripts/test``.
"""

from __future__ import annotations

import itertools
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from conformance.observe.receiver import (
    MAX_BODY_BYTES,
    MAX_STRAYS,
    REFUSED_BODY_TOO_LARGE,
    REFUSED_STRAY_OVER_CAP,
    Endpoint,
    Receiver,
)
from conformance.target.profile import ReceiverProfile

TIMEOUT = httpx.Timeout(30.0)
#: Deliveries in the burst, and the senders sending them side by side.
BURST = 10_000
SENDERS = 16


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver(ReceiverProfile(listen_host="127.0.0.1", listen_port=0)) as server:
        yield server


def _send_all(urls_and_bodies: list[tuple[str, bytes]]) -> list[int]:
    """POST each body to its URL, SENDERS at a time; the statuses, in order."""
    local = threading.local()

    def post(item: tuple[str, bytes]) -> int:
        if not hasattr(local, "client"):
            local.client = httpx.Client(timeout=TIMEOUT, trust_env=False)
        return int(local.client.post(item[0], content=item[1]).status_code)

    with ThreadPoolExecutor(SENDERS) as pool:
        return list(pool.map(post, urls_and_bodies))


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_burst_to_two_endpoints_is_recorded_exactly_once_and_never_mixed(
    receiver: Receiver,
) -> None:
    first, second = receiver.endpoint("first"), receiver.endpoint("second")
    endpoints = itertools.cycle([first, second])
    sent = [(next(endpoints), f"{i:05d}".encode() * 3) for i in range(BURST)]
    statuses = _send_all([(endpoint.url, body) for endpoint, body in sent])
    assert statuses == [200] * BURST
    for endpoint in (first, second):
        expected = sorted(body for target, body in sent if target is endpoint)
        got = endpoint.wait_for(len(expected), timeout=10.0)
        assert sorted(d.raw_body for d in got) == expected  # each once, none of the other's
        assert {d.path for d in got} == {endpoint.path}
        endpoint.check()
    assert receiver.strays == [] and not receiver.refused
    receiver.check()


def test_a_ten_megabyte_body_is_recorded_byte_for_byte(receiver: Receiver) -> None:
    endpoint = receiver.endpoint("large")
    body = bytes(range(256)) * (10 * 1024 * 1024 // 256)
    assert _send_all([(endpoint.url, body)]) == [200]
    (delivery,) = endpoint.wait_for(1, timeout=10.0)
    assert delivery.raw_body == body


@pytest.mark.parametrize("chunked", [False, True], ids=["declared", "chunked"])
def test_a_body_over_the_cap_is_refused_and_counted(receiver: Receiver, chunked: bool) -> None:
    endpoint = receiver.endpoint("too-large")
    body = b"x" * (MAX_BODY_BYTES + 1)
    content = iter([body]) if chunked else body
    with httpx.Client(timeout=TIMEOUT, trust_env=False) as client:
        response = client.post(endpoint.url, content=content)
    assert response.status_code == 413
    assert receiver.refused[REFUSED_BODY_TOO_LARGE] == 1
    assert endpoint.deliveries == []
    endpoint.check()
    receiver.check()


def test_huge_headers_are_recorded_or_refused_by_the_http_layer(receiver: Receiver) -> None:
    endpoint = receiver.endpoint("headers")
    big = {f"X-Big-{i}": "v" * 8000 for i in range(90)}  # 720 kB of headers, within limits
    with httpx.Client(timeout=TIMEOUT, trust_env=False) as client:
        assert client.post(endpoint.url, content=b"{}", headers=big).status_code == 200
    (delivery,) = endpoint.wait_for(1, timeout=10.0)
    assert all(delivery.headers[name] == value for name, value in big.items())
    # One line over 64 KiB: refused by the HTTP server before the receiver's handler.
    host, port = receiver.host, receiver.port
    with socket.create_connection((host, port), timeout=10.0) as sock:
        path = endpoint.path.encode()
        sock.sendall(b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nX-Huge: " + b"v" * 70_000)
        sock.sendall(b"\r\nContent-Length: 0\r\n\r\n")
        assert sock.recv(64).split(b" ")[1] == b"431"
    assert len(endpoint.deliveries) == 1
    endpoint.check()
    receiver.check()


def test_strays_are_kept_up_to_the_cap_then_counted(receiver: Receiver) -> None:
    extra = 50
    url = receiver.url_for("/hooks/nobody-owns-this")
    statuses = _send_all([(f"{url}-{i}", str(i).encode()) for i in range(MAX_STRAYS + extra)])
    assert statuses == [404] * (MAX_STRAYS + extra)
    assert len(receiver.strays) == MAX_STRAYS
    assert len({d.raw_body for d in receiver.strays}) == MAX_STRAYS
    assert receiver.refused[REFUSED_STRAY_OVER_CAP] == extra
    after = receiver.endpoint("after")  # an endpoint opened after the flood still records
    assert _send_all([(after.url, b"late")]) == [200]
    assert after.wait_for(1, timeout=10.0)[0].raw_body == b"late"
    receiver.check()


def test_a_flooded_endpoint_does_not_see_another_endpoints_records(receiver: Receiver) -> None:
    quiet: Endpoint = receiver.endpoint("quiet")
    loud = receiver.endpoint("loud")
    assert _send_all([(loud.url, b"x")] * 200) == [200] * 200
    assert len(loud.wait_for(200, timeout=10.0)) == 200
    assert quiet.deliveries == []
