"""The event lab builds target bodies as spec §4 names them, waits with the profile's
deadline, runs each scenario once, turns a refused submit or a missing delivery into a
set-up error, and stops waiting for an absent event once the generation has settled."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from conformance.observe import timing
from conformance.observe.events import (
    CANCELLED,
    EventLab,
    Scenario,
    foreign_key,
    other_key,
    signing_secret,
    target_body,
)
from conformance.observe.receiver import DeliveryTimeout, Receiver
from conformance.observe.timing import delivery_deadline
from conformance.observe.waits import event_of, wait_for_event, wait_until_settled
from conformance.target.client import ApiClient, Recorder
from conformance.target.profile import CapabilityMissing, Profile, parse_profile
from conformance.target.setup import SetupFailed

PROFILE = (Path(__file__).parent / "events_profile.toml").read_text()


def test_target_body_per_kind() -> None:
    url = "http://127.0.0.1:1/hook"
    assert target_body("callback_url", url) == {"callback_url": url}
    assert target_body("webhook.url", url) == {"webhook": {"url": url}}
    assert target_body("webhook.id", url, webhook_id="wh_1", events=(CANCELLED,)) == {
        "webhook": {"id": "wh_1", "events": [CANCELLED]}
    }
    with pytest.raises(ValueError, match="no events field"):
        target_body("callback_url", url, events=(CANCELLED,))
    with pytest.raises(ValueError, match="needs the registered webhook's id"):
        target_body("webhook.id", url)


def test_delivery_deadline_adds_attempts_and_backoff(profile: Profile) -> None:
    assert delivery_deadline(profile) == pytest.approx(1 + 10 + 0.2)
    assert delivery_deadline(profile, attempts=3) == pytest.approx(1 + 30 + 1 + 2 + 0.2)


def test_signing_secret_missing_is_a_capability(profile: Profile) -> None:
    assert signing_secret(profile, "primary").reveal().startswith("psk_EVENTS")
    with pytest.raises(CapabilityMissing, match=r"keys\.unsigned\.signing_secret"):
        signing_secret(profile, "unsigned")


def test_other_key_prefers_the_same_account(profile: Profile) -> None:
    assert other_key(profile, "primary").role == "sibling"
    assert other_key(profile, "foreign").role in {"primary", "sibling"}
    lonely = parse_profile(PROFILE.split("[keys.sibling]")[0], env={})
    with pytest.raises(CapabilityMissing, match="a second key"):
        other_key(lonely, "primary")


_CHAIN_KEYS = """
[keys.low-limit-window]
key = "gk_EVENTScanary0lowlimit0key000005"
account = "low"
scopes = ["images:generate"]
signing_secret = "psk_EVENTScanary0lowlimit0signin05"
"""


def test_keys_a_chain_exhausts_are_never_lent_to_other_checks() -> None:
    """A low-limit-window key declared first, of its own account and signed, is never the
    other or the foreign key: its chain measures every request sent with it."""
    head, keys = PROFILE.split("[keys.primary]")
    chained = parse_profile(head + _CHAIN_KEYS + "[keys.primary]" + keys, env={})
    assert foreign_key(chained).role == "foreign"
    alone = parse_profile(
        head + _CHAIN_KEYS + "[keys.primary]" + keys.split("[keys.sibling]")[0], env={}
    )
    with pytest.raises(CapabilityMissing):
        other_key(alone, "primary")


class FakeService:
    """An IUT stand-in: answers submits 202 and, unless told not to, POSTs the event to
    the binding's URL (the suite's receiver on loopback) before answering."""

    def __init__(self, *, status: int = 202, deliver: bool = True) -> None:
        self.status = status
        self.deliver = deliver
        self.submits = 0
        self.reads = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            self.reads += 1
            return httpx.Response(200, json={"id": "gen_1", "status": "completed"})
        self.submits += 1
        body = json.loads(request.content)
        if self.status != 202:
            return httpx.Response(self.status, json={"detail": "refused"})
        if self.deliver:
            url = body.get("callback_url") or body["webhook"]["url"]
            envelope = {"id": "evt_ab", "event": "generation.completed", "data": {}}
            httpx.post(url, json=envelope, timeout=5.0)
        return httpx.Response(202, json={"id": f"gen_{self.submits}"})


def _lab(profile: Profile, receiver: Receiver, service: FakeService) -> EventLab:
    client = ApiClient(
        profile, Recorder(profile.redactor()), transport=httpx.MockTransport(service)
    )
    return EventLab(client, receiver, "unit")


def test_scenario_runs_once_and_keeps_its_deliveries(profile: Profile, receiver: Receiver) -> None:
    service = FakeService()
    lab = _lab(profile, receiver, service)
    try:
        first = lab.get(Scenario(kind="callback_url"))
        again = lab.get(Scenario(kind="callback_url"))
        other = lab.get(Scenario(kind="webhook.url"))
    finally:
        lab.close()
    assert first is again and other is not first
    assert service.submits == 2
    assert first.envelope()["id"] == "evt_ab"
    assert first.generation_id == "gen_1"
    assert "callback_url" in first.describe()


def test_refused_submit_is_a_setup_error(profile: Profile, receiver: Receiver) -> None:
    lab = _lab(profile, receiver, FakeService(status=500))
    try:
        with pytest.raises(SetupFailed, match="answered 500, expected 202"):
            lab.get(Scenario())
        with pytest.raises(SetupFailed):  # the failure is kept, not retried
            lab.get(Scenario())
    finally:
        lab.close()


def test_missing_delivery_is_a_setup_error(
    profile: Profile, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timing, "ATTEMPT_TIMEOUT_SECONDS", 0.1)  # a 1.3 s deadline
    lab = _lab(profile, receiver, FakeService(deliver=False))
    try:
        with pytest.raises(SetupFailed, match="expected 1 deliveries"):
            lab.get(Scenario())
    finally:
        lab.close()


def test_wait_until_settled_stops_at_a_final_status(profile: Profile, receiver: Receiver) -> None:
    service = FakeService()
    client = ApiClient(
        profile, Recorder(profile.redactor()), transport=httpx.MockTransport(service)
    )
    endpoint = receiver.endpoint("settled")
    try:
        status, arrived = wait_until_settled(client, "gen_1", endpoint)
    finally:
        endpoint.close()
    assert (status, arrived) == ("completed", [])
    assert service.reads == 1


def _post_event(endpoint_url: str, event: str) -> None:
    httpx.post(endpoint_url, content=json.dumps({"event": event}).encode(), timeout=5.0)


def test_wait_for_event_finds_the_event_behind_another(receiver: Receiver) -> None:
    # The spec says which events are sent, not their order: a first arrival of another
    # event does not hide the one awaited.
    endpoint = receiver.endpoint("event-order")
    try:
        _post_event(endpoint.url, "generation.started")
        _post_event(endpoint.url, CANCELLED)
        arrived = wait_for_event(endpoint, CANCELLED, timeout=2.0)
    finally:
        endpoint.close()
    assert [event_of(d) for d in arrived] == ["generation.started", CANCELLED]


def test_wait_for_event_names_what_arrived_instead(receiver: Receiver) -> None:
    endpoint = receiver.endpoint("event-missing")
    try:
        _post_event(endpoint.url, "generation.completed")
        with pytest.raises(
            DeliveryTimeout, match=r"events that arrived: \['generation.completed'\]"
        ):
            wait_for_event(endpoint, CANCELLED, timeout=0.5)
    finally:
        endpoint.close()


def test_event_of_reads_the_body_then_the_event_header(receiver: Receiver) -> None:
    endpoint = receiver.endpoint("event-of")
    try:
        _post_event(endpoint.url, CANCELLED)
        httpx.post(endpoint.url, content=b"not json", headers={"X-Service-Event": "x"}, timeout=5.0)
        arrived = endpoint.wait_for(2, timeout=2.0)
    finally:
        endpoint.close()
    assert [event_of(d) for d in arrived] == [CANCELLED, "x"]
