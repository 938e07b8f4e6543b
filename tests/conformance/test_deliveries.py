"""Delivery chains and records: submits name their target, waits have absolute deadlines
(a second wait after a miss does not wait again), arrivals are counted in all, records
are matched by target_url and polled with a deadline, and refusals are set-up errors."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from conformance.findings import RuleBroken
from conformance.observe import deliveries
from conformance.observe.deliveries import (
    Chain,
    Chains,
    arrival_gaps,
    find_record,
    records_of,
    submit_with_target,
    wait_for_record,
)
from conformance.observe.receiver import Delivery, Receiver, Reply
from conformance.target.client import ApiClient, Recorder
from conformance.target.profile import Profile
from conformance.target.setup import SetupFailed

PROFILE = """
base_url = "http://127.0.0.1:9"
key_prefix = "gk"
[keys.primary]
key = "gk_DELIVERIEScanary0primary0key001"
scopes = ["images:generate"]
[sandbox]
max_generation_seconds = 1
[timing]
tolerance_seconds = 0.2
"""


class FakeService:
    """An IUT stand-in: answers submits 202 after POSTing the event *sends* times to the
    target (the suite's receiver on loopback), and serves scripted delivery lists."""

    def __init__(self, *, status: int = 202, sends: int = 1) -> None:
        self.status = status
        self.sends = sends
        self.bodies: list[dict[str, Any]] = []
        self.records: list[Any] = []
        self.list_reads = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            self.list_reads += 1
            records = self.records[min(self.list_reads, len(self.records)) - 1]
            return httpx.Response(200, json={"deliveries": records, "total": len(records or [])})
        body = json.loads(request.content)
        self.bodies.append(body)
        if self.status != 202:
            return httpx.Response(self.status, json={"detail": "refused"})
        url = body.get("callback_url") or body["webhook"].get("url")
        for n in range(self.sends):
            httpx.post(url, json={"id": "evt_ab"}, headers={"X-Service-Attempt": str(n + 1)})
        return httpx.Response(202, json={"id": f"gen_{len(self.bodies)}"})


def _client(profile: Profile, service: FakeService) -> ApiClient:
    return ApiClient(profile, Recorder(profile.redactor()), transport=httpx.MockTransport(service))


def test_submit_names_the_target_and_returns_the_id(profile: Profile) -> None:
    service = FakeService(sends=0)
    client = _client(profile, service)
    assert submit_with_target(client, "http://127.0.0.1:1/h") == "gen_1"
    submit_with_target(client, "http://127.0.0.1:1/h", kind="webhook.id", webhook_id="wh_1")
    assert service.bodies[0]["webhook"] == {"url": "http://127.0.0.1:1/h"}
    assert service.bodies[1]["webhook"] == {"id": "wh_1"}


def test_refused_submit_is_a_setup_error(profile: Profile) -> None:
    with pytest.raises(SetupFailed, match="answered 500, expected 202"):
        submit_with_target(_client(profile, FakeService(status=500)), "http://127.0.0.1:1/h")


def test_records_are_matched_by_target_and_event(profile: Profile) -> None:
    service = FakeService()
    service.records = [[{"target_url": "u1", "event_type": "a"}, {"target_url": "u2"}], None]
    client = _client(profile, service)
    listed = records_of(client, "gen_1")
    assert find_record(listed, "u2") == {"target_url": "u2"}
    assert find_record(listed, "u1", "b") is None
    assert find_record(listed, "u1", "a") is not None
    with pytest.raises(SetupFailed, match="without a deliveries array"):
        records_of(client, "gen_1")  # the second read answers deliveries: null


def test_wait_for_record_polls_until_it_holds_or_the_deadline(profile: Profile) -> None:
    service = FakeService()
    pending = [{"target_url": "u", "outcome": "pending_retry"}]
    service.records = [pending, pending, [{"target_url": "u", "outcome": "exhausted"}]]
    client = _client(profile, service)
    record = wait_for_record(client, "g", "u", lambda r: r["outcome"] == "exhausted", 5.0)
    assert record == {"target_url": "u", "outcome": "exhausted"}
    assert service.list_reads == 3
    started = time.monotonic()
    last = wait_for_record(client, "g", "u", lambda r: False, 0.3)
    assert last == {"target_url": "u", "outcome": "exhausted"}
    assert time.monotonic() - started < 2.0


def test_arrival_gaps_are_between_successive_arrivals() -> None:
    made = [
        Delivery(raw_body=b"", headers=httpx.Headers(), arrived_at=t, path="/", method="POST")
        for t in (10.0, 11.0, 13.5)
    ]
    assert arrival_gaps(made) == pytest.approx([1.0, 2.5])


def test_window_after_first_counts_capped_replies_and_backoff(profile: Profile) -> None:
    chains = Chains(_client(profile, FakeService()), Receiver(), "unit")
    endpoint = chains.receiver.endpoint("w")
    chain = Chain("w", endpoint, (Reply(500), Reply(200, delay=30)), "webhook.url", 0.2, 1.0)
    # attempt 1 answered at once, backoff 1 s; attempt 2 held 30 s, capped at 10, then 2 s.
    assert chain.window_after_first(1) == pytest.approx(2.0)
    assert chain.window_after_first(2) == pytest.approx(2 * 1.0 + 0.2 + 2.0)
    assert chain.window_after_first(3) == pytest.approx(2 * 1.0 + 0.2 + 2 * 12.0 + 0.2 + 2.0)


def test_chain_waits_with_absolute_deadlines_and_counts_every_arrival(
    profile: Profile, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deliveries, "BACKOFF_SECONDS", (0.1, 0.1))
    chains = Chains(_client(profile, FakeService(sends=2)), receiver, "unit")
    try:
        chain = chains.start("two", [Reply(500)])
        assert len(chain.wait_for(2, "two attempts")) == 2
        with pytest.raises(RuleBroken, match=r"^DLV-X-01: a third attempt: \[chain two") as info:
            chain.wait_for(3, "a third attempt", rule="DLV-X-01")
        assert info.value.ids == ("DLV-X-01",)  # the rule named, the context in the message
        started = time.monotonic()
        with pytest.raises(RuleBroken):  # past its deadline: no second wait
            chain.wait_for(3, "a third attempt")
        assert time.monotonic() - started < 0.5
        chain.assert_arrivals(2, 0.1, "two attempts")
        with pytest.raises(RuleBroken, match=r"^one attempt: expected exactly 1 arrival"):
            chain.assert_arrivals(1, 0.1, "one attempt")
    finally:
        chains.close()


def test_refused_chain_reraises_its_setup_error(profile: Profile, receiver: Receiver) -> None:
    chains = Chains(_client(profile, FakeService(status=503)), receiver, "unit")
    try:
        chain = chains.start("refused", [Reply(200)])
        with pytest.raises(SetupFailed, match="answered 503"):
            chain.wait_for(1, "a first attempt")
        with pytest.raises(ValueError, match="started twice"):
            chains.start("refused", [Reply(200)])
    finally:
        chains.close()
