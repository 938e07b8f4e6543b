"""Verdict rules: outcome and level → verdict, aggregation order, reasons, serialisation."""

from __future__ import annotations

from dataclasses import replace

import pytest

from conformance.catalog import Level, Need, Party, Requirement
from conformance.evidence import Exchange
from conformance.findings import Finding, Measurement
from conformance.verdicts import (
    MAX_EXCHANGES,
    CheckResult,
    Coverage,
    Outcome,
    Verdict,
    aggregate,
    check_judgement,
    check_verdict,
    judge,
    trim_exchanges,
)


def _requirement(rid: str, level: Level = Level.MUST) -> Requirement:
    return Requirement(
        id=rid,
        area=rid.split("-")[0],
        section="4",
        heading="GET /v1/account/tier",
        statement="a statement",
        level=level,
        needs=(Need.BLACK_BOX,),
    )


def _check(nodeid: str, outcome: Outcome, *ids: str, message: str = "") -> CheckResult:
    return CheckResult(
        nodeid=nodeid, requirement_ids=ids, outcome=outcome, duration=0.5, message=message
    )


def _exchange(n: int) -> Exchange:
    return Exchange(
        method="GET",
        url=f"http://127.0.0.1:1/v1/x/{n}",
        request_headers=(("authorization", "Bearer [redacted:keys.primary.key]"),),
        request_body="",
        status=200,
        response_headers=(("content-type", "application/json"),),
        response_body="{}",
        elapsed_ms=1.5,
    )


@pytest.mark.parametrize(
    ("outcome", "level", "expected"),
    [
        pytest.param(Outcome.PASSED, Level.MUST, Verdict.PASS, id="passed-must-pass"),
        pytest.param(Outcome.FAILED, Level.MUST, Verdict.FAIL, id="failed-must-fail"),
        pytest.param(Outcome.FAILED, Level.INTERPRETATION, Verdict.WARN, id="failed-interp-warn"),
        pytest.param(Outcome.PASSED, Level.INTERPRETATION, Verdict.PASS, id="passed-interp-pass"),
        pytest.param(Outcome.SKIPPED, Level.MUST, Verdict.SKIP, id="skipped-must-skip"),
        pytest.param(Outcome.ERROR, Level.MUST, Verdict.ERROR, id="error-must-error"),
        pytest.param(Outcome.ERROR, Level.INTERPRETATION, Verdict.ERROR, id="error-interp-error"),
    ],
)
def test_check_verdict_outcome_and_level_give_verdict(
    outcome: Outcome, level: Level, expected: Verdict
) -> None:
    assert check_verdict(outcome, _requirement("TIER-READ-01", level)) is expected


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        pytest.param(Outcome.FAILED, Verdict.ERROR, id="failed-client-duty-error"),
        pytest.param(Outcome.PASSED, Verdict.PASS, id="passed-client-duty-pass"),
    ],
)
def test_check_verdict_client_duty_never_fails_the_target(
    outcome: Outcome, expected: Verdict
) -> None:
    requirement = replace(_requirement("SIG-RECV-02"), party=Party.CLIENT)
    assert check_verdict(outcome, requirement) is expected


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        pytest.param([Verdict.PASS, Verdict.FAIL, Verdict.ERROR], Verdict.FAIL, id="fail-wins"),
        pytest.param(
            [Verdict.WARN, Verdict.ERROR, Verdict.PASS], Verdict.ERROR, id="error-over-warn"
        ),
        pytest.param([Verdict.PASS, Verdict.WARN], Verdict.WARN, id="warn-over-pass"),
        pytest.param([Verdict.SKIP, Verdict.PASS], Verdict.PASS, id="pass-over-skip"),
        pytest.param([Verdict.SKIP], Verdict.SKIP, id="skip-alone"),
        pytest.param([], Verdict.UNTESTED, id="nothing-untested"),
    ],
)
def test_aggregate_worst_verdict_wins(verdicts: list[Verdict], expected: Verdict) -> None:
    assert aggregate(verdicts) is expected


