"""The run-wide comparison of a result's two channels (GEN-CONSIST-01): final events are
read off deliveries and logged per process, compared field by field with a read, and the
check that compares them is scheduled after every other check, under xdist too."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

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
from conformance.run.plugin.channels import LAST_MODULE, last_file_scheduling

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


# -- the scheduler --------------------------------------------------------------------


class _Node:
    """A worker as xdist drives it: it runs a check only once it knows the next one or
    that none follows (shut down)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.gateway = SimpleNamespace(id=name)
        self.queue: list[int] = []
        self.ran = 0
        self.shutting_down = False

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.queue.extend(indexes)

    def shutdown(self) -> None:
        self.shutting_down = True

    def can_run(self) -> bool:
        return self.ran < len(self.queue) and (self.ran + 1 < len(self.queue) or self.shutting_down)

    def __repr__(self) -> str:
        return self.name


def _config(workers: int) -> Any:
    values = {"tx": [f"{workers}*popen"], "dist": "loadfile"}
    return SimpleNamespace(
        getvalue=values.__getitem__, option=SimpleNamespace(loadscopereorder=False)
    )


def _run(collection: list[str], workers: int, prefer: int) -> list[str]:
    """Drive the scheduler to the end; the node ids in the order they completed. Node
    *prefer* runs whenever it can (the others are slower)."""
    scheduler = last_file_scheduling()(_config(workers))
    nodes = [_Node(f"gw{i}") for i in range(workers)]
    for node in nodes:
        scheduler.add_node(node)
    for node in nodes:
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    order: list[str] = []
    for _ in range(10 * len(collection)):
        ready = [n for n in nodes[prefer:] + nodes[:prefer] if n.can_run()]
        if not ready:
            break
        node = ready[0]
        index = node.queue[node.ran]
        node.ran += 1
        order.append(collection[index])
        scheduler.mark_test_complete(node, index)
    assert scheduler.tests_finished
    return order


LAST = f"checks/{LAST_MODULE}"
COLLECTION = [
    "checks/test_a.py::test_1",
    "checks/test_a.py::test_2",
    f"{LAST}::test_state",
    f"{LAST}::test_run_wide",
    "checks/test_b.py::test_1",
    "checks/test_c.py::test_1",
    "checks/test_c.py::test_2",
    "checks/test_c.py::test_3",
    "checks/test_d.py::test_1",
]


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("prefer", [0, 1])
def test_scheduler_runs_the_last_module_after_every_other_check(workers: int, prefer: int) -> None:
    order = _run(COLLECTION, workers, prefer % workers)
    assert sorted(order) == sorted(COLLECTION), "every check runs once"
    assert order[-2:] == [f"{LAST}::test_state", f"{LAST}::test_run_wide"]


def test_scheduler_runs_the_last_module_alone() -> None:
    only = [f"{LAST}::test_state", f"{LAST}::test_run_wide"]
    assert _run(only, 2, 0) == only


def test_scheduler_without_the_last_module_is_loadfile() -> None:
    others = [nodeid for nodeid in COLLECTION if LAST not in nodeid]
    assert sorted(_run(others, 2, 1)) == sorted(others)
