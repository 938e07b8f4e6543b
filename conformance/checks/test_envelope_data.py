"""The envelope's data fields (spec §2 Event envelope; §6 Behaviour on failure), judged
on the deliveries of a completed image, a completed video and a failed image generation.

Failure is driven by the profile's sandbox prompt (the sandbox contract); the
generations are set up once for the module and each check judges one field.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

from conformance.observe.events import EventLab, Generated, Scenario
from conformance.run.fixtures.labs import Labs

COMPLETED = Scenario(kind="webhook.url")
FAILED = Scenario(kind="webhook.url", outcome="failed")
VIDEO = Scenario(kind="webhook.url", path="/v1/videos/generate")

BY_OUTCOME = [
    pytest.param(COMPLETED, id="completed"),
    pytest.param(FAILED, id="failed", marks=pytest.mark.sandbox),
]


@pytest.fixture(scope="module")
def lab(labs: Labs) -> EventLab:
    made = labs.events("envelope-data")
    made.start(COMPLETED, FAILED)
    return made


def _data(generated: Generated, name: str, requirement_id: str) -> Any:
    """data[name] of the first delivery; its absence fails *requirement_id*."""
    data = generated.envelope().get("data")
    assert isinstance(data, dict), (
        f"{requirement_id}: expected data to be a JSON object holding {name}, saw "
        f"{data!r:.200} {generated.describe()}"
    )
    assert name in data, (
        f"{requirement_id}: expected data.{name}, saw the fields {sorted(data)} "
        f"{generated.describe()}"
    )
    return data[name]


@pytest.mark.parametrize("scenario", BY_OUTCOME)
@pytest.mark.requirement("EVT-DATA-01")
def test_data_generation_id_equals_submit_id(lab: EventLab, scenario: Scenario) -> None:
    """data.generation_id is the id the submit's 202 returned."""
    generated = lab.get(scenario)
    seen = _data(generated, "generation_id", "EVT-DATA-01")
    assert seen == generated.generation_id, (
        f"EVT-DATA-01: expected data.generation_id {generated.generation_id!r} (the 202's id), "
        f"saw {seen!r} {generated.describe()}"
    )


@pytest.mark.requirement("EVT-DATA-02")
def test_data_status_completed_on_success(lab: EventLab) -> None:
    """data.status is "completed" in the event of a successful generation."""
    generated = lab.get(COMPLETED)
    seen = _data(generated, "status", "EVT-DATA-02")
    assert seen == "completed", (
        f"EVT-DATA-02: expected data.status 'completed', saw {seen!r} {generated.describe()}"
    )


@pytest.mark.parametrize(
    ("scenario", "kind"),
    [
        pytest.param(COMPLETED, "image", id="image"),
        pytest.param(VIDEO, "video", id="video"),
    ],
)
@pytest.mark.requirement("EVT-DATA-03")
def test_data_type_names_the_endpoint_kind(lab: EventLab, scenario: Scenario, kind: str) -> None:
    """data.type is "image" for an image submit and "video" for a video submit."""
    generated = lab.get(scenario)
    seen = _data(generated, "type", "EVT-DATA-03")
    assert seen == kind, (
        f"EVT-DATA-03: expected data.type {kind!r} for POST {scenario.path}, saw {seen!r} "
        f"{generated.describe()}"
    )


@pytest.mark.parametrize("scenario", BY_OUTCOME)
@pytest.mark.requirement("EVT-DATA-04")
def test_data_model_is_string(lab: EventLab, scenario: Scenario) -> None:
    """data.model is a string."""
    generated = lab.get(scenario)
    seen = _data(generated, "model", "EVT-DATA-04")
    assert isinstance(seen, str), (
        f"EVT-DATA-04: expected data.model to be a string, saw {seen!r} {generated.describe()}"
    )