def test_judge_requirements_get_verdicts_in_catalog_order() -> None:
    must, interp, skipped, untested, deselected = (
        _requirement("TIER-READ-01"),
        _requirement("TIER-READ-02", Level.INTERPRETATION),
        _requirement("TIER-FIELD-01"),
        _requirement("TIER-FIELD-02"),
        _requirement("TIER-FIELD-03"),
    )
    checks = [
        _check("a.py::ok", Outcome.PASSED, "TIER-READ-01", "TIER-READ-02"),
        _check(
            "a.py::bad",
            Outcome.FAILED,
            "TIER-READ-01",
            "TIER-READ-02",
            message="AssertionError: expected 200, saw 500\nassert 500 == 200",
        ),
        _check("a.py::skipped", Outcome.SKIPPED, "TIER-FIELD-01", message="needs dns: add [dns]"),
        _check("a.py::unknown", Outcome.PASSED, "NOT-IN-SCOPE-01"),
    ]
    run = judge([must, interp, skipped, untested, deselected], checks, frozenset({"TIER-FIELD-03"}))
    by_id = {rv.requirement.id: rv for rv in run.requirements}
    assert [rv.requirement.id for rv in run.requirements] == [
        "TIER-READ-01",
        "TIER-READ-02",
        "TIER-FIELD-01",
        "TIER-FIELD-02",
        "TIER-FIELD-03",
    ]
    assert by_id["TIER-READ-01"].verdict is Verdict.FAIL
    assert by_id["TIER-READ-01"].reason == (
        "1 of 2 checks failed: a.py::bad: AssertionError: expected 200, saw 500"
    )
    assert by_id["TIER-READ-02"].verdict is Verdict.WARN
    assert "interpretation" in by_id["TIER-READ-02"].reason
    assert by_id["TIER-FIELD-01"].verdict is Verdict.SKIP
    assert by_id["TIER-FIELD-01"].reason.endswith("needs dns: add [dns]")
    assert by_id["TIER-FIELD-02"].verdict is Verdict.UNTESTED
    assert by_id["TIER-FIELD-02"].reason == "no check in the suite verifies this requirement"
    assert by_id["TIER-FIELD-03"].verdict is Verdict.UNTESTED
    assert "not selected" in by_id["TIER-FIELD-03"].reason
    assert [c.nodeid for c in by_id["TIER-READ-01"].checks] == ["a.py::ok", "a.py::bad"]
    assert run.counts() == {
        Verdict.FAIL: 1,
        Verdict.ERROR: 0,
        Verdict.WARN: 1,
        Verdict.PASS: 0,
        Verdict.SKIP: 1,
        Verdict.UNTESTED: 2,
        Verdict.UNOBSERVABLE: 0,
    }
    assert not run.ok


def test_judge_only_warnings_skips_and_gaps_is_ok() -> None:
    run = judge(
        [_requirement("TIER-READ-02", Level.INTERPRETATION), _requirement("TIER-FIELD-02")],
        [_check("a.py::bad", Outcome.FAILED, "TIER-READ-02")],
    )
    assert run.ok
    error_run = judge(
        [_requirement("TIER-READ-01")], [_check("a.py::broke", Outcome.ERROR, "TIER-READ-01")]
    )
    assert not error_run.ok


def test_judge_pass_reason_counts_skipped_checks() -> None:
    run = judge(
        [_requirement("TIER-READ-01")],
        [
            _check("a.py::one", Outcome.PASSED, "TIER-READ-01"),
            _check("a.py::two", Outcome.SKIPPED, "TIER-READ-01"),
        ],
    )
    assert run.requirements[0].reason == "1 of 2 checks passed (1 skipped)"


TIMING_FIELDS = ("started_at", "stopped_at", "worker")


def test_check_result_round_trips_through_plain_data() -> None:
    original = CheckResult(
        nodeid="x.py::t",
        requirement_ids=("TIER-READ-01",),
        outcome=Outcome.FAILED,
        duration=1.25,
        message="expected 2xx, saw 500",
        longrepr="Traceback ...",
        exchanges=(_exchange(1), _exchange(2)),
        exchanges_omitted=3,
        started_at=1_800_000_000.25,
        stopped_at=1_800_000_001.5,
        worker="gw1",
    )
    assert CheckResult.from_dict(original.to_dict()) == original
    # A result written before the timing was recorded still reads.
    older = {k: v for k, v in original.to_dict().items() if k not in TIMING_FIELDS}
    assert CheckResult.from_dict(older).started_at is None


