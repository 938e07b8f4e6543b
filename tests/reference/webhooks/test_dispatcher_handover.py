"""Deliveries handed over by the generation worker: started without a look at the store,
never attempted twice by a read that raced with an attempt's commit.

The dispatcher runs over a real store with a sender that records each attempt and
answers 200 (nothing goes on the network).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Collection
from pathlib import Path

import pytest

from reference.store import Store
from reference.webhooks import SCHEMA_SQL
from reference.webhooks.dispatcher import DeliveryPolicy, Dispatcher
from reference.webhooks.records import (
    DeliveryRow,
    due_deliveries,
    get_delivery,
    insert_delivery,
    next_due_at,
)
from reference.webhooks.sender import AttemptResult

pytestmark = pytest.mark.anyio

DEADLINE_S = 10.0


class Recorder:
    """The sender: records (delivery id, attempt number), answers 200."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []

    async def __call__(
        self, row: DeliveryRow, *, attempt: int, secret: str, address: str, generation_id: str
    ) -> AttemptResult:
        self.sent.append((row.id, attempt))
        return AttemptResult(
            n=attempt, at="2026-01-01T00:00:00.000+00:00", status=200, ms=1, error=None
        )


def new_row(n: int) -> DeliveryRow:
    return DeliveryRow(
        id=f"evt_{n}",
        generation_id=f"gen_{n}",
        account_id="acc_1",
        key_id=None,
        webhook_id=None,
        mode="callback",
        event_type="generation.completed",
        target_url="http://127.0.0.1:9/hook",
        address="127.0.0.1",
        body=b"{}",
        outcome="pending_retry",
        status_code=None,
        attempt_count=0,
        next_attempt_at=time.time(),
        created_at="2026-01-01T00:00:00.000+00:00",
    )


async def settled(store: Store, delivery_id: str) -> DeliveryRow:
    """The delivery once its outcome is final (bounded wait)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        row = get_delivery(store, delivery_id)
        if row is not None and row.outcome != "pending_retry":
            return row
        await asyncio.sleep(0.01)
    raise AssertionError(f"{delivery_id} did not settle within {DEADLINE_S} s")


@pytest.fixture
async def running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Store, Dispatcher, Recorder, list[int]]]:
    """A started dispatcher that looks at the store only when woken (or once a minute),
    its first look (at start) over; the list counts its looks."""
    store = Store(tmp_path / "s.sqlite3", extra_schema=[SCHEMA_SQL])
    looks: list[int] = []
    looked: list[int] = []  # looks whose last read (of the next due time) is done

    def counted(
        store: Store, now: float, exclude: Collection[str], limit: int
    ) -> list[DeliveryRow]:
        looks.append(1)
        return due_deliveries(store, now, exclude, limit)

    def finished(store: Store, exclude: Collection[str]) -> float | None:
        due_at = next_due_at(store, exclude)
        looked.append(1)
        return due_at

    monkeypatch.setattr("reference.webhooks.dispatcher.due_deliveries", counted)
    monkeypatch.setattr("reference.webhooks.dispatcher.next_due_at", finished)
    sender = Recorder()
    each = Dispatcher(store, DeliveryPolicy(idle_poll_s=60.0), lambda row: "secret", sender)
    await each.start()
    deadline = time.monotonic() + DEADLINE_S
    # Its first look must be over before a test writes: a look still reading would see
    # the test's deliveries as due and look again (seen on a loaded machine).
    while not looked and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    try:
        yield store, each, sender, looks
    finally:
        await each.stop()
        store.close()


async def test_a_handed_over_delivery_is_sent_without_reading_the_store(
    running: tuple[Store, Dispatcher, Recorder, list[int]],
) -> None:
    store, each, sender, looks = running
    before = len(looks)
    rows = [new_row(1), new_row(2)]
    with store.transaction() as conn:
        for row in rows:
            insert_delivery(conn, row)
    each.wake(rows)
    for row in rows:
        assert (await settled(store, row.id)).outcome == "delivered"
    assert sorted(sender.sent) == [("evt_1", 1), ("evt_2", 1)]
    # Two attempts, committed, and not one look at the queue for them.
    assert len(looks) == before


async def test_a_stale_copy_of_a_delivery_already_attempted_is_not_sent_again(
    running: tuple[Store, Dispatcher, Recorder, list[int]],
) -> None:
    store, each, sender, _ = running
    row = new_row(3)
    with store.transaction() as conn:
        insert_delivery(conn, row)
    each.wake([row])
    assert (await settled(store, row.id)).outcome == "delivered"
    # The same row as read before the attempt's commit (attempt_count 0), handed over
    # again, and the store looked at again: neither makes a second attempt.
    each.wake([row])
    each.wake()
    for _ in range(20):  # bounded: lets the loop run the hand-over and a look
        await asyncio.sleep(0.01)
    assert each.running_ids == frozenset()
    assert sender.sent == [("evt_3", 1)]
