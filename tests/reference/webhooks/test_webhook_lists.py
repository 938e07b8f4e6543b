"""Delivery lists: filters, limits, totals, ownership (spec §2 delivery record, §4, §8)."""

from __future__ import annotations

from typing import Any

import pytest
from scripted_target import Receiver, Reply
from webhook_harness import HarnessFactory, add_foreign_key, assert_schema, refused, wait_until

pytestmark = pytest.mark.anyio


async def _webhook_with_deliveries(service_factory: HarnessFactory, receiver: Receiver, count: int):  # type: ignore[no-untyped-def]
    h = await service_factory()
    hook_id = await h.register(receiver.url("/list"))
    receiver.script("/list", [Reply(200)] * count)
    generations = []
    for _ in range(count):
        generation_id = await h.finished({"webhook": {"id": hook_id}})
        generations.append(generation_id)
    await receiver.arrived("/list", count, timeout_s=5)
    await wait_until(
        lambda: all(h.deliveries(g)[0]["outcome"] == "delivered" for g in generations),
        5,
        "all delivered",
    )
    return h, hook_id, generations


async def test_list_filters_limits_and_totals(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    h, hook_id, generations = await _webhook_with_deliveries(service_factory, receiver, 3)
    everything = h.service.webhook_deliveries(h.account_id, hook_id, None, None)
    assert_schema("delivery-list", everything)
    assert everything["total"] == 3 and len(everything["deliveries"]) == 3
    # Newest first.
    assert [d["generation_id"] for d in everything["deliveries"]] == generations[::-1]
    limited = h.service.webhook_deliveries(h.account_id, hook_id, None, "2")
    assert len(limited["deliveries"]) == 2 and limited["total"] == 3
    delivered = h.service.webhook_deliveries(h.account_id, hook_id, "delivered", "100")
    assert delivered["total"] == 3
    for outcome in ("failed", "pending_retry", "exhausted"):
        none = h.service.webhook_deliveries(h.account_id, hook_id, outcome, None)
        assert none == {"deliveries": [], "total": 0}


@pytest.mark.parametrize(
    ("outcome", "limit"),
    [
        *((outcome, None) for outcome in ["success", "", "DELIVERED", "delivered "]),
        *((None, limit) for limit in ["0", "-1", "101", "ten", "1.5", ""]),
    ],
)
async def test_unknown_outcome_or_bad_limit_is_400(
    service_factory: HarnessFactory, receiver: Receiver, outcome: str | None, limit: str | None
) -> None:
    h = await service_factory()
    hook_id = await h.register(receiver.url("/x"))
    with refused(400):
        h.service.webhook_deliveries(h.account_id, hook_id, outcome, limit)


async def test_lists_are_limited_to_the_account(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    h, hook_id, generations = await _webhook_with_deliveries(service_factory, receiver, 1)
    foreign = add_foreign_key(h)
    with refused(404):
        h.service.webhook_deliveries(foreign.account_id, hook_id, None, None)
    with refused(404):
        h.service.generation_deliveries(foreign.account_id, generations[0])
    with refused(404):
        h.service.generation_deliveries(h.account_id, "gen_unknown")


async def test_generation_list_covers_every_mode(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    h = await service_factory()
    hook_id = await h.register(receiver.url("/m"))
    bodies: dict[str, dict[str, Any]] = {
        "registered": {"webhook": {"id": hook_id}},
        "inline": {"webhook": {"url": receiver.url("/m")}},
        "callback": {"callback_url": receiver.url("/m")},
    }
    for mode, body in bodies.items():
        generation_id = await h.finished(body)
        # Enqueued in the finishing transaction: the record exists at once.
        listing = h.service.generation_deliveries(h.account_id, generation_id)
        assert_schema("delivery-list", listing)
        assert listing["total"] == 1
        assert listing["deliveries"][0]["mode"] == mode
    await receiver.arrived("/m", 3, timeout_s=5)
    assert h.service.generation_deliveries(h.account_id, h.add_generation()) == {
        "deliveries": [],
        "total": 0,
    }


async def test_deleted_webhook_keeps_its_deliveries_readable(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    h, hook_id, _ = await _webhook_with_deliveries(service_factory, receiver, 1)
    h.service.delete_webhook(h.account_id, hook_id)
    assert h.service.list_webhooks(h.account_id)["webhooks"] == []
    assert h.service.webhook_deliveries(h.account_id, hook_id, None, None)["total"] == 1
    with refused(404):
        h.service.delete_webhook(h.account_id, hook_id)


async def test_deleting_a_webhook_stops_its_deliveries(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    """Pending retries end ``failed``; events after the delete are not sent at all."""
    h = await service_factory()
    hook_id = await h.register(receiver.url("/gone"))
    receiver.script("/gone", [Reply(500)])
    retrying = await h.submit({"webhook": {"id": hook_id}})
    later = await h.submit({"webhook": {"id": hook_id}})
    h.finish(retrying)
    await wait_until(
        lambda: len(h.deliveries(retrying)[0]["attempts"]) == 1, 5, "first attempt recorded"
    )
    h.service.delete_webhook(h.account_id, hook_id)
    h.finish(later)
    assert h.deliveries(retrying)[0]["outcome"] == "failed"
    assert h.deliveries(later) == []
    with refused(409):
        await h.service.redeliver(h.account_id, h.deliveries(retrying)[0]["id"])
    assert len(receiver.arrivals("/gone")) == 1
