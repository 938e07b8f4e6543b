"""The event envelope's own fields (spec §2 Event envelope, §6 Delivery request, §9
Versioning), judged on bodies delivered to each kind of target.

The generations are set up once for the module (:class:`conformance.observe.events.EventLab`);
each check judges one statement on what arrived.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import pytest

from conformance.observe.events import (
    COMPLETED,
    ENVELOPE_FIELDS,
    FAILED,
    EventLab,
    Generated,
    Scenario,
)
from conformance.run.fixtures.labs import Labs
from conformance.target.profile import Profile
from conformance.target.setup import SetupFailed

INLINE = Scenario(kind="webhook.url")
CALLBACK = Scenario(kind="callback_url")
REGISTERED = Scenario(kind="webhook.id")
FAILED_INLINE = Scenario(kind="webhook.url", outcome="failed")
VIDEO = Scenario(kind="webhook.url", path="/v1/videos/generate")

#: Parameters over the kinds of target (spec §4 rule 1); a registered webhook needs a
#: console session.
BY_TARGET = [
    pytest.param(INLINE, id="webhook-url"),
    pytest.param(CALLBACK, id="callback-url"),
    pytest.param(REGISTERED, id="webhook-id", marks=pytest.mark.console),
]
#: Parameters over what the generation did: completed, failed (the sandbox's prompt).
BY_OUTCOME = [
    pytest.param(INLINE, id="completed"),
    pytest.param(FAILED_INLINE, id="failed", marks=pytest.mark.sandbox),
]

#: "form evt_<hex>": hexadecimal digits in either case.
_EVENT_ID = re.compile(r"evt_[0-9a-fA-F]+")


@pytest.fixture(scope="module")
def lab(labs: Labs) -> EventLab:
    made = labs.events("envelope-fields")
    made.start(INLINE, CALLBACK)
    return made


def _has_offset(value: object) -> bool:
    """Whether *value* is an ISO 8601 date-time carrying a UTC offset."""
    if not isinstance(value, str):
        return False
    try:
        return datetime.fromisoformat(value.upper()).tzinfo is not None
    except ValueError:
        return False


def _field(generated: Generated, name: str, requirement_id: str) -> Any:
    """The envelope's *name*; its absence fails *requirement_id*."""
    envelope = generated.envelope()
    assert name in envelope, (
        f"{requirement_id}: expected the envelope to carry {name!r}, saw the fields "
        f"{sorted(envelope)} "
        f"{generated.describe()}"
    )
    return envelope[name]


@pytest.mark.parametrize(
    "scenario",
    [*BY_TARGET, pytest.param(FAILED_INLINE, id="failed", marks=pytest.mark.sandbox)],
)
@pytest.mark.requirement("DLV-BODY-01")
def test_delivery_body_is_event_envelope(lab: EventLab, scenario: Scenario) -> None:
    """A delivery's body is a JSON object holding the event envelope's fields (each
    field's value is judged by its own check)."""
    generated = lab.get(scenario)
    try:
        body = generated.first.json()
    except ValueError:
        pytest.fail(
            f"DLV-BODY-01: expected a JSON body, saw {generated.first.raw_body[:200]!r} "
            f"{generated.describe()}"
        )
    assert isinstance(body, dict), (
        f"DLV-BODY-01: expected a JSON object (the event envelope), saw a JSON "
        f"{type(body).__name__} {generated.describe()}"
    )
    missing = [name for name in ENVELOPE_FIELDS if name not in body]
    assert not missing, (
        f"DLV-BODY-01: expected the event envelope's fields {list(ENVELOPE_FIELDS)}, "
        f"missing {missing} {generated.describe()}"
    )


@pytest.mark.parametrize("scenario", BY_TARGET)
@pytest.mark.requirement("EVT-ENV-01")
def test_envelope_id_has_evt_hex_form(lab: EventLab, scenario: Scenario) -> None:
    """The envelope's id is a string evt_<hex>."""
    generated = lab.get(scenario)
    seen = _field(generated, "id", "EVT-ENV-01")
    assert isinstance(seen, str) and _EVENT_ID.fullmatch(seen), (
        f"EVT-ENV-01: expected id of the form evt_<hex>, saw {seen!r} {generated.describe()}"
    )


@pytest.mark.parametrize(
    ("scenario", "event"),
    [
        pytest.param(INLINE, COMPLETED, id="completed"),
        pytest.param(FAILED_INLINE, FAILED, id="failed", marks=pytest.mark.sandbox),
    ],
)
@pytest.mark.requirement("EVT-ENV-02")
def test_envelope_event_names_the_event(lab: EventLab, scenario: Scenario, event: str) -> None:
    """The envelope's event is the name of what happened (completed or failed)."""
    generated = lab.get(scenario)
    seen = _field(generated, "event", "EVT-ENV-02")
    assert seen == event, (
        f"EVT-ENV-02: expected event {event!r}, saw {seen!r} {generated.describe()}"
    )


