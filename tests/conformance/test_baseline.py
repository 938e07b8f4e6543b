"""Known-failure baselines (``run --baseline``) and ``genapi-conformance diff``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from suite_run import run_suite

from conformance.catalog import load_catalog
from conformance.run.baseline import (
    Baseline,
    BaselineError,
    changed_verdicts,
    judge_baseline,
    judge_run,
    load_baseline,
)
from conformance.run.cli import EXIT_FAILED, EXIT_HARNESS, EXIT_OK, exit_code, main
from conformance.verdicts import CheckResult, Outcome, RunVerdicts, judge

TOML = """
[[known]]
id = "AUTH-KEY-01"
reason = "staging has auth off; ticket OPS-1"
"""
YAML = """
known:
  - id: AUTH-KEY-01
    reason: staging has auth off
"""


def _baseline(*ids: str) -> Baseline:
    return Baseline(Path("baseline.toml"), {i: "why" for i in ids})


@pytest.mark.parametrize(("name", "text"), [("b.toml", TOML), ("b.yaml", YAML)])
def test_a_baseline_loads_from_toml_or_yaml(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert set(load_baseline(path, load_catalog()).known) == {"AUTH-KEY-01"}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("- {id: NOPE-NOPE-01, reason: x}", "not a catalog id"),
        ("- {id: AUTH-KEY-01}", "keys id and reason"),
        ("- {id: AUTH-KEY-01, reason: ' '}", "says why"),
        ("- {id: AUTH-KEY-01, reason: a}\n- {id: AUTH-KEY-01, reason: b}", "twice"),
        ("{other: 1}", "list of"),
        ("- [unclosed", "b.yaml"),
    ],
)
def test_a_bad_baseline_says_what_is_wrong(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "b.yaml"
    path.write_text(text)
    with pytest.raises(BaselineError, match=says):
        load_baseline(path, load_catalog())


def test_failures_sort_into_known_new_and_stale() -> None:
    verdicts = {"A-X-01": "fail", "B-X-01": "fail", "C-X-01": "pass", "D-X-01": "skip"}
    outcome = judge_baseline(_baseline("A-X-01", "C-X-01", "D-X-01"), verdicts)
    assert (outcome.known, outcome.new, outcome.stale) == (("A-X-01",), ("B-X-01",), ("C-X-01",))
    assert not outcome.accepted
    # An entry whose requirement was not judged (skipped) is neither stale nor failing.
    assert judge_baseline(_baseline("A-X-01", "B-X-01", "D-X-01"), verdicts).accepted


def test_strict_warnings_need_an_entry_too() -> None:
    verdicts = {"A-X-01": "warn"}
    assert judge_baseline(_baseline(), verdicts).accepted
    assert judge_baseline(_baseline(), verdicts, strict=True).new == ("A-X-01",)
    assert judge_baseline(_baseline("A-X-01"), verdicts, strict=True).accepted


def test_exit_code_with_a_baseline() -> None:
    failed = {"fail": 1, "pass": 2}
    known = judge_baseline(_baseline("A-X-01"), {"A-X-01": "fail", "B-X-01": "pass"})
    new = judge_baseline(_baseline(), {"A-X-01": "fail"})
    stale = judge_baseline(_baseline("B-X-01"), {"B-X-01": "pass"})
    assert exit_code(1, failed, baseline=known) == EXIT_OK
    assert exit_code(1, failed, baseline=new) == EXIT_FAILED
    assert exit_code(0, {"pass": 1}, baseline=stale) == EXIT_FAILED
    assert exit_code(1, {"fail": 1, "error": 1}, baseline=known) == EXIT_HARNESS
    assert "  stale entry (now passes, remove it from the baseline): B-X-01" in stale.lines()


def _run(*checks: tuple[str, Outcome, tuple[str, ...]]) -> RunVerdicts:
    """Verdicts judged from checks: (node id, outcome, cited ids)."""
    catalog = load_catalog()
    results = [CheckResult(nodeid, ids, outcome, 0.1) for nodeid, outcome, ids in checks]
    cited = {i for _, _, ids in checks for i in ids}
    return judge([r for r in catalog if r.id in cited], results)


def test_a_baseline_never_excuses_a_harness_error_behind_a_listed_failure() -> None:
    run = _run(
        ("a.py::test_fails", Outcome.FAILED, ("AUTH-KEY-01",)),
        ("b.py::test_breaks", Outcome.ERROR, ("AUTH-KEY-01",)),
    )
    # The failure hides the error in the requirement's verdict...
    assert {rv.requirement.id: rv.verdict.value for rv in run.requirements} == {
        "AUTH-KEY-01": "fail"
    }
    counts = {v.value: n for v, n in run.counts().items()}
    outcome = judge_run(_baseline("AUTH-KEY-01"), run)
    # ...so the entry does not make it known, and the run is not accepted.
    assert outcome.known == () and outcome.errored == ("AUTH-KEY-01",)
    assert not outcome.accepted and not outcome.excuses_failures
    assert exit_code(1, counts, baseline=outcome) == EXIT_FAILED
    assert any("harness error behind a listed failure" in line for line in outcome.lines())
    clean = judge_run(_baseline("AUTH-KEY-01"), _run(("a.py::t", Outcome.FAILED, ("AUTH-KEY-01",))))
    assert clean.known == ("AUTH-KEY-01",) and clean.accepted
    assert exit_code(1, counts, baseline=clean) == EXIT_OK


def test_a_baseline_entry_excuses_only_its_own_requirement() -> None:
    verdicts = {"AUTH-KEY-01": "fail", "AUTH-KEY-03": "fail", "AUTH-KEY-04": "error"}
    outcome = judge_baseline(_baseline("AUTH-KEY-01", "AUTH-KEY-04"), verdicts)
    assert outcome.known == ("AUTH-KEY-01",) and outcome.new == ("AUTH-KEY-03",)
    assert exit_code(1, {"fail": 2, "error": 1}, baseline=outcome) == EXIT_FAILED
    # A listed requirement whose verdict is a harness error is not a known failure.
    alone = judge_baseline(_baseline("AUTH-KEY-04"), {"AUTH-KEY-04": "error"})
    assert alone.known == () and alone.accepted
    assert exit_code(1, {"error": 1}, baseline=alone) == EXIT_HARNESS
    # The id must match exactly: an entry is not a pattern or a prefix.
    assert judge_baseline(_baseline("AUTH-KEY-0"), {"AUTH-KEY-01": "fail"}).new == ("AUTH-KEY-01",)


def test_changed_verdicts_lists_changes_and_absences() -> None:
    before = {"A-X-01": "pass", "B-X-01": "fail", "C-X-01": "skip"}
    after = {"A-X-01": "fail", "B-X-01": "fail", "D-X-01": "pass"}
    changes = [(c.id, c.before, c.after) for c in changed_verdicts(before, after)]
    assert changes == [
        ("A-X-01", "pass", "fail"),
        ("C-X-01", "skip", None),
        ("D-X-01", None, "pass"),
    ]


def _results(path: Path, verdicts: dict[str, str], reasons: dict[str, str] | None = None) -> Path:
    path.mkdir()
    entries = [
        {"id": i, "verdict": v, "reason": (reasons or {}).get(i)} for i, v in verdicts.items()
    ]
    (path / "results.json").write_text(json.dumps({"requirements": entries}))
    return path


def test_diff_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _results(tmp_path / "a", {"AUTH-KEY-01": "pass", "AUTH-KEY-03": "pass"})
    b = _results(tmp_path / "b", {"AUTH-KEY-01": "fail", "AUTH-KEY-03": "pass"})
    assert main(["diff", str(a), str(b)]) == EXIT_FAILED
    out = capsys.readouterr().out
    assert "AUTH-KEY-01" in out and "pass -> fail" in out and "AUTH-KEY-03" not in out
    assert main(["diff", str(a), str(a / "results.json"), "--json"]) == EXIT_OK
    assert json.loads(capsys.readouterr().out) == []
    assert main(["diff", str(a), str(tmp_path / "missing")]) == 2


def test_diff_shows_both_verdicts_and_the_new_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _results(
        tmp_path / "a", {"AUTH-KEY-01": "pass", "AUTH-KEY-03": "fail"}, {"AUTH-KEY-03": "x"}
    )
    reason = "expected 401 for a missing key, got 200\n\x1b[2Jforged"
    b = _results(
        tmp_path / "b", {"AUTH-KEY-01": "fail", "AUTH-KEY-03": "pass"}, {"AUTH-KEY-01": reason}
    )
    assert main(["diff", str(a), str(b)]) == EXIT_FAILED
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["AUTH-KEY-01", "pass", "->", "fail", "MUST"]
    assert lines[1] == "    now: expected 401 for a missing key, got 200\\x0a\\x1b[2Jforged"
    assert lines[2].split() == ["AUTH-KEY-03", "fail", "->", "pass", "INTERPRETATION"]
    assert lines[3] == "2 requirements changed verdict"
    assert main(["diff", str(a), str(b), "--json"]) == EXIT_FAILED
    changes = json.loads(capsys.readouterr().out)
    assert changes[0] == {"id": "AUTH-KEY-01", "before": "pass", "after": "fail", "reason": reason}
    assert changes[1]["reason"] is None


def test_a_run_against_its_baseline(tmp_path: Path) -> None:
    """Against a fault the baseline lists: accepted (exit 0); the fault gone, the entry is
    stale and the run fails; the diff of the two runs names the requirement."""
    baseline = tmp_path / "baseline.toml"
    baseline.write_text(TOML)
    only = ["AUTH-KEY-01"]
    args = ("--baseline", str(baseline))
    faulty = run_suite(
        tmp_path / "faulty",
        *args,
        faults=["missing-key-accepted"],
        only=only,
        workers=0,
        timeout=240,
    )
    assert faulty.verdicts()["AUTH-KEY-01"] == "fail", faulty.describe()
    assert faulty.returncode == EXIT_OK, faulty.describe()
    assert "accepted: 1 known failures, 0 new, 0 stale" in faulty.stdout
    assert faulty.results is not None
    recorded = faulty.results["baseline"]
    assert recorded["accepted"] and recorded["known"] == only and recorded["file"] == baseline.name
    fixed = run_suite(tmp_path / "fixed", *args, only=only, workers=0, timeout=240)
    assert fixed.verdicts()["AUTH-KEY-01"] == "pass", fixed.describe()
    assert fixed.returncode == EXIT_FAILED, fixed.describe()
    assert "stale entry (now passes, remove it from the baseline): AUTH-KEY-01" in fixed.stdout
    assert fixed.results is not None and fixed.results["baseline"]["stale"] == only
    assert main(["diff", str(faulty.report_dir), str(fixed.report_dir)]) == EXIT_FAILED
