"""Redeliver: re-validation, original payload and id, one new attempt (spec §3, §4, §7)."""

from __future__ import annotations

from typing import Any

import pytest
from scripted_target import Receiver, Reply
from webhook_harness import (
    Harness,
    HarnessFactory,
    add_foreign_key,
    exhausted_delivery,
    parse_body,
    refused,
    verify_signature,
    wait_until,
)

# Its tests wait on real deliveries and processes: CI starts them early (tests/conftest.py).
pytestmark = [pytest.mark.anyio, pytest.mark.slow]

HOST = "hooks.rebind.test"


def _record(h: Harness, delivery_id: str) -> dict[str, Any]:
    rows = h.store.read("SELECT generation_id FROM webhook_deliveries WHERE id = ?", (delivery_id,))
    (record,) = [d for d in h.deliveries(rows[0]["generation_id"]) if d["id"] == delivery_id]
    return record


async def test_redeliver_exhausted_replays_original_bytes_and_id(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    h = await service_factory()
    delivery_id = await exhausted_delivery(h, receiver, "/replay")
    original = receiver.arrivals("/replay")[0]
    answer = await h.service.redeliver(h.account_id, delivery_id)
    assert (answer["outcome"], answer["status_code"]) == ("delivered", 200)
    assert answer["attempt"]["n"] == 4
    arrivals = receiver.arrivals("/replay")
    assert len(arrivals) == 4
    replay = arrivals[3]
    assert replay.body == original.body
    assert replay.header("x-service-delivery") == delivery_id == parse_body(replay.body)["id"]
    assert replay.header("x-service-attempt") == "4"
    verify_signature(replay.header("x-service-signature"), h.key.signing_secret, replay.body)
    record = _record(h, delivery_id)
    assert record["outcome"] == "delivered"
    assert [a["status"] for a in record["attempts"]] == [500, 500, 500, 200]


async def test_redeliver_that_fails_ends_failed_and_can_be_repeated(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    h = await service_factory()
    delivery_id = await exhausted_delivery(h, receiver, "/again")
    receiver.script("/again", [Reply(503)])
    answer = await h.service.redeliver(h.account_id, delivery_id)
    assert (answer["outcome"], answer["status_code"]) == ("failed", 503)
    assert _record(h, delivery_id)["outcome"] == "failed"
    answer = await h.service.redeliver(h.account_id, delivery_id)  # failed is redeliverable
    assert (answer["outcome"], answer["status_code"]) == ("delivered", 200)
    assert len(receiver.arrivals("/again")) == 5  # exactly one arrival per redeliver


async def test_redeliver_to_now_private_target_is_400_and_fetches_nothing(
    service_factory: HarnessFactory, receiver: Receiver, canary: Receiver
) -> None:
    h = await service_factory()
    h.rebind(HOST, "127.0.0.1")
    url = f"http://{HOST}:{receiver.port}/rebound"
    delivery_id = await exhausted_delivery(h, receiver, "/rebound", url=url)
    before = _record(h, delivery_id)
    h.rebind(HOST, "127.0.0.2")
    with refused(400) as raised:
        await h.service.redeliver(h.account_id, delivery_id)
    assert "nothing was sent" in raised.value.detail
    assert canary.arrivals("/rebound") == []
    assert len(receiver.arrivals("/rebound")) == 3
    assert _record(h, delivery_id) == before


async def test_redeliver_to_now_private_target_is_400_even_when_delivered(
    service_factory: HarnessFactory, receiver: Receiver, canary: Receiver
) -> None:
    """Spec §3 row "any": re-validation comes before the state check."""
    h = await service_factory()
    h.rebind(HOST, "127.0.0.1")
    generation_id = await h.finished({"webhook": {"url": f"http://{HOST}:{receiver.port}/ok"}})
    await receiver.arrived("/ok", 1, timeout_s=5)
    await h.settled(generation_id, "delivered", 5)
    h.rebind(HOST, "127.0.0.2")
    with refused(400):
        await h.service.redeliver(h.account_id, h.deliveries(generation_id)[0]["id"])
    assert canary.arrivals("/ok") == []


async def test_redeliver_delivered_or_pending_is_409(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    h = await service_factory()
    delivered = await h.finished({"webhook": {"url": receiver.url("/done")}})
    await h.settled(delivered, "delivered", 5)
    with refused(409):
        await h.service.redeliver(h.account_id, h.deliveries(delivered)[0]["id"])
    pending = await h.deliver_to(receiver, "/wait", [Reply(500)])
    await wait_until(
        lambda: len(h.deliveries(pending)[0]["attempts"]) == 1, 5, "first attempt recorded"
    )
    with refused(409):
        await h.service.redeliver(h.account_id, h.deliveries(pending)[0]["id"])


async def test_redeliver_unknown_or_foreign_is_404(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    h = await service_factory()
    delivery_id = await exhausted_delivery(h, receiver, "/mine")
    foreign = add_foreign_key(h)
    for account, target in [(foreign.account_id, delivery_id), (h.account_id, "evt_0000")]:
        with refused(404):
            await h.service.redeliver(account, target)
    assert len(receiver.arrivals("/mine")) == 3


async def test_registered_webhook_test_delivery(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    h = await service_factory()
    created = await h.service.create_webhook(h.account_id, {"url": receiver.url("/test")})
    answer = await h.service.test_webhook(h.account_id, created["id"])
    assert (answer["outcome"], answer["status_code"]) == ("delivered", 200)
    (arrival,) = receiver.arrivals("/test")
    body = parse_body(arrival.body)
    assert body["event"] == "webhook.test" == arrival.header("x-service-event")
    assert body["webhook_id"] == created["id"]
    assert arrival.header("x-service-delivery") == body["id"] == answer["id"]
    verify_signature(arrival.header("x-service-signature"), created["secret"], arrival.body)
    listing = h.service.webhook_deliveries(h.account_id, created["id"], None, None)
    assert [d["event_type"] for d in listing["deliveries"]] == ["webhook.test"]
    receiver.script("/test", [Reply(500)])
    failed = await h.service.test_webhook(h.account_id, created["id"])
    assert (failed["outcome"], failed["status_code"]) == ("failed", 500)


async def test_test_delivery_cut_off_by_a_crash_is_closed_failed_at_start(
    service_factory: HarnessFactory,
) -> None:
    """A test delivery has no scheduled retry: one left open by a crash ends failed."""
    h = await service_factory()
    with h.store.transaction() as conn:
        conn.execute(
            "INSERT INTO webhook_deliveries (id, generation_id, account_id, key_id, webhook_id,"
            " mode, event_type, target_url, address, body, outcome, attempt_count,"
            " next_attempt_at, created_at, updated_at) VALUES ('evt_ab', NULL, ?, NULL, 'wh_x',"
            " 'registered', 'webhook.test', 'http://127.0.0.1:9/', '127.0.0.1', x'7b7d',"
            " 'pending_retry', 0, NULL, '2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00+00:00')",
            (h.account_id,),
        )
    await service_factory()  # a new start on the same store
    rows = h.store.read("SELECT outcome FROM webhook_deliveries WHERE id = 'evt_ab'")
    assert rows[0]["outcome"] == "failed"
