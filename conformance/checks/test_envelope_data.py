"""The envelope's data fields (spec §2 Event envelope; §6 Behaviour on failure), judged
on the deliveries of a completed image, a completed video and a failed image generation.

Failure is driven by the profile's sandbox prompt (the sandbox contract); the
generations are set up once for the module and each check judges one field.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

from conformance.checks.scenarios import BY_OUTCOME, FAILED_INLINE, INLINE, VIDEO
from conformance.judge.asserts import is_json_integer
from conformance.observe.events import EventLab, Scenario
from conformance.run.fixtures.labs import Labs


@pytest.fixture(scope="module")
def lab(labs: Labs) -> EventLab:
    return labs.events("envelope-data", INLINE, FAILED_INLINE)


@pytest.mark.parametrize("scenario", BY_OUTCOME)
@pytest.mark.requirement("EVT-DATA-01")
def test_data_generation_id_equals_submit_id(lab: EventLab, scenario: Scenario) -> None:
    """data.generation_id is the id the submit's 202 returned."""
    generated = lab.get(scenario)
    submitted = generated.generation_id
    generated.expect(
        "data.generation_id", lambda seen: seen == submitted, f"{submitted!r} (the 202's id)"
    )


@pytest.mark.requirement("EVT-DATA-02")
def test_data_status_completed_on_success(lab: EventLab) -> None:
    """data.status is "completed" in the event of a successful generation."""
    lab.get(INLINE).expect("data.status", lambda seen: seen == "completed", "'completed'")


@pytest.mark.parametrize(
    ("scenario", "kind"),
    [
        pytest.param(INLINE, "image", id="image"),
        pytest.param(VIDEO, "video", id="video"),
    ],
)
@pytest.mark.requirement("EVT-DATA-03")
def test_data_type_names_the_endpoint_kind(lab: EventLab, scenario: Scenario, kind: str) -> None:
    """data.type is "image" for an image submit and "video" for a video submit."""
    lab.get(scenario).expect(
        "data.type", lambda seen: seen == kind, f"{kind!r} for POST {scenario.path}"
    )


@pytest.mark.parametrize("scenario", BY_OUTCOME)
@pytest.mark.requirement("EVT-DATA-04")
def test_data_model_is_string(lab: EventLab, scenario: Scenario) -> None:
    """data.model is a string."""
    lab.get(scenario).expect("data.model", lambda seen: isinstance(seen, str), "a string")


@pytest.mark.requirement("EVT-DATA-05")
def test_data_output_url_string_on_success(lab: EventLab) -> None:
    """data.output_url is a string in the event of a successful generation."""
    lab.get(INLINE).expect(
        "data.output_url", lambda seen: isinstance(seen, str), "a string on success"
    )


@pytest.mark.sandbox
@pytest.mark.requirement("EVT-DATA-06")
def test_data_output_url_null_on_failure(lab: EventLab) -> None:
    """data.output_url is null in the event of a failed generation."""
    lab.get(FAILED_INLINE).expect("data.output_url", lambda seen: seen is None, "null on failure")


@pytest.mark.requirement("EVT-DATA-07")
def test_data_error_message_null_on_success(lab: EventLab) -> None:
    """data.error_message is null in the event of a successful generation."""
    lab.get(INLINE).expect("data.error_message", lambda seen: seen is None, "null on success")


@pytest.mark.sandbox
@pytest.mark.requirement("EVT-DATA-08")
def test_data_error_message_populated_on_failure(lab: EventLab) -> None:
    """data.error_message is a non-empty string in the event of a failed generation."""
    lab.get(FAILED_INLINE).expect(
        "data.error_message",
        lambda seen: isinstance(seen, str) and bool(seen.strip()),
        "populated on failure",
    )


@pytest.mark.parametrize("scenario", BY_OUTCOME)
@pytest.mark.requirement("EVT-DATA-09")
def test_data_credits_used_is_integer(lab: EventLab, scenario: Scenario) -> None:
    """data.credits_used is an integer (a JSON number without fraction, not a boolean)."""
    lab.get(scenario).expect("data.credits_used", is_json_integer, "an integer")


@pytest.mark.parametrize(
    ("scenario", "zero"),
    [
        pytest.param(INLINE, False, id="completed-not-negative"),
        pytest.param(FAILED_INLINE, True, id="failed-zero", marks=pytest.mark.sandbox),
    ],
)
@pytest.mark.requirement("EVT-DATA-10")
def test_data_credits_used_not_negative_and_zero_on_failure(
    lab: EventLab, scenario: Scenario, zero: bool
) -> None:
    """data.credits_used is never negative, and 0 once a failed generation's credits were
    refunded (an interpretation: the spec gives only the type)."""
    generated = lab.get(scenario)
    if zero:
        generated.expect("data.credits_used", lambda seen: seen == 0, "0 on failure (refunded)")
    else:
        generated.expect(
            "data.credits_used", lambda seen: is_json_integer(seen) and seen >= 0, ">= 0"
        )


@pytest.mark.requirement("EVT-DATA-11")
def test_data_output_url_is_absolute_http_url(lab: EventLab) -> None:
    """data.output_url of a successful generation is an absolute http(s) URL (an
    interpretation: the spec says string)."""

    def absolute_http(seen: Any) -> bool:
        parts = urlsplit(seen) if isinstance(seen, str) else None
        return parts is not None and parts.scheme in {"http", "https"} and bool(parts.netloc)

    lab.get(INLINE).expect("data.output_url", absolute_http, "an absolute http(s) URL")
