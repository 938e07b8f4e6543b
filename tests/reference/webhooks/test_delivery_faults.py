"""The delivery faults change only what they name: with none on, lists and requests pass
through unchanged; each record, list and per-attempt fault changes its own field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from reference.fault import Faults
from reference.faults import FAULTS
from reference.webhooks import delivery_faults, envelopes
from reference.webhooks.sender import DeliveryRequest


def _answer() -> dict[str, Any]:
    attempts = [
        {"n": 1, "at": "2026-01-01T00:00:00.000+00:00", "status": 500, "ms": 1200, "error": "e"},
        {"n": 2, "at": "2026-01-01T00:00:02.000+00:00", "status": 200, "ms": 30, "error": None},
    ]
    record = {
        "id": "evt_1",
        "event_type": "generation.completed",
        "outcome": "delivered",
        "status_code": 200,
        "target_url": "http://127.0.0.1:5/hooks/x?q=1",
        "attempts": attempts,
        "mode": "registered",
    }
    return {"deliveries": [record], "total": 1}


def _shown(*names: str, listing: delivery_faults.Listing = "generation") -> dict[str, Any]:
    return delivery_faults.list_answer(Faults(frozenset(names)), _answer(), listing)


def test_every_fault_of_the_module_is_registered() -> None:
    assert set(delivery_faults.DECLARED) <= set(FAULTS.values())
    assert delivery_faults.active(Faults(frozenset({"webhook-list-empty"})))


def test_no_fault_changes_nothing() -> None:
    assert not delivery_faults.active(Faults())
    assert delivery_faults.list_answer(Faults(), _answer(), "webhook") == _answer()
    assert delivery_faults.per_attempt(Faults()) is None


@pytest.mark.parametrize(
    ("fault", "field", "expected"),
    [
        ("event-type-short", "event_type", "completed"),
        ("outcome-success-word", "outcome", "success"),
        ("status-code-string", "status_code", "200"),
        ("target-url-origin-only", "target_url", "http://127.0.0.1:5"),
    ],
)
def test_record_fault_changes_its_field(fault: str, field: str, expected: object) -> None:
    assert _shown(fault)["deliveries"][0][field] == expected


def test_attempt_faults_change_the_attempts() -> None:
    def attempts(*names: str) -> list[dict[str, Any]]:
        shown: list[dict[str, Any]] = _shown(*names)["deliveries"][0]["attempts"]
        return shown

    assert [a["n"] for a in attempts("record-drops-first-attempt")] == [2]
    assert [a["n"] for a in attempts("record-keeps-last-attempt")] == [2]
    assert [a["n"] for a in attempts("attempt-n-from-zero")] == [0, 1]
    assert [a["status"] for a in attempts("attempt-status-of-last")] == [200, 200]
    assert all("at" not in a for a in attempts("attempt-at-missing"))
    assert all("error" not in a for a in attempts("attempt-error-missing"))
    assert [a["ms"] for a in attempts("attempt-ms-float")] == [1.2, 0.03]


def test_list_faults_change_the_list() -> None:
    assert _shown("registered-unlisted") == {"deliveries": [], "total": 0}
    doubled = _shown("duplicate-records")
    assert len(doubled["deliveries"]) == doubled["total"] == 2
    assert "total" not in _shown("generation-list-total-missing")
    assert "total" in _shown("generation-list-total-missing", listing="webhook")
    assert "total" not in _shown("webhook-list-total-missing", listing="webhook")
    assert _shown("list-total-string")["total"] == "1"
    assert _shown("webhook-list-empty", listing="webhook") == {"deliveries": [], "total": 0}
    assert len(_shown("webhook-list-empty")["deliveries"]) == 1  # the generation list


def _request(attempt: int) -> DeliveryRequest:
    body = {"id": "evt_orig", "event": "generation.completed", "created_at": "then"}
    return DeliveryRequest(
        delivery_id="evt_orig",
        event_type="generation.completed",
        generation_id="gen_1",
        url="http://127.0.0.1:5/h",
        address="127.0.0.1",
        body=envelopes.body_bytes(body),
        attempt=attempt,
        secret="s",
    )


def _sent(fault: str, attempt: int) -> tuple[str, dict[str, Any]]:
    change = delivery_faults.per_attempt(Faults(frozenset({fault})))
    assert change is not None
    sent = change(_request(attempt))
    return sent.delivery_id, json.loads(sent.body)


def test_per_attempt_faults_change_what_is_sent() -> None:
    assert _sent("delivery-id-per-attempt", 1) == ("evt_orig", json.loads(_request(1).body))
    new_id, body = _sent("delivery-id-per-attempt", 2)
    assert new_id == body["id"] != "evt_orig"
    assert _sent("retry-body-changes", 1)[1]["created_at"] == "then"
    assert _sent("retry-body-changes", 2)[1]["created_at"] != "then"
    assert _sent("shared-delivery-id", 1) == _sent("shared-delivery-id", 2)
    assert _sent("shared-delivery-id", 1)[0] == delivery_faults.SHARED_ID
