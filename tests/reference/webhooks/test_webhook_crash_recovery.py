"""kill -9 in the middle of a delivery loses nothing (spec §6 at-least-once; durability).

The reference runs as a process on its own store; the test kills it with SIGKILL at a
chosen point of a delivery and starts it again on the same store. The receiver keeps
its port across the restart, so the recorded target stays valid.
"""

from __future__ import annotations

import signal

import httpx
import pytest
from running_reference import ReferenceFactory, RunningReference, submit_image, wait_for_delivery
from scripted_target import Receiver, Reply

pytestmark = pytest.mark.slow


def _reader(running: RunningReference) -> tuple[httpx.Client, str]:
    """A client on ``running`` and the primary key, to read its delivery records."""
    return running.client(timeout=5), running.key("primary")


def _submit(running: RunningReference, url: str) -> str:
    body = {"prompt": "crash test", "webhook": {"url": url}}
    return submit_image(*_reader(running), body)


def _restart(reference_factory: ReferenceFactory, running: RunningReference) -> RunningReference:
    assert running.stop(signal.SIGKILL) == -signal.SIGKILL
    again = reference_factory(directory=running.directory, provision=False)
    again.profile = running.profile  # same store: the provisioned keys still work
    return again


def test_kill_between_attempts_loses_no_attempt(
    reference_factory: ReferenceFactory, receiver: Receiver
) -> None:
    running = reference_factory()
    receiver.script("/between", [Reply(500), Reply(500)])
    generation_id = _submit(running, receiver.url("/between"))
    receiver.wait_for("/between", 1, timeout_s=10)
    # Attempt 1 is committed (pending_retry), attempt 2 is 1 s away: kill now.
    wait_for_delivery(
        *_reader(running), generation_id, lambda r: len(r["attempts"]) == 1, timeout_s=15
    )
    again = _restart(reference_factory, running)
    killed_after = len(receiver.arrivals("/between"))
    arrivals = receiver.wait_for("/between", 3, timeout_s=15)
    record = wait_for_delivery(*_reader(again), generation_id, "delivered", timeout_s=15)
    assert killed_after <= 2  # the kill fell inside the retry sequence
    assert [a.header("x-service-attempt") for a in arrivals] == ["1", "2", "3"]
    assert len({a.body for a in arrivals}) == 1
    assert [a["status"] for a in record["attempts"]] == [500, 500, 200]


def test_kill_during_an_attempt_makes_it_again(
    reference_factory: ReferenceFactory, receiver: Receiver
) -> None:
    running = reference_factory()
    receiver.script("/during", [Reply(200, delay_s=4.0)])
    generation_id = _submit(running, receiver.url("/during"))
    (first,) = receiver.wait_for("/during", 1, timeout_s=10)
    again = _restart(reference_factory, running)  # the attempt is still waiting for a reply
    arrivals = receiver.wait_for("/during", 2, timeout_s=15)
    record = wait_for_delivery(*_reader(again), generation_id, "delivered", timeout_s=15)
    # Not recorded before the kill, so made again under the same number and event id.
    assert arrivals[1].header("x-service-attempt") == "1"
    assert arrivals[1].header("x-service-delivery") == first.header("x-service-delivery")
    assert arrivals[1].body == first.body
    assert [a["n"] for a in record["attempts"]] == [1]
