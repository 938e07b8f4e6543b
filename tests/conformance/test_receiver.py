"""The receiver isolates endpoints, scripts replies, captures raw deliveries with their
arrival times, waits with deadlines, and its canaries catch forbidden connections."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from conformance.observe.canary import Canary
from conformance.observe.receiver import (
    Delivery,
    DeliveryTimeout,
    Endpoint,
    Receiver,
    ReceiverError,
    Reply,
)
from conformance.observe.signatures import verify_delivery
from conformance.target.profile import ReceiverProfile
from conformance.target.wire import WireProfile

TIMEOUT = httpx.Timeout(5.0)


@pytest.fixture(scope="module")
def server() -> Iterator[Receiver]:
    with Receiver(ReceiverProfile(listen_host="127.0.0.1", listen_port=0)) as receiver:
        yield receiver


@pytest.fixture(scope="module")
def canary(server: Receiver) -> Iterator[Canary]:
    with Canary(rebind_port=server.port) as listeners:
        yield listeners


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=TIMEOUT, trust_env=False, follow_redirects=False) as client:
        yield client


def post(http: httpx.Client, endpoint: Endpoint, body: bytes = b"{}", **headers: str) -> int:
    return http.post(endpoint.url, content=body, headers=headers).status_code


def test_endpoint_paths_are_fresh_and_urls_point_at_the_server(server: Receiver) -> None:
    first, second = server.endpoint("Same Name!"), server.endpoint("Same Name!")
    assert first.path != second.path
    assert first.path.startswith("/hooks/same-name-")
    assert first.url == f"http://127.0.0.1:{server.port}{first.path}"


def test_raw_body_and_headers_are_captured_exactly(server: Receiver, http: httpx.Client) -> None:
    endpoint = server.endpoint("raw")
    body = b'{"b" : 2,  "a":1}\n\xff'  # spacing, order, a newline, invalid UTF-8: all kept
    assert post(http, endpoint, body, **{"X-Service-Event": "generation.completed"}) == 200
    (delivery,) = endpoint.wait_for(1, timeout=5)
    assert delivery.raw_body == body
    assert delivery.headers["x-service-event"] == "generation.completed"
    assert delivery.headers["X-SERVICE-EVENT"] == "generation.completed"
    assert delivery.method == "POST" and delivery.path == endpoint.path
    assert delivery.remote_addr == "127.0.0.1"


def test_parallel_endpoints_are_isolated(server: Receiver, http: httpx.Client) -> None:
    endpoints = [server.endpoint(f"parallel-{n}") for n in range(4)]

    def send(index: int) -> int:
        endpoint = endpoints[index % 4]
        return post(http, endpoint, f"{endpoint.path}#{index}".encode())

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert set(pool.map(send, range(40))) == {200}
    for endpoint in endpoints:
        deliveries = endpoint.wait_for(10, timeout=5)
        assert len(deliveries) == 10
        assert all(d.raw_body.startswith(endpoint.path.encode() + b"#") for d in deliveries)


def test_scripted_statuses_are_used_in_turn_and_the_last_repeats(
    server: Receiver, http: httpx.Client
) -> None:
    endpoint = server.endpoint("statuses").respond_with_statuses([500, 503, 200])
    assert [post(http, endpoint) for _ in range(5)] == [500, 503, 200, 200, 200]
    replied = [d.replied.status for d in endpoint.wait_for(5, timeout=5)]
    assert replied == [500, 503, 200, 200, 200]


def test_take_hands_over_and_forgets_and_the_script_goes_on(
    server: Receiver, http: httpx.Client
) -> None:
    endpoint = server.endpoint("take").respond_with_statuses([500, 503, 200])
    assert endpoint.take() == []
    assert [post(http, endpoint) for _ in range(2)] == [500, 503]
    assert [d.replied.status for d in endpoint.take()] == [500, 503]
    assert endpoint.deliveries == [] and endpoint.take() == []
    # The third delivery gets the script's third reply although the first two were taken.
    assert post(http, endpoint) == 200
    taken = endpoint.take(timeout=5)
    assert [d.replied.status for d in taken] == [200]
    assert endpoint.take(timeout=0.01) == []


def test_delay_holds_the_reply_without_blocking_other_endpoints(
    server: Receiver, http: httpx.Client
) -> None:
    slow = server.endpoint("slow").respond_with_delay(2.0, then_status=202)
    fast = server.endpoint("fast")
    results: dict[str, float] = {}

    def call_slow() -> None:
        start = time.monotonic()
        results["status"] = post(http, slow)
        results["elapsed"] = time.monotonic() - start

    thread = threading.Thread(target=call_slow)
    thread.start()
    (held,) = slow.wait_for(1, timeout=5)  # arrived, reply still held
    assert post(http, fast) == 200
    assert thread.is_alive() and "status" not in results  # answered while the slow one waits
    thread.join(timeout=10)
    assert results["status"] == 202
    assert results["elapsed"] >= 2.0
    assert held.replied == Reply(202, delay=2.0)


def test_redirect_to_a_canary_endpoint_is_caught_when_followed(
    server: Receiver, http: httpx.Client
) -> None:
    canary_path = server.endpoint("canary-path")
    endpoint = server.endpoint("redirecting").redirect_to(canary_path)
    response = http.post(endpoint.url, content=b"{}")
    assert response.status_code == 302
    assert response.headers["location"] == canary_path.url
    assert canary_path.deliveries == []  # a client that does not follow leaves it empty
    # A client that follows redirects (what spec §6 forbids) shows up on the canary.
    with httpx.Client(timeout=TIMEOUT, trust_env=False, follow_redirects=True) as follower:
        assert follower.get(endpoint.url).status_code == 200
    assert len(canary_path.wait_for(1, timeout=5)) == 1
    assert endpoint.redirect_to("http://127.0.0.2:9/x", status=307) is endpoint
    with pytest.raises(ValueError, match="not a redirect"):
        endpoint.redirect_to(canary_path, status=200)


def test_wait_for_deadline_names_what_arrived(server: Receiver, http: httpx.Client) -> None:
    endpoint = server.endpoint("deadline").respond_with_statuses([500])
    post(http, endpoint, **{"X-Service-Event": "generation.failed", "X-Service-Attempt": "1"})
    endpoint.wait_for(1, timeout=5)
    start = time.monotonic()
    with pytest.raises(DeliveryTimeout) as caught:
        endpoint.wait_for(3, timeout=0.3)
    waited = time.monotonic() - start
    assert 0.3 <= waited < 3.0
    message = str(caught.value)
    assert "endpoint 'deadline'" in message and "expected 3 deliveries within 0.3 s" in message
    assert "1 arrived" in message
    assert "X-Service-Event=generation.failed X-Service-Attempt=1" in message
    assert "replied 500" in message
    empty = server.endpoint("nothing")
    with pytest.raises(DeliveryTimeout, match="nothing arrived"):
        empty.wait_for(1, timeout=0.1)


def test_arrival_times_are_monotonic_and_taken_on_arrival(
    server: Receiver, http: httpx.Client
) -> None:
    endpoint = server.endpoint("timing").respond_with_delay(0.4)
    before = time.monotonic()
    post(http, endpoint)
    after_first = time.monotonic()
    post(http, endpoint)
    after = time.monotonic()
    first, second = endpoint.wait_for(2, timeout=5)
    # Taken on arrival, not when the (delayed) reply went out.
    assert before <= first.arrived_at <= after_first - 0.4
    assert after_first <= second.arrived_at <= after - 0.4
    assert second.arrived_at - first.arrived_at >= 0.4


def test_assert_quiet_passes_on_silence_and_fails_on_a_late_arrival(
    server: Receiver, http: httpx.Client
) -> None:
    endpoint = server.endpoint("quiet")
    post(http, endpoint)
    endpoint.wait_for(1, timeout=5)
    endpoint.assert_quiet(0.2)  # what arrived before does not count
    late = threading.Timer(0.1, post, args=(http, endpoint))
    late.start()
    start = time.monotonic()
    with pytest.raises(AssertionError, match="expected no further delivery within 5 s after 1"):
        endpoint.assert_quiet(5)
    assert time.monotonic() - start < 4  # fails as soon as it arrives
    late.join(timeout=5)


def test_closed_endpoint_turns_late_deliveries_into_strays(
    server: Receiver, http: httpx.Client
) -> None:
    endpoint = server.endpoint("closing")
    endpoint.close()
    assert post(http, endpoint) == 404
    assert endpoint.deliveries == []
    assert any(stray.path == endpoint.path for stray in server.strays)


def test_handler_errors_are_surfaced_in_the_check(
    server: Receiver, http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    endpoint = server.endpoint("broken")

    def explode(_: object) -> Delivery:
        raise RuntimeError("scripted failure")

    monkeypatch.setattr(endpoint, "_arrive", explode)
    assert post(http, endpoint) == 500
    with pytest.raises(ReceiverError, match="RuntimeError: scripted failure"):
        endpoint.check()
    server.endpoint("fine").check()


# -- the deployment's wire conventions ---------------------------------------------------

ACME = WireProfile(header_brand="Acme", secret_keying="utf8")
WHSEC = "whsec_c2VjcmV0LWtleS1mb3ItdGVzdHMtb25seQ=="


def _signed(key: bytes, body: bytes, t: int = 1767225600) -> str:
    return f"t={t},v1={hmac.new(key, f'{t}.'.encode() + body, hashlib.sha256).hexdigest()}"


def test_headers_are_read_and_named_under_the_declared_brand_word(http: httpx.Client) -> None:
    """With brand word Acme, deliveries read X-Acme-* and summaries name them so; the
    spec's neutral X-Service-* names are not read in their place."""
    with Receiver(ReceiverProfile(), ACME) as receiver:
        endpoint = receiver.endpoint("acme").respond_with_statuses([500])
        headers = {
            "X-Acme-Event": "generation.completed",
            "X-Acme-Attempt": "1",
            "X-Acme-Delivery": "evt_ab",
            "X-Service-Generation": "gen_neutral",
        }
        assert post(http, endpoint, **headers) == 500
        (delivery,) = endpoint.wait_for(1, timeout=5)
        assert delivery.wire == ACME
        assert delivery.header("Event") == "generation.completed"
        assert delivery.header("Delivery") == "evt_ab"
        assert delivery.header("Generation") is None
        assert delivery.header("Signature") is None
        with pytest.raises(ValueError, match="not a delivery header"):
            delivery.header("Content-Type")
        summary = delivery.summary(endpoint.created_at)
        assert "X-Acme-Event=generation.completed X-Acme-Attempt=1 X-Acme-Delivery=evt_ab" in (
            summary
        )
        with pytest.raises(DeliveryTimeout, match=r"X-Acme-Event=generation\.completed"):
            endpoint.wait_for(2, timeout=0.2)


