"""Findings name the rule they are about: fail, warn and measure (conformance.findings)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conformance import findings
from conformance.findings import Bands, RuleBroken


@pytest.fixture
def running() -> Iterator[findings.CheckFindings]:
    """A check that cites a MUST-like and an interpretation-like id is running."""
    found = findings.begin(("DLV-TIMEOUT-01", "DLV-TIMEOUT-02"))
    yield found
    findings.end()


def test_fail_names_the_rule_it_breaks(running: findings.CheckFindings) -> None:
    with pytest.raises(RuleBroken) as raised:
        findings.fail("saw 30 s", rule="DLV-TIMEOUT-02")
    assert raised.value.ids == ("DLV-TIMEOUT-02",)
    assert str(raised.value) == "DLV-TIMEOUT-02: saw 30 s"


def test_fail_without_a_rule_breaks_every_cited_one(running: findings.CheckFindings) -> None:
    with pytest.raises(RuleBroken) as raised:
        findings.fail("saw 30 s")
    assert raised.value.ids == ("DLV-TIMEOUT-01", "DLV-TIMEOUT-02")
    assert str(raised.value).startswith("DLV-TIMEOUT-01, DLV-TIMEOUT-02: ")


def test_a_rule_the_check_does_not_cite_is_a_harness_error(
    running: findings.CheckFindings,
) -> None:
    with pytest.raises(ValueError, match="does not cite"):
        findings.fail("saw 404", rule="AUTH-KEY-02")
    with pytest.raises(ValueError, match="does not cite"):
        findings.warn("late", rule="AUTH-KEY-02")


def test_warn_records_and_the_check_goes_on(running: findings.CheckFindings) -> None:
    findings.warn("fired at 10.8 s", rule="DLV-TIMEOUT-01")
    assert running.warnings == [findings.Finding("DLV-TIMEOUT-01", "fired at 10.8 s")]


def test_warn_outside_a_check_is_loud() -> None:
    with pytest.raises(RuntimeError, match="outside a running check"):
        findings.warn("nobody would see this")


BANDS = Bands(passing=(9.4, 10.6), warning=(9.4, 11.6))


@pytest.mark.parametrize(
    ("value", "band"),
    [(9.4, "pass"), (10.0, "pass"), (10.6, "pass"), (10.61, "warn"), (11.6, "warn")],
)
def test_measure_passes_or_warns_inside_the_bands(
    running: findings.CheckFindings, value: float, band: str
) -> None:
    assert findings.measure("DLV-TIMEOUT-01", "attempt", value, BANDS) == band
    (measured,) = running.measurements
    assert (measured.value, measured.band) == (value, band)
    assert len(running.warnings) == (band == "warn")


@pytest.mark.parametrize("value", [0.0, 9.39, 11.61, 30.0])
def test_measure_fails_outside_the_warning_band(
    running: findings.CheckFindings, value: float
) -> None:
    with pytest.raises(RuleBroken) as raised:
        findings.measure("DLV-TIMEOUT-01", "attempt 1 to attempt 2", value, BANDS)
    assert raised.value.ids == ("DLV-TIMEOUT-01",)
    assert "pass 9.4 to 10.6 s, warn 9.4 to 11.6 s): fail" in str(raised.value)
    assert running.measurements[0].band == "fail", "recorded before it fails"


def test_bands_must_nest() -> None:
    with pytest.raises(ValueError, match="must contain"):
        Bands(passing=(9.0, 11.0), warning=(9.5, 12.0))


def test_measurement_round_trips() -> None:
    measured = findings.Measurement("R", "q", 1.5, "s", "warn", (1.0, 1.2), (1.0, 2.0))
    assert findings.Measurement.from_dict(measured.to_dict()) == measured


def test_trace_keeps_the_latest_look_at_each_chain(running: findings.CheckFindings) -> None:
    first = findings.Arrival(0.0, "1", 500, 0.0)
    early = findings.ChainTrace("always-500", (first,), 10.0, (1.0, 2.0), 0.5)
    second = findings.Arrival(1.02, "2", 500, 0.0)
    later = findings.ChainTrace("always-500", (first, second), 10.0, (1.0, 2.0), 0.5)
    other = findings.ChainTrace(
        "silent", (findings.Arrival(0.0, None, 200, 16.0),), 10.0, (1.0, 2.0), 0.5
    )
    findings.trace(early)
    findings.trace(other)
    findings.trace(later)
    assert running.chains == [other, later]
    assert findings.ChainTrace.from_dict(later.to_dict()) == later


def test_trace_outside_a_check_is_dropped() -> None:
    findings.trace(findings.ChainTrace("lone", (), 10.0, (1.0, 2.0), 0.5))
    assert findings.end() is None
