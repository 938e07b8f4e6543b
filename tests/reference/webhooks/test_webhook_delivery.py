"""Automatic delivery: request, signature, retries, timeout, redirects (spec §3, §6).

Every target is the scripted loopback receiver; arrival times are monotonic readings
taken in its handler. The service under test uses a 1 s per-attempt timeout (instead of
10 s) so the timeout cases stay fast; the backoff is the spec's 1 s then 2 s.
"""

from __future__ import annotations

import socket
from typing import Any

import anyio
import pytest
from scripted_target import Receiver, Reply
from webhook_harness import (
    HarnessFactory,
    assert_schema,
    parse_body,
    verify_signature,
    wait_until,
)

# Its tests wait on real deliveries and processes: CI starts them early (tests/conftest.py).
pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TOLERANCE_S = 0.5


async def test_inline_delivery_headers_body_and_signature(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    h = await service_factory()
    url = receiver.url("/inline")
    generation_id = await h.finished({"webhook": {"url": url}})
    (arrival,) = await receiver.arrived("/inline", 1, timeout_s=5)
    body = parse_body(arrival.body)
    assert_schema("strict-event-envelope", body)
    assert arrival.method == "POST"
    assert arrival.header("content-type") == "application/json"
    assert arrival.header("x-service-event") == "generation.completed" == body["event"]
    assert arrival.header("x-service-delivery") == body["id"]
    assert arrival.header("x-service-attempt") == "1"
    assert arrival.header("x-service-generation") == generation_id
    assert body["webhook_id"] is None
    assert body["data"]["generation_id"] == generation_id
    verify_signature(arrival.header("x-service-signature"), h.key.signing_secret, arrival.body)
    record = await h.settled(generation_id, "delivered", 5)
    assert_schema("delivery-record", record)
    assert record["id"] == body["id"]
    assert record["status_code"] == 200
    assert record["target_url"] == url
    assert record["mode"] == "inline"
    assert [(a["n"], a["status"], a["error"]) for a in record["attempts"]] == [(1, 200, None)]


async def test_callback_delivery_is_flattened_and_key_signed(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    h = await service_factory()
    await h.finished({"callback_url": receiver.url("/cb")}, "failed")
    (arrival,) = await receiver.arrived("/cb", 1, timeout_s=5)
    body = parse_body(arrival.body)
    assert_schema("callback-body", body)
    assert body["event"] == "generation.failed"
    assert body["webhook_id"] is None
    assert body["output_url"] is None and body["data"]["output_url"] is None
    assert body["error_message"] == body["data"]["error_message"]
    verify_signature(arrival.header("x-service-signature"), h.key.signing_secret, arrival.body)


async def test_registered_delivery_signed_with_whsec(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    h = await service_factory()
    created = await h.service.create_webhook(h.account_id, {"url": receiver.url("/reg")})
    generation_id = await h.finished({"webhook": {"id": created["id"]}})
    (arrival,) = await receiver.arrived("/reg", 1, timeout_s=5)
    body = parse_body(arrival.body)
    assert_schema("strict-event-envelope", body)
    assert body["webhook_id"] == created["id"]
    verify_signature(arrival.header("x-service-signature"), created["secret"], arrival.body)
    with pytest.raises(AssertionError):
        verify_signature(arrival.header("x-service-signature"), h.key.signing_secret, arrival.body)
    await h.settled(generation_id, "delivered", 5)
    listing = h.service.webhook_deliveries(h.account_id, created["id"], None, None)
    assert [d["id"] for d in listing["deliveries"]] == [body["id"]]
    assert listing["deliveries"][0]["mode"] == "registered"


async def test_three_failures_retry_after_1s_then_2s_then_exhausted(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    h = await service_factory()
    generation_id = await h.deliver_to(receiver, "/fail", [Reply(500), Reply(502), Reply(503)])
    await receiver.arrived("/fail", 1, timeout_s=5)
    # Between attempts the record says pending_retry (REC-OUTCOME-01 reading).
    await wait_until(
        lambda: h.delivery(generation_id)["attempts"] != [], 2, "first attempt recorded"
    )
    first = h.delivery(generation_id)
    if len(first["attempts"]) == 1:
        assert first["outcome"] == "pending_retry"
        assert first["next_attempt_at"] is not None
    arrivals = await receiver.arrived("/fail", 3, timeout_s=8)
    record = await h.settled(generation_id, "exhausted", 5)
    assert len(receiver.arrivals("/fail")) == 3  # exhausted is final: never a 4th
    gaps = [arrivals[1].at - arrivals[0].at, arrivals[2].at - arrivals[1].at]
    assert abs(gaps[0] - 1.0) < TOLERANCE_S, gaps
    assert abs(gaps[1] - 2.0) < TOLERANCE_S, gaps
    assert [a.header("x-service-attempt") for a in arrivals] == ["1", "2", "3"]
    assert len({a.body for a in arrivals}) == 1  # the same bytes every time
    assert len({a.header("x-service-delivery") for a in arrivals}) == 1
    for a in arrivals:
        verify_signature(a.header("x-service-signature"), h.key.signing_secret, a.body)
    assert [a["status"] for a in record["attempts"]] == [500, 502, 503]
    assert [a["n"] for a in record["attempts"]] == [1, 2, 3]
    assert all(a["error"] for a in record["attempts"])
    assert record["status_code"] == 503
    assert record["next_attempt_at"] is None
    assert_schema("delivery-record", record)


async def test_failure_then_success_is_delivered(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    h = await service_factory()
    generation_id = await h.deliver_to(receiver, "/flaky", [Reply(500), Reply(204)])
    await receiver.arrived("/flaky", 2, timeout_s=5)
    record = await h.settled(generation_id, "delivered", 5)
    assert [a["status"] for a in record["attempts"]] == [500, 204]
    assert record["status_code"] == 204


async def test_timeout_counts_as_failure_with_status_0(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    h = await service_factory(timeout_s=1.0)
    generation_id = await h.deliver_to(receiver, "/slow", [Reply(200, delay_s=3.0)])
    arrivals = await receiver.arrived("/slow", 2, timeout_s=6)
    # Backoff counts from the END of the timed-out attempt: ~1 s timeout + 1 s backoff.
    gap = arrivals[1].at - arrivals[0].at
    assert abs(gap - 2.0) < TOLERANCE_S, gap
    record = await h.settled(generation_id, "delivered", 5)
    first = record["attempts"][0]
    assert first["status"] == 0
    assert "1 s" in first["error"]
    assert 1000 <= first["ms"] < 1000 + TOLERANCE_S * 1000


async def test_redirect_is_not_followed(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    h = await service_factory()
    redirect = Reply(302, headers=(("Location", "/canary"),))
    generation_id = await h.deliver_to(receiver, "/moved", [redirect, redirect, redirect])
    await receiver.arrived("/moved", 3, timeout_s=8)
    record = await h.settled(generation_id, "exhausted", 5)
    assert receiver.arrivals("/canary") == []
    assert [a["status"] for a in record["attempts"]] == [302, 302, 302]
    assert "redirect" in record["attempts"][0]["error"]


async def test_connection_refused_is_recorded_and_retried(
    service_factory: HarnessFactory,
) -> None:
    h = await service_factory()
    with socket.socket() as probe:  # a loopback port with nobody listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    generation_id = await h.finished({"callback_url": f"http://127.0.0.1:{port}/none"})
    record = await h.settled(generation_id, "exhausted", 8)
    assert [a["status"] for a in record["attempts"]] == [0, 0, 0]
    assert all(a["error"] for a in record["attempts"])
    assert record["status_code"] == 0


@pytest.mark.parametrize(
    ("events", "status", "delivered"),
    [
        pytest.param(None, "cancelled", False, id="cancelled-default-not-sent"),
        pytest.param(["generation.cancelled"], "cancelled", True, id="cancelled-subscribed"),
        pytest.param(["generation.cancelled"], "completed", False, id="completed-unsubscribed"),
        pytest.param(None, "failed", True, id="failed-default-sent"),
    ],
)
async def test_events_follow_the_subscription(
    service_factory: HarnessFactory,
    receiver: Receiver,
    events: list[str] | None,
    status: str,
    delivered: bool,
) -> None:
    h = await service_factory()
    binding: dict[str, Any] = {"url": receiver.url("/events")}
    if events is not None:
        binding["events"] = events
    generation_id = await h.finished({"webhook": binding}, status)
    # The decision is made in the finishing transaction: the record tells at once.
    deliveries = h.deliveries(generation_id)
    assert len(deliveries) == (1 if delivered else 0)
    if delivered:
        (arrival,) = await receiver.arrived("/events", 1, timeout_s=5)
        assert parse_body(arrival.body)["event"] == f"generation.{status}"


async def test_slow_target_does_not_hold_up_others(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    h = await service_factory(timeout_s=5.0)
    receiver.script("/stuck", [Reply(200, delay_s=2.0)])
    stuck = await h.submit({"webhook": {"url": receiver.url("/stuck")}})
    quick = await h.submit({"webhook": {"url": receiver.url("/quick")}})
    h.finish(stuck)
    (stuck_arrival,) = await receiver.arrived("/stuck", 1, timeout_s=5)
    h.finish(quick)
    (quick_arrival,) = await receiver.arrived("/quick", 1, timeout_s=1.5)
    assert quick_arrival.at - stuck_arrival.at < 1.5
    assert h.delivery(stuck)["outcome"] == "pending_retry"  # still in flight


async def test_finish_twice_enqueues_once(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    h = await service_factory()
    generation_id = await h.submit({"webhook": {"url": receiver.url("/once")}})
    h.finish(generation_id)
    h.finish(generation_id)
    await receiver.arrived("/once", 1, timeout_s=5)
    await h.settled(generation_id, "delivered", 5)
    assert len(receiver.arrivals("/once")) == 1


async def test_restart_resumes_a_retry_sequence(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    """A stop between attempts loses nothing: the next service makes the rest."""
    h = await service_factory()
    generation_id = await h.deliver_to(receiver, "/resume", [Reply(500), Reply(500)])
    await receiver.arrived("/resume", 1, timeout_s=5)
    await wait_until(lambda: len(h.delivery(generation_id)["attempts"]) == 1, 2, "attempt 1")
    await h.service.stop()
    await anyio.sleep(0)  # let the stopped loop unwind
    again = await service_factory()
    arrivals = await receiver.arrived("/resume", 3, timeout_s=8)
    record = await again.settled(generation_id, "delivered", 5)
    assert [a.header("x-service-attempt") for a in arrivals] == ["1", "2", "3"]
    assert [a["status"] for a in record["attempts"]] == [500, 500, 200]
