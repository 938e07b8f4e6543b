"""The test-mode timer slack: delivery timers that fire late, as real HTTP clients' do."""

from __future__ import annotations

import math

import httpx
import pytest
from scripted_target import Receiver, Reply

from reference.webhooks.sender import DeliveryRequest, send_attempt, timer_deadline

pytestmark = pytest.mark.anyio


def test_timer_deadline_is_exact_without_slack() -> None:
    assert timer_deadline(100.25, 10.0, 0.0) == 110.25


@pytest.mark.parametrize("now", [100.0, 100.01, 100.5, 100.99, 1234.75])
def test_timer_deadline_rounds_up_to_the_next_whole_second(now: float) -> None:
    fires = timer_deadline(now, 10.0, 1.0)
    assert fires == math.ceil(now + 10.0)
    assert now + 10.0 <= fires < now + 11.0


def test_timer_deadline_is_never_later_than_the_slack() -> None:
    assert timer_deadline(100.1, 10.0, 0.25) == pytest.approx(110.35)


async def test_attempt_to_a_silent_target_ends_late_by_at_most_the_slack(
    receiver: Receiver,
) -> None:
    receiver.script("/silent", [Reply(200, delay_s=5.0)])
    request = DeliveryRequest(
        delivery_id="evt_0",
        event_type="generation.completed",
        generation_id="gen_0",
        url=receiver.url("/silent"),
        address=receiver.host,
        body=b"{}",
        attempt=1,
        secret="whsec_test",
    )
    async with httpx.AsyncClient() as client:
        result = await send_attempt(client, request, timeout_s=0.2, timer_slack_s=1.0)
    assert result.status == 0
    assert result.error == "no response within 0.2 s"
    assert 200 <= result.ms <= 1200 + 300, "fired within the timeout plus the slack"
