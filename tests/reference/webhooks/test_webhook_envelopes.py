"""Envelope and callback bodies against the spec's schemas (spec §2 event envelope, §4)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import pytest
from webhook_harness import assert_schema

from genapi_spec import API_VERSION
from reference.webhooks import envelopes

GENERATION_OK = {
    "id": "gen_abc",
    "type": "image",
    "model": "img-1",
    "status": "completed",
    "output_url": "http://127.0.0.1:1/outputs/a.png",
    "error_message": None,
    "credits_used": 4,
}
GENERATION_FAILED = {
    **GENERATION_OK,
    "status": "failed",
    "output_url": None,
    "error_message": "sandbox failure",
    "credits_used": 0,
}


def _envelope(
    generation: Mapping[str, object], event: str, webhook_id: str | None = None
) -> dict[str, Any]:
    return envelopes.build_envelope(
        event_id=envelopes.new_event_id(),
        event=event,
        data=envelopes.event_data(generation),
        webhook_id=webhook_id,
        created_at=envelopes.timestamp_now(),
    )


def test_event_id_is_evt_hex() -> None:
    assert re.fullmatch(r"evt_[0-9a-f]{32}", envelopes.new_event_id())


def test_timestamp_now_carries_utc_offset() -> None:
    stamp = envelopes.timestamp_now()
    assert stamp.endswith("+00:00")
    assert datetime.fromisoformat(stamp).utcoffset() is not None


@pytest.mark.parametrize(
    ("generation", "event"),
    [
        pytest.param(GENERATION_OK, envelopes.EVENT_COMPLETED, id="completed"),
        pytest.param(GENERATION_FAILED, envelopes.EVENT_FAILED, id="failed"),
    ],
)
def test_envelope_matches_strict_schema(generation: dict[str, object], event: str) -> None:
    envelope = _envelope(generation, event)
    assert_schema("strict-event-envelope", envelope)
    assert envelope["api_version"] == API_VERSION
    assert envelope["webhook_id"] is None
    assert envelope["data"]["generation_id"] == "gen_abc"


def test_registered_envelope_names_its_webhook() -> None:
    envelope = _envelope(GENERATION_OK, envelopes.EVENT_COMPLETED, webhook_id="wh_1")
    assert_schema("strict-event-envelope", envelope)
    assert envelope["webhook_id"] == "wh_1"


@pytest.mark.parametrize(
    ("generation", "event"),
    [
        pytest.param(GENERATION_OK, envelopes.EVENT_COMPLETED, id="completed"),
        pytest.param(GENERATION_FAILED, envelopes.EVENT_FAILED, id="failed"),
    ],
)
def test_callback_body_copies_every_data_field_to_top_level(
    generation: dict[str, object], event: str
) -> None:
    envelope = _envelope(generation, event)
    body = envelopes.callback_body(envelope)
    assert_schema("callback-body", body)
    for name, value in envelope["data"].items():
        assert body[name] == value, name
    assert body["data"] == envelope["data"]
    assert "output_url" in body  # spec §4 rule 2: present for every target type


def test_callback_body_fails_strict_schema() -> None:
    """The strict schema tells the two shapes apart (inline must not be flattened)."""
    body = envelopes.callback_body(_envelope(GENERATION_OK, envelopes.EVENT_COMPLETED))
    with pytest.raises(AssertionError):
        assert_schema("strict-event-envelope", body)


def test_body_bytes_are_compact_utf8_and_round_trip() -> None:
    envelope = _envelope({**GENERATION_OK, "model": "modèle"}, envelopes.EVENT_COMPLETED)
    raw = envelopes.body_bytes(envelope)
    assert json.loads(raw) == envelope
    assert b", " not in raw and not raw.endswith(b"\n")
    assert "modèle".encode() in raw


def test_envelope_without_offset_fails_schema() -> None:
    """The fault form of created_at is caught by the schema (EVT-ENV-03)."""
    envelope = _envelope(GENERATION_OK, envelopes.EVENT_COMPLETED)
    envelope["created_at"] = envelopes.timestamp_now(with_offset=False)
    with pytest.raises(AssertionError):
        assert_schema("event-envelope", envelope)