def test_delivery_signed_under_the_other_keying_is_diagnosed_by_name(
    server: Receiver, http: httpx.Client
) -> None:
    """A delivery that reaches the receiver signed with the base64-decoded whsec_ secret,
    while the profile declares utf8, fails with the keying named and the setting to
    change; declared base64-after-prefix, the same bytes verify."""
    body = b'{"id":"evt_1","event":"generation.completed"}'
    key = base64.b64decode(WHSEC.removeprefix("whsec_"))
    endpoint = server.endpoint("keying")
    assert post(http, endpoint, body, **{"X-Service-Signature": _signed(key, body)}) == 200
    (delivery,) = endpoint.wait_for(1, timeout=5)
    result = verify_delivery(delivery, WHSEC, label="the registered webhook's whsec_ secret")
    assert not result.ok
    assert result.message == (
        "the signature does not verify with the registered webhook's whsec_ secret keyed as "
        f"declared (utf8) over '<t>.' + the raw body ({len(body)} bytes); signed with the "
        "base64-decoded secret (the text after its prefix, as Standard Webhooks does); the "
        'profile declares utf8: set [wire] secret_keying = "base64-after-prefix" if that is '
        "the deployment's choice"
    )
    declared = dataclasses.replace(delivery, wire=WireProfile(secret_keying="base64-after-prefix"))
    assert verify_delivery(declared, WHSEC).ok