@pytest.mark.requirement("EVT-DATA-05")
def test_data_output_url_string_on_success(lab: EventLab) -> None:
    """data.output_url is a string in the event of a successful generation."""
    generated = lab.get(COMPLETED)
    seen = _data(generated, "output_url", "EVT-DATA-05")
    assert isinstance(seen, str), (
        f"EVT-DATA-05: expected data.output_url to be a string on success, saw {seen!r} "
        f"{generated.describe()}"
    )


@pytest.mark.sandbox
@pytest.mark.requirement("EVT-DATA-06")
def test_data_output_url_null_on_failure(lab: EventLab) -> None:
    """data.output_url is null in the event of a failed generation."""
    generated = lab.get(FAILED)
    seen = _data(generated, "output_url", "EVT-DATA-06")
    assert seen is None, (
        f"EVT-DATA-06: expected data.output_url null on failure, saw {seen!r} "
        f"{generated.describe()}"
    )


@pytest.mark.requirement("EVT-DATA-07")
def test_data_error_message_null_on_success(lab: EventLab) -> None:
    """data.error_message is null in the event of a successful generation."""
    generated = lab.get(COMPLETED)
    seen = _data(generated, "error_message", "EVT-DATA-07")
    assert seen is None, (
        f"EVT-DATA-07: expected data.error_message null on success, saw {seen!r} "
        f"{generated.describe()}"
    )


@pytest.mark.sandbox
@pytest.mark.requirement("EVT-DATA-08")
def test_data_error_message_populated_on_failure(lab: EventLab) -> None:
    """data.error_message is a non-empty string in the event of a failed generation."""
    generated = lab.get(FAILED)
    seen = _data(generated, "error_message", "EVT-DATA-08")
    assert isinstance(seen, str) and seen.strip(), (
        f"EVT-DATA-08: expected data.error_message populated on failure, saw {seen!r} "
        f"{generated.describe()}"
    )


@pytest.mark.parametrize("scenario", BY_OUTCOME)
@pytest.mark.requirement("EVT-DATA-09")
def test_data_credits_used_is_integer(lab: EventLab, scenario: Scenario) -> None:
    """data.credits_used is an integer (a JSON number without fraction, not a boolean)."""
    generated = lab.get(scenario)
    seen = _data(generated, "credits_used", "EVT-DATA-09")
    assert isinstance(seen, int) and not isinstance(seen, bool), (
        f"EVT-DATA-09: expected data.credits_used to be an integer, saw {seen!r} "
        f"{generated.describe()}"
    )


@pytest.mark.parametrize(
    ("scenario", "zero"),
    [
        pytest.param(COMPLETED, False, id="completed-not-negative"),
        pytest.param(FAILED, True, id="failed-zero", marks=pytest.mark.sandbox),
    ],
)
@pytest.mark.requirement("EVT-DATA-10")
def test_data_credits_used_not_negative_and_zero_on_failure(
    lab: EventLab, scenario: Scenario, zero: bool
) -> None:
    """data.credits_used is never negative, and 0 once a failed generation's credits were
    refunded (an interpretation: the spec gives only the type)."""
    generated = lab.get(scenario)
    seen = _data(generated, "credits_used", "EVT-DATA-10")
    if zero:
        assert seen == 0, (
            f"EVT-DATA-10: expected data.credits_used 0 on failure (refunded), saw {seen!r} "
            f"{generated.describe()}"
        )
    else:
        assert isinstance(seen, int) and seen >= 0, (
            f"EVT-DATA-10: expected data.credits_used >= 0, saw {seen!r} {generated.describe()}"
        )


@pytest.mark.requirement("EVT-DATA-11")
def test_data_output_url_is_absolute_http_url(lab: EventLab) -> None:
    """data.output_url of a successful generation is an absolute http(s) URL (an
    interpretation: the spec says string)."""
    generated = lab.get(COMPLETED)
    seen = _data(generated, "output_url", "EVT-DATA-11")
    parts = urlsplit(seen) if isinstance(seen, str) else None
    assert parts is not None and parts.scheme in {"http", "https"} and parts.netloc, (
        f"EVT-DATA-11: expected an absolute http(s) URL, saw {seen!r} {generated.describe()}"
    )