@pytest.mark.parametrize("scenario", BY_TARGET)
@pytest.mark.requirement("EVT-ENV-03")
def test_envelope_created_at_carries_offset(lab: EventLab, scenario: Scenario) -> None:
    """The envelope's created_at is an ISO 8601 timestamp with a UTC offset (any ISO 8601
    form: extended or basic, with or without fractions, Z or an offset)."""
    generated = lab.get(scenario)
    seen = _field(generated, "created_at", "EVT-ENV-03")
    assert _has_offset(seen), (
        f"EVT-ENV-03: expected an ISO 8601 timestamp with offset (e.g. "
        f"2026-08-01T12:00:00Z or ...+02:00), saw {seen!r} {generated.describe()}"
    )


@pytest.mark.parametrize("scenario", BY_TARGET)
@pytest.mark.requirement("VER-ENV-01")
def test_envelope_carries_api_version(lab: EventLab, scenario: Scenario) -> None:
    """Every envelope carries api_version."""
    generated = lab.get(scenario)
    envelope = generated.envelope()
    assert "api_version" in envelope, (
        f"VER-ENV-01: expected api_version in the envelope, saw the fields "
        f"{sorted(envelope)} {generated.describe()}"
    )


@pytest.mark.parametrize("scenario", BY_TARGET)
@pytest.mark.requirement("EVT-ENV-04")
def test_envelope_api_version_is_string(lab: EventLab, scenario: Scenario) -> None:
    """The envelope's api_version is a string."""
    generated = lab.get(scenario)
    seen = _field(generated, "api_version", "EVT-ENV-04")
    assert isinstance(seen, str), (
        f"EVT-ENV-04: expected api_version to be a string, saw {seen!r} {generated.describe()}"
    )


@pytest.mark.parametrize("scenario", BY_TARGET)
@pytest.mark.requirement("VER-ENV-02")
def test_envelope_api_version_is_profile_version(
    lab: EventLab, scenario: Scenario, profile: Profile
) -> None:
    """api_version is the date string the profile names (the spec's 2026-08-01)."""
    generated = lab.get(scenario)
    seen = _field(generated, "api_version", "VER-ENV-02")
    assert seen == profile.api_version, (
        f"VER-ENV-02: expected api_version {profile.api_version!r}, saw {seen!r} "
        f"{generated.describe()}"
    )


@pytest.mark.requirement("VER-ENV-03")
def test_envelope_api_version_same_across_targets_and_events(
    lab: EventLab, profile: Profile
) -> None:
    """Every envelope the service sends carries the same api_version."""
    scenarios = [INLINE, CALLBACK]
    if profile.sessions:
        scenarios.append(REGISTERED)
    lab.start(*scenarios, FAILED_INLINE, VIDEO)
    seen = {s.label: lab.get(s).envelope().get("api_version") for s in scenarios}
    for optional in (FAILED_INLINE, VIDEO):  # where the IUT offers them, compare them too
        try:
            seen[optional.label] = lab.get(optional).envelope().get("api_version")
        except SetupFailed:
            continue
    assert len({repr(v) for v in seen.values()}) == 1, (
        f"VER-ENV-03: expected one api_version in every envelope, saw {seen}"
    )


@pytest.mark.parametrize(
    "scenario",
    [pytest.param(INLINE, id="webhook-url"), pytest.param(CALLBACK, id="callback-url")],
)
@pytest.mark.requirement("EVT-ENV-05")
def test_envelope_webhook_id_null_without_registered_webhook(
    lab: EventLab, scenario: Scenario
) -> None:
    """webhook_id is null when the delivery was bound by webhook.url or callback_url."""
    generated = lab.get(scenario)
    seen = _field(generated, "webhook_id", "EVT-ENV-05")
    assert seen is None, (
        f"EVT-ENV-05: expected webhook_id null (no registered webhook used), saw {seen!r} "
        f"{generated.describe()}"
    )


@pytest.mark.console
@pytest.mark.requirement("EVT-ENV-06")
def test_envelope_webhook_id_names_registered_webhook(lab: EventLab) -> None:
    """webhook_id is the registered webhook's id when the delivery went through webhook.id."""
    generated = lab.get(REGISTERED)
    assert generated.webhook is not None
    seen = _field(generated, "webhook_id", "EVT-ENV-06")
    assert seen == generated.webhook.id, (
        f"EVT-ENV-06: expected webhook_id {generated.webhook.id!r}, saw {seen!r} "
        f"{generated.describe()}"
    )


@pytest.mark.parametrize("scenario", BY_TARGET)
@pytest.mark.requirement("EVT-ENV-07")
def test_envelope_data_is_object(lab: EventLab, scenario: Scenario) -> None:
    """The envelope's data is a JSON object."""
    generated = lab.get(scenario)
    seen = _field(generated, "data", "EVT-ENV-07")
    assert isinstance(seen, dict), (
        f"EVT-ENV-07: expected data to be a JSON object, saw {seen!r:.200} {generated.describe()}"
    )