def test_public_url_is_used_and_its_base_path_stripped(http: httpx.Client) -> None:
    config = ReceiverProfile(public_url="http://tunnel.example.test/base/")
    with Receiver(config) as receiver:
        endpoint = receiver.endpoint("public")
        assert endpoint.url == f"http://tunnel.example.test/base{endpoint.path}"
        # A tunnel forwards /base/<path> to the local server.
        local = f"http://127.0.0.1:{receiver.port}/base{endpoint.path}"
        assert http.post(local, content=b"x").status_code == 200
        assert endpoint.wait_for(1, timeout=5)[0].raw_body == b"x"


@pytest.mark.parametrize(
    ("status", "delay"),
    [
        pytest.param(99, 0, id="status-99"),
        pytest.param(200, -1, id="neg"),
        pytest.param(200, 61, id="long"),
    ],
)
def test_reply_rejects_nonsense(status: int, delay: float) -> None:
    with pytest.raises(ValueError):
        Reply(status, delay=delay)


def test_wait_arguments_are_validated(server: Receiver) -> None:
    endpoint = server.endpoint("args")
    with pytest.raises(ValueError):
        endpoint.wait_for(0, timeout=1)
    with pytest.raises(ValueError):
        endpoint.assert_quiet(0)
    with pytest.raises(ValueError):
        endpoint.respond_with([])


# -- canaries -------------------------------------------------------------------------


