"""The body shape per kind of target (spec §4 Target selection rules, rule 2): the strict
envelope for webhook.url (and, as an interpretation, for webhook.id), the envelope plus
every data field copied to the top level for callback_url, and data.output_url present
whatever the target.
"""

from __future__ import annotations

import pytest

from conformance.checks.scenarios import BY_TARGET, CALLBACK, INLINE, REGISTERED
from conformance.findings import fail
from conformance.observe.events import (
    ENVELOPE_FIELDS,
    EventLab,
    Generated,
    Scenario,
)
from conformance.run.fixtures.labs import Labs

CALLBACK_FAILED = Scenario(kind="callback_url", outcome="failed")


@pytest.fixture(scope="module")
def lab(labs: Labs) -> EventLab:
    return labs.events("envelope-shape", INLINE, CALLBACK)


def _assert_strict_envelope(generated: Generated) -> None:
    """The body is exactly the six envelope fields (spec §2, §4 rule 2), or the check's
    rule fails.

    Only the set of fields: their types and forms are the envelope's own rules (EVT-*),
    checked there, so a wrong created_at does not also fail the body's shape."""
    body = generated.envelope()
    problems = []
    missing = [name for name in ENVELOPE_FIELDS if name not in body]
    extra = sorted(set(body) - set(ENVELOPE_FIELDS))
    if missing:
        problems.append(f"missing envelope fields {missing}")
    if extra:
        data = body.get("data")
        copied = [n for n in extra if isinstance(data, dict) and n in data]
        problems.append(
            f"fields beyond the envelope {extra}"
            + (f" (data fields copied to the top level: {copied})" if copied else "")
        )
    if problems:
        fail(
            f"expected exactly {list(ENVELOPE_FIELDS)} {generated.describe()}; "
            + "; ".join(problems)
        )


@pytest.mark.requirement("TARGET-INLINE-01")
def test_inline_body_is_strict_envelope(lab: EventLab) -> None:
    """A webhook.url delivery's body is exactly the envelope, no data field at the top."""
    _assert_strict_envelope(lab.get(INLINE))


@pytest.mark.console
@pytest.mark.requirement("TARGET-FLAT-03")
def test_registered_body_is_strict_envelope(lab: EventLab) -> None:
    """A webhook.id delivery's body is the strict envelope too (an interpretation)."""
    _assert_strict_envelope(lab.get(REGISTERED))


@pytest.mark.requirement("TARGET-FLAT-01")
def test_callback_body_holds_whole_envelope(lab: EventLab) -> None:
    """A callback_url delivery's body holds every envelope field."""
    generated = lab.get(CALLBACK)
    body = generated.envelope()
    missing = [name for name in ENVELOPE_FIELDS if name not in body]
    assert not missing, (
        f"TARGET-FLAT-01: expected the envelope fields {list(ENVELOPE_FIELDS)} in the "
        f"callback body, missing {missing} {generated.describe()}"
    )


@pytest.mark.parametrize(
    "scenario",
    [
        pytest.param(CALLBACK, id="completed"),
        pytest.param(CALLBACK_FAILED, id="failed", marks=pytest.mark.sandbox),
    ],
)
@pytest.mark.requirement("TARGET-FLAT-02")
def test_callback_body_copies_every_data_field_to_top_level(
    lab: EventLab, scenario: Scenario
) -> None:
    """A callback_url body also holds each field of data at the top level, same value."""
    generated = lab.get(scenario)
    body = generated.envelope()
    data = body.get("data")
    assert isinstance(data, dict) and data, (
        f"TARGET-FLAT-02: expected a data object to copy from, saw {data!r:.200} "
        f"{generated.describe()}"
    )
    missing = sorted(name for name in data if name not in body)
    differing = sorted(
        f"{name}: top {body[name]!r} vs data {data[name]!r}"
        for name in data
        if name in body and body[name] != data[name]
    )
    assert not missing and not differing, (
        f"TARGET-FLAT-02: expected every data field copied to the top level "
        f"{generated.describe()}; missing {missing}, differing {differing}"
    )


@pytest.mark.parametrize(
    "scenario",
    [
        *BY_TARGET,
        pytest.param(CALLBACK_FAILED, id="callback-url-failed", marks=pytest.mark.sandbox),
    ],
)
@pytest.mark.requirement("TARGET-OUTPUT-01")
def test_data_output_url_present_for_every_target(lab: EventLab, scenario: Scenario) -> None:
    """data.output_url is present (as a key) whatever the target type."""
    generated = lab.get(scenario)
    data = generated.envelope().get("data")
    assert isinstance(data, dict) and "output_url" in data, (
        f"TARGET-OUTPUT-01: expected data.output_url present for a {scenario.kind} target, "
        f"saw data {data!r:.300} {generated.describe()}"
    )
