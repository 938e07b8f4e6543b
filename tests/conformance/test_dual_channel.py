"""The run-wide comparison of a result's two channels (GEN-CONSIST-01): final events are
read off deliveries and logged per process, compared field by field with a read (its
scheduling after every other check, under xdist too: ``test_schedule.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from conformance.observe.events import (
    COMPLETED,
    FAILED,
    Disagreement,
    FinalEvent,
    FinalEventLog,
    disagreements,
    final_event,
    final_state,
    read_final_events,
)
from conformance.observe.receiver import Delivery, Receiver

DONE = {
    "generation_id": "gen_1",
    "status": "completed",
    "credits_used": 4,
    "output_url": "https://cdn.example/out.png",
    "error_message": None,
}


def _delivery(body: object, headers: dict[str, str] | None = None) -> Delivery:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return Delivery(raw, httpx.Headers(headers or {}), 0.0, "/hooks/x", "POST")


def test_final_event_is_read_off_a_final_delivery_only() -> None:
    found = final_event(_delivery({"event": COMPLETED, "data": DONE}))
    assert found == FinalEvent("gen_1", COMPLETED, final_state(DONE))
    assert found is not None
    assert found.state == {
        "status": "completed",
        "credits_used": 4,
        "output_url": True,
        "error_message": False,
    }, "an output URL is kept as set or not set, never as the URL"
    assert final_event(_delivery({"event": "webhook.test", "data": DONE})) is None
    assert final_event(_delivery(b"not json")) is None
    assert final_event(_delivery({"event": COMPLETED, "data": "x"})) is None
    assert final_event(_delivery({"event": FAILED, "data": {"status": "failed"}})) is None


def test_final_event_names_its_generation_by_the_header_when_data_does_not() -> None:
    delivery = _delivery(
        {"event": FAILED, "data": {"status": "failed", "error_message": "boom"}},
        {"X-Service-Generation": "gen_2"},
    )
    found = final_event(delivery)
    assert found is not None
    assert (found.generation_id, found.state["error_message"]) == ("gen_2", True)


def test_disagreements_name_generation_field_and_both_values() -> None:
    event = final_state(DONE)
    read = final_state({**DONE, "credits_used": 0, "output_url": None})
    found = disagreements("gen_1", event, read)
    assert found == [
        Disagreement("gen_1", "credits_used", 4, 0),
        Disagreement("gen_1", "output_url", True, False),
    ]
    assert [d.describe() for d in found] == [
        "gen_1: credits_used 4 by webhook, 0 by GET",
        "gen_1: output_url set by webhook, not set by GET",
    ]
    assert disagreements("gen_1", event, final_state(DONE)) == []
    (missing,) = disagreements("gen_1", event, None)
    assert missing.field == "record"


def test_log_appends_per_event_is_bounded_and_read_back_once(tmp_path: Path) -> None:
    folder = tmp_path / "events"
    log = FinalEventLog(folder / "gw0.jsonl", limit=2)
    done = _delivery({"event": COMPLETED, "data": DONE})
    log.add(done)
    log.add(done)  # a retry of the same delivery: read back once
    log.add(_delivery({"event": "webhook.test"}))  # not final: not logged
    log.add(_delivery({"event": COMPLETED, "data": {**DONE, "generation_id": "gen_3"}}))
    assert (log.logged, log.lost) == (2, 1)
    other = FinalEventLog(folder / "gw1.jsonl")
    other.add(_delivery({"event": FAILED, "data": {**DONE, "generation_id": "gen_4"}}))
    with (folder / "gw1.jsonl").open("a", encoding="utf-8") as out:
        out.write('{"generation_id": "gen_5", "ev')  # a writer still busy
    events = read_final_events(folder)
    assert [(e.generation_id, e.event) for e in events] == [("gen_1", COMPLETED), ("gen_4", FAILED)]
    assert read_final_events(tmp_path / "absent") == []


def test_receiver_hands_every_kept_delivery_to_its_observer(tmp_path: Path) -> None:
    log = FinalEventLog(tmp_path / "main.jsonl")
    body = json.dumps({"event": COMPLETED, "data": DONE}).encode()
    with Receiver(on_delivery=log.add) as receiver:
        endpoint = receiver.endpoint("dual")
        endpoint.respond_with_statuses([500])
        with httpx.Client(timeout=5) as client:
            assert client.post(endpoint.url, content=body).status_code == 500
            stray = receiver.url_for("/hooks/nobody")
            assert client.post(stray, content=body).status_code == 404
    assert log.logged == 2, "an exhausted attempt and a stray still carry the event"
    assert [e.generation_id for e in read_final_events(tmp_path)] == ["gen_1"]