def test_trim_exchanges_keeps_first_and_last() -> None:
    exchanges = [_exchange(n) for n in range(MAX_EXCHANGES + 25)]
    kept, omitted = trim_exchanges(exchanges)
    assert len(kept) == MAX_EXCHANGES and omitted == 25
    assert kept[0] is exchanges[0] and kept[-1] is exchanges[-1]
    assert trim_exchanges(exchanges[:3]) == (tuple(exchanges[:3]), 0)


def _failed(broken: tuple[str, ...], *ids: str) -> CheckResult:
    return CheckResult(
        nodeid="t::broke",
        requirement_ids=ids,
        outcome=Outcome.FAILED,
        duration=0.1,
        message="saw 30 s",
        broken=broken,
    )


def test_judgement_a_failure_counts_only_against_the_rules_it_broke() -> None:
    must = _requirement("DLV-TIMEOUT-01", Level.MUST)
    interp = _requirement("DLV-TIMEOUT-02", Level.INTERPRETATION)
    check = _failed(("DLV-TIMEOUT-02",), must.id, interp.id)
    assert check_judgement(check, interp) is Verdict.WARN
    assert check_judgement(check, must) is None, "stopped before judging the MUST"
    verdicts = judge([must, interp], [check])
    by_id = {rv.requirement.id: rv for rv in verdicts.requirements}
    assert by_id[must.id].verdict is Verdict.UNTESTED
    assert "failed on another rule first" in by_id[must.id].reason
    assert by_id[interp.id].verdict is Verdict.WARN
    assert verdicts.ok


def test_judgement_a_failure_naming_no_rule_breaks_them_all() -> None:
    must = _requirement("DLV-TIMEOUT-01", Level.MUST)
    assert check_judgement(_failed((), must.id), must) is Verdict.FAIL


def test_judgement_a_warning_on_a_must_makes_a_passing_check_warn() -> None:
    must = _requirement("DLV-TIMEOUT-01", Level.MUST)
    other = _requirement("DLV-TIMEOUT-02", Level.MUST)
    check = CheckResult(
        nodeid="t::late",
        requirement_ids=(must.id, other.id),
        outcome=Outcome.PASSED,
        duration=0.1,
        warnings=(Finding(must.id, "attempt ended 10.8 s after it started"),),
    )
    assert check_judgement(check, must) is Verdict.WARN
    assert check_judgement(check, other) is Verdict.PASS
    verdicts = judge([must, other], [check])
    first = verdicts.requirements[0]
    assert first.verdict is Verdict.WARN
    assert "10.8 s" in first.reason
    assert verdicts.ok


def test_check_result_round_trips_its_findings() -> None:
    check = CheckResult(
        nodeid="t::x",
        requirement_ids=("A-B-01", "A-B-02"),
        outcome=Outcome.FAILED,
        duration=1.0,
        broken=("A-B-02",),
        warnings=(Finding("A-B-01", "late"),),
        measurements=(Measurement("A-B-01", "gap", 1.4, "s", "warn", (0.6, 1.3), (0.6, 2.0)),),
    )
    assert CheckResult.from_dict(check.to_dict()) == check


# -- coverage: the verdict line ------------------------------------------------------------


def _unobservable(rid: str) -> Requirement:
    return replace(
        _requirement(rid), observable=False, unobservable_reason="storage is not visible"
    )


def test_unobservable_requirement_without_checks_is_listed_apart_never_passed() -> None:
    run = judge([_unobservable("KEY-HASH-01"), _requirement("TIER-READ-01")], [])
    hashed = run.requirements[0]
    assert hashed.verdict is Verdict.UNOBSERVABLE
    assert hashed.reason == "no black-box check can observe it: storage is not visible"
    coverage = run.coverage()
    assert [rv.requirement.id for rv in coverage.unobservable] == ["KEY-HASH-01"]
    assert "KEY-HASH-01" not in [rv.requirement.id for rv in coverage.unchecked]
    assert coverage.details()[-1] == "cannot be observed from outside (1): KEY-HASH-01"


