"""The ``[clock]`` table of a target profile (conformance/target/clock.py) and the
capability it gives the daily-reset checks."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from conformance.run.plugin.capabilities import missing_capability
from conformance.target.clock import ClockAdvance, ClockProfile, next_utc_midnight, parse_clock
from conformance.target.profile import ProfileError, parse_profile

BASE = """
base_url = "http://127.0.0.1:8765"
[keys.primary]
key = "gk_CLOCKcanary0primary0key000001"
scopes = ["images:generate"]
"""

DECLARED = (
    BASE
    + """
[clock]
method = "POST"
path = "/test/clock"
body = { advance_seconds = "{seconds}", reason = "conformance" }
status = 200
"""
)


def _at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_declared_request_moves_the_clock_with_the_seconds_as_a_number() -> None:
    clock = parse_profile(DECLARED, env={}).clock
    assert clock.advance == ClockAdvance(
        "POST", "/test/clock", {"advance_seconds": "{seconds}", "reason": "conformance"}, 200
    )
    assert clock.advance.body_for(90.5) == {"advance_seconds": 90.5, "reason": "conformance"}
    assert clock.missing() is None
    assert missing_capability({"clock"}, parse_profile(DECLARED, env={})) is None


def test_without_clock_table_the_capability_is_missing_with_the_fix() -> None:
    profile = parse_profile(BASE, env={})
    assert profile.clock == ClockProfile()
    reason = missing_capability({"clock"}, profile)
    assert reason is not None and reason.startswith("needs clock: add a [clock] table")


def test_body_without_the_seconds_placeholder_is_a_problem() -> None:
    text = BASE + '[clock]\npath = "/test/clock"\nbody = { advance_seconds = 60 }\n'
    with pytest.raises(ProfileError) as caught:
        parse_profile(text, env={})
    assert any('no value is "{seconds}"' in p for p in caught.value.problems)


def test_empty_clock_table_is_a_problem_and_unknown_fields_are_refused() -> None:
    assert parse_clock({})[1]
    with pytest.raises(ProfileError):
        parse_profile(BASE + "[clock]\nwait_for_midnight = true\nhours = 3\n", env={})


def test_waiting_for_midnight_is_bounded_by_max_wait_seconds() -> None:
    clock, problems = parse_clock({"wait_for_midnight": True, "max_wait_seconds": 600})
    assert not problems
    assert clock.missing(now=_at("2026-08-01T23:55:00")) is None
    reason = clock.missing(now=_at("2026-08-01T22:00:00"))
    assert reason is not None and "7200 s away" in reason


def test_next_utc_midnight() -> None:
    assert next_utc_midnight(_at("2026-08-01T23:59:59")) == _at("2026-08-02T00:00:00")
    assert next_utc_midnight(_at("2026-08-02T00:00:00")) == _at("2026-08-03T00:00:00")


def test_redacted_profile_shows_its_clock() -> None:
    profile = parse_profile(DECLARED, env={})
    assert profile.redacted()["clock"]["path"] == "/test/clock"
