"""The event envelope's own fields (spec §2 Event envelope, §6 Delivery request, §9
Versioning), judged on bodies delivered to each kind of target.

The generations are set up once for the module (:class:`conformance.observe.events.EventLab`);
each check judges one statement on what arrived.
"""

from __future__ import annotations

import re
from datetime import datetime

import pytest

from conformance.checks.scenarios import (
    BY_TARGET,
    BY_TARGET_AND_FAILED,
    CALLBACK,
    FAILED_INLINE,
    INLINE,
    PER_REQUEST,
    REGISTERED,
    VIDEO,
)
from conformance.observe.events import (
    COMPLETED,
    ENVELOPE_FIELDS,
    FAILED,
    EventLab,
    Scenario,
)
from conformance.run.fixtures.labs import Labs
from conformance.target.profile import Profile
from conformance.target.setup import SetupFailed

#: "form evt_<hex>": hexadecimal digits in either case.
_EVENT_ID = re.compile(r"evt_[0-9a-fA-F]+")


@pytest.fixture(scope="module")
def lab(labs: Labs) -> EventLab:
    return labs.events("envelope-fields", INLINE, CALLBACK)


def _has_offset(value: object) -> bool:
    """Whether *value* is an ISO 8601 date-time carrying a UTC offset."""
    if not isinstance(value, str):
        return False
    try:
        return datetime.fromisoformat(value.upper()).tzinfo is not None
    except ValueError:
        return False


@pytest.mark.parametrize("scenario", BY_TARGET_AND_FAILED)
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
    lab.get(scenario).expect(
        "id", lambda seen: isinstance(seen, str) and bool(_EVENT_ID.fullmatch(seen)), "evt_<hex>"
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
    lab.get(scenario).expect("event", lambda seen: seen == event, repr(event))


@pytest.mark.parametrize("scenario", BY_TARGET)
@pytest.mark.requirement("EVT-ENV-03")
def test_envelope_created_at_carries_offset(lab: EventLab, scenario: Scenario) -> None:
    """The envelope's created_at is an ISO 8601 timestamp with a UTC offset (any ISO 8601
    form: extended or basic, with or without fractions, Z or an offset)."""
    lab.get(scenario).expect(
        "created_at",
        _has_offset,
        "an ISO 8601 timestamp with offset (2026-08-01T12:00:00Z, +02:00)",
    )


@pytest.mark.parametrize("scenario", BY_TARGET)
@pytest.mark.requirement("VER-ENV-01")
def test_envelope_carries_api_version(lab: EventLab, scenario: Scenario) -> None:
    """Every envelope carries api_version."""
    lab.get(scenario).field("api_version")


@pytest.mark.parametrize("scenario", BY_TARGET)
@pytest.mark.requirement("EVT-ENV-04")
def test_envelope_api_version_is_string(lab: EventLab, scenario: Scenario) -> None:
    """The envelope's api_version is a string."""
    lab.get(scenario).expect("api_version", lambda seen: isinstance(seen, str), "a string")


@pytest.mark.parametrize("scenario", BY_TARGET)
@pytest.mark.requirement("VER-ENV-02")
def test_envelope_api_version_is_profile_version(
    lab: EventLab, scenario: Scenario, profile: Profile
) -> None:
    """api_version is the date string the profile names (the spec's 2026-08-01)."""
    wanted = profile.api_version
    lab.get(scenario).expect("api_version", lambda seen: seen == wanted, repr(wanted))


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


@pytest.mark.parametrize("scenario", PER_REQUEST)
@pytest.mark.requirement("EVT-ENV-05")
def test_envelope_webhook_id_null_without_registered_webhook(
    lab: EventLab, scenario: Scenario
) -> None:
    """webhook_id is null when the delivery was bound by webhook.url or callback_url."""
    lab.get(scenario).expect(
        "webhook_id", lambda seen: seen is None, "null (no registered webhook used)"
    )


@pytest.mark.console
@pytest.mark.requirement("EVT-ENV-06")
def test_envelope_webhook_id_names_registered_webhook(lab: EventLab) -> None:
    """webhook_id is the registered webhook's id when the delivery went through webhook.id."""
    generated = lab.get(REGISTERED)
    assert generated.webhook is not None
    wanted = generated.webhook.id
    generated.expect("webhook_id", lambda seen: seen == wanted, repr(wanted))


@pytest.mark.parametrize("scenario", BY_TARGET)
@pytest.mark.requirement("EVT-ENV-07")
def test_envelope_data_is_object(lab: EventLab, scenario: Scenario) -> None:
    """The envelope's data is a JSON object."""
    lab.get(scenario).expect("data", lambda seen: isinstance(seen, dict), "a JSON object")