def _coverage_run(*checks: CheckResult, deselected: frozenset[str] = frozenset()) -> Coverage:
    requirements = [
        _requirement("TIER-READ-01"),
        _requirement("TIER-READ-02"),
        _requirement("TIER-FIELD-01"),
        _requirement("TIER-FIELD-02", Level.INTERPRETATION),
        replace(_requirement("SIG-TIME-01"), party=Party.CLIENT),
        _unobservable("KEY-HASH-01"),
    ]
    return judge(requirements, checks, deselected).coverage()


def test_coverage_every_observable_must_checked_is_conformant() -> None:
    coverage = _coverage_run(
        _check("a::one", Outcome.PASSED, "TIER-READ-01", "TIER-READ-02"),
        _check("a::two", Outcome.PASSED, "TIER-FIELD-01"),
    )
    assert coverage.conformant
    assert coverage.line() == (
        "conformant: no failures among the 3 MUST requirements checked, every observable one"
    )


def test_coverage_capability_skips_are_listed_by_capability_and_still_conformant() -> None:
    coverage = _coverage_run(
        _check("a::one", Outcome.PASSED, "TIER-READ-01"),
        _check("a::dns", Outcome.SKIPPED, "TIER-READ-02", message="needs dns: add [dns]"),
        _check("a::console", Outcome.SKIPPED, "TIER-FIELD-01", message="needs console: add it"),
    )
    assert coverage.conformant
    assert coverage.line() == (
        "conformant: no failures among the 1 MUST requirement checked; 2 skipped for "
        "capabilities the profile lacks: console (1), dns (1)"
    )
    assert "skipped, the profile lacks dns (1): TIER-READ-02" in coverage.details()


def test_coverage_untested_other_skips_and_errors_are_not_checked() -> None:
    coverage = _coverage_run(
        _check("a::one", Outcome.PASSED, "TIER-READ-01"),
        _check("a::other", Outcome.SKIPPED, "TIER-READ-02", message="the list held 3 of 101"),
    )
    assert not coverage.conformant
    assert coverage.line() == ("no failures among the 1 MUST requirement checked; 2 not checked")
    assert coverage.details() == [
        "not checked (2): TIER-READ-02, TIER-FIELD-01",
        "cannot be observed from outside (1): KEY-HASH-01",
    ]


def test_coverage_failure_is_not_conformant_and_counts_what_was_checked() -> None:
    coverage = _coverage_run(
        _check("a::one", Outcome.FAILED, "TIER-READ-01"),
        _check("a::two", Outcome.PASSED, "TIER-READ-02"),
        deselected=frozenset({"TIER-FIELD-01"}),
    )
    assert not coverage.conformant
    assert coverage.line() == (
        "not conformant: 1 of the 2 MUST requirements checked failed; 1 not checked"
    )
    assert coverage.details()[0] == "not selected in this run (1): TIER-FIELD-01"


def test_coverage_of_a_selection_counts_what_it_left_out_as_not_checked() -> None:
    left_out = [_requirement("TIER-FIELD-01"), _requirement("TIER-FIELD-02", Level.INTERPRETATION)]
    run = judge(
        [_requirement("TIER-READ-01")],
        [_check("a::one", Outcome.PASSED, "TIER-READ-01")],
        outside=left_out,
    )
    coverage = run.coverage()
    assert not coverage.conformant
    assert coverage.line() == "no failures among the 1 MUST requirement checked; 1 not checked"
    assert coverage.details() == [
        "outside this run's selection (--only, --area): 1 MUST requirement"
    ]


def test_coverage_line_names_the_target_after_the_verdict_word() -> None:
    passed = _check("a::one", Outcome.PASSED, "TIER-READ-01", "TIER-READ-02", "TIER-FIELD-01")
    assert _coverage_run(passed).line("acme").startswith("conformant: acme: no failures among")
    failed = _check("a::one", Outcome.FAILED, "TIER-READ-01")
    assert _coverage_run(failed).line("acme").startswith("not conformant: acme: 1 of the 1 ")
    assert _coverage_run().line("acme") == (
        "acme: no failures among the 0 MUST requirements checked; 3 not checked"
    )