def test_canary_catches_127_0_0_2(canary: Canary, http: httpx.Client) -> None:
    mark = canary.mark()
    response = http.post(canary.url("127.0.0.2", "/callback"), content=b"{}")
    assert response.status_code == 200
    (hit,) = canary.wait_for_hits(1, timeout=5, since=mark)
    assert hit.listener == "dual-stack"
    assert hit.local.removeprefix("::ffff:") == "127.0.0.2"  # IPv4-mapped on the dual stack
    assert canary.hits_since(mark)[0].request_line == "POST /callback HTTP/1.1"


def test_canary_catches_ipv6_loopback(canary: Canary, http: httpx.Client) -> None:
    if not canary.dual_stack_v6:
        pytest.skip("needs IPv6 on this host: the canary fell back to IPv4")
    mark = canary.mark()
    assert canary.url("::1").startswith("http://[::1]:")
    http.get(canary.url("::1"))
    (hit,) = canary.wait_for_hits(1, timeout=5, since=mark)
    assert hit.peer == "::1"


def test_canary_catches_zero_address(canary: Canary) -> None:
    mark = canary.mark()
    with socket.create_connection(("0.0.0.0", canary.port), timeout=5):  # noqa: S104
        canary.wait_for_hits(1, timeout=5, since=mark)


def test_canary_rebind_listener_is_at_the_receiver_port(
    server: Receiver, canary: Canary, http: httpx.Client
) -> None:
    assert canary.rebind_port == server.port
    mark = canary.mark()
    assert canary.rebind_url("/r").startswith(f"http://127.0.0.2:{server.port}/")
    http.get(canary.rebind_url("/r"))
    (hit,) = canary.wait_for_hits(1, timeout=5, since=mark)
    assert hit.listener == "rebind" and hit.local == "127.0.0.2"
    assert hit.request_line == "GET /r HTTP/1.1"


def test_canary_records_connections_that_send_nothing(canary: Canary) -> None:
    mark = canary.mark()
    with socket.create_connection(("127.0.0.2", canary.port), timeout=5):
        (hit,) = canary.wait_for_hits(1, timeout=5, since=mark)
    assert hit.request_line is None


def test_canary_stays_empty_when_nothing_connects(canary: Canary, server: Receiver) -> None:
    mark = canary.mark()
    with httpx.Client(timeout=TIMEOUT, trust_env=False) as client:
        client.post(server.endpoint("elsewhere").url)  # the receiver is not a canary
    with pytest.raises(AssertionError, match=r"expected 1 canary hits within 0\.2 s, got 0"):
        canary.wait_for_hits(1, timeout=0.2, since=mark)
    assert canary.hits_since(mark) == []


def test_canary_without_rebind_port_has_no_rebind_url() -> None:
    with Canary() as lonely:
        assert lonely.rebind_port is None
        with pytest.raises(RuntimeError, match="no rebind listener"):
            lonely.rebind_url()


def test_canary_hits_include_a_connection_made_just_before(canary: Canary) -> None:
    """No race between an IUT's connect and the accept thread: hits settle first."""
    for _ in range(20):
        view = canary.view()
        with socket.create_connection(("127.0.0.2", canary.port), timeout=5):
            assert len(view.hits) == 1  # read at once, no wait
        with pytest.raises(AssertionError, match="a canary was reached"):
            view.assert_no_hits()


def test_silent_connections_do_not_hold_up_other_hits(canary: Canary) -> None:
    mark = canary.mark()
    silent = [socket.create_connection(("127.0.0.2", canary.port), timeout=5) for _ in range(6)]
    try:
        canary.wait_for_hits(6, timeout=5, since=mark)
        start = time.monotonic()
        with httpx.Client(timeout=TIMEOUT, trust_env=False) as client:
            client.get(canary.url("127.0.0.2", "/after-silence"))
        assert time.monotonic() - start < 1.5
        assert canary.hits_since(mark)[-1].request_line == "GET /after-silence HTTP/1.1"
    finally:
        for connection in silent:
            connection.close()


def test_canary_records_every_connection_beyond_its_readers(canary: Canary) -> None:
    mark = canary.mark()
    flood = [socket.create_connection(("127.0.0.2", canary.port), timeout=5) for _ in range(20)]
    try:
        hits = canary.wait_for_hits(20, timeout=5, since=mark)
        assert len(hits) == 20
        readers = [t for t in threading.enumerate() if t.name.startswith("canary-dual-stack-read")]
        assert len(readers) <= 8  # at most 8 readers, whatever the flood
    finally:
        for connection in flood:
            connection.close()


def test_port_in_use_raises_instead_of_exiting(server: Receiver) -> None:
    with pytest.raises(OSError, match=r"cannot listen on 127\.0\.0\.1:"):
        Receiver(ReceiverProfile(listen_port=server.port)).start()
