"""The plugin maps check outcomes to requirement verdicts, in one process and under xdist."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conformance.catalog import Level, Need, load_catalog
from conformance.run import plugin
from conformance.run.plugin.channels import EVENTS_DIR, LAST_MODULE

pytest_plugins = ["pytester"]

_CATALOG = load_catalog()
MUST = [r.id for r in _CATALOG if r.level is Level.MUST and set(r.needs) <= {Need.BLACK_BOX}]
INTERP = [
    r.id for r in _CATALOG if r.level is Level.INTERPRETATION and set(r.needs) <= {Need.BLACK_BOX}
]

INI = "[pytest]\ngenapi_checks = .\nfilterwarnings = error\n"

MIXED = f'''
import pytest

@pytest.fixture
def broken():
    raise RuntimeError("fixture exploded")

@pytest.fixture
def breaks_at_teardown():
    yield
    raise RuntimeError("teardown exploded")

@pytest.mark.requirement("{MUST[0]}")
def test_passes():
    pass

@pytest.mark.requirement("{MUST[1]}")
def test_fails():
    assert 500 == 200, "expected 200, saw 500"

@pytest.mark.requirement("{INTERP[0]}")
def test_interpretation_fails():
    assert False, "assumed shape not met"

@pytest.mark.requirement("{MUST[2]}")
def test_skips():
    pytest.skip("needs dns: add a [dns] table")

@pytest.mark.requirement("{MUST[3]}")
def test_setup_breaks(broken):
    pass

@pytest.mark.requirement("{MUST[4]}")
def test_check_breaks():
    {{}}["missing"]

@pytest.mark.requirement("{MUST[6]}")
def test_teardown_breaks(breaks_at_teardown):
    pass
'''

EXPECTED = {
    MUST[0]: "pass",
    MUST[1]: "fail",
    INTERP[0]: "warn",
    MUST[2]: "skip",
    MUST[3]: "error",
    MUST[4]: "error",
    MUST[5]: "untested",
    MUST[6]: "error",
}


def _results(report_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((report_dir / "results.json").read_text(encoding="utf-8"))
    return data


def _verdicts(report_dir: Path) -> dict[str, str]:
    return {r["id"]: r["verdict"] for r in _results(report_dir)["requirements"]}


@pytest.fixture
def checks(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makefile(".ini", pytest=INI)
    return pytester


def test_plugin_outcomes_map_to_requirement_verdicts(checks: pytest.Pytester) -> None:
    checks.makepyfile(test_mixed=MIXED)
    report_dir = checks.path / "out"
    result = checks.runpytest("--report-dir", str(report_dir))
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    verdicts = _verdicts(report_dir)
    assert {k: verdicts[k] for k in EXPECTED} == EXPECTED
    data = _results(report_dir)
    by_id = {r["id"]: r for r in data["requirements"]}
    assert by_id[MUST[1]]["evidence"][0]["check"] == "test_mixed.py::test_fails"
    assert "expected 200, saw 500" in by_id[MUST[1]]["reason"]
    assert "fixture exploded" in by_id[MUST[3]]["reason"]
    assert "setup failed (harness)" in by_id[MUST[3]]["reason"]
    assert "KeyError" in by_id[MUST[4]]["reason"]
    assert "teardown exploded" in by_id[MUST[6]]["reason"]
    assert by_id[MUST[5]]["reason"] == "no check in the suite verifies this requirement"
    assert len(data["requirements"]) == len(_CATALOG), "every requirement is in the report"
    assert data["counts"]["untested"] == len(_CATALOG) - 7 - len(_CATALOG.unobservable())
    assert not data["ok"]
    result.stdout.fnmatch_lines(
        ["*conformance verdicts by requirement*", f"FAIL  {MUST[1]}: *", f"WARN  {INTERP[0]}: *"]
    )
    # Each check's place in the run's timeline: set-up start to teardown end, its process.
    for check in data["checks"]:
        assert check["worker"] == "main", check["nodeid"]
        assert 0 < check["started_at"] <= check["stopped_at"], check["nodeid"]
        assert check["stopped_at"] - check["started_at"] >= check["duration"] - 0.01


def test_plugin_only_interpretation_failed_exits_zero(checks: pytest.Pytester) -> None:
    checks.makepyfile(
        test_warn=f'''
import pytest

@pytest.mark.requirement("{INTERP[0]}")
def test_interpretation_fails():
    assert False, "assumed shape not met"

@pytest.mark.requirement("{MUST[0]}")
def test_passes():
    pass
'''
    )
    report_dir = checks.path / "out"
    result = checks.runpytest("--report-dir", str(report_dir), "-rA")
    assert result.ret == pytest.ExitCode.OK, "a warning never fails the run"
    result.stdout.fnmatch_lines(["*1 passed, 1 warn*"])
    assert _verdicts(report_dir)[INTERP[0]] == "warn"
    assert _results(report_dir)["ok"] is True


def test_plugin_a_failure_counts_against_the_rule_it_names(checks: pytest.Pytester) -> None:
    checks.makepyfile(
        test_rules=f'''
import pytest
from conformance.findings import fail, warn

@pytest.mark.requirement("{MUST[0]}", "{INTERP[0]}")
def test_breaks_only_the_interpretation():
    fail("assumed shape not met", rule="{INTERP[0]}")

@pytest.mark.requirement("{MUST[1]}", "{INTERP[1]}")
def test_warns_and_passes():
    warn("within the slack of real clients", rule="{MUST[1]}")

@pytest.mark.requirement("{MUST[2]}")
def test_names_a_rule_it_does_not_cite():
    fail("not mine", rule="{MUST[3]}")
'''
    )
    report_dir = checks.path / "out"
    result = checks.runpytest("--report-dir", str(report_dir))
    verdicts = _verdicts(report_dir)
    assert verdicts[INTERP[0]] == "warn"
    assert verdicts[MUST[0]] == "untested", "the failure broke only the interpretation"
    assert verdicts[MUST[1]] == "warn"
    assert verdicts[INTERP[1]] == "pass"
    assert verdicts[MUST[2]] == "error", "naming an uncited rule is the harness breaking"
    assert verdicts[MUST[3]] == "untested"
    by_id = {r["id"]: r for r in _results(report_dir)["requirements"]}
    assert f"{INTERP[0]}: assumed shape not met" in by_id[INTERP[0]]["reason"]
    assert "within the slack of real clients" in by_id[MUST[1]]["reason"]
    result.stdout.fnmatch_lines(["*1 failed, 1 passed, 1 warn*"])


def _run_under_xdist(checks: pytest.Pytester, report_dir: Path) -> pytest.RunResult:
    """The checks with two workers, as ``genapi-conformance run`` distributes them."""
    return checks.runpytest_subprocess(
        "-p",
        "xdist",
        "-n",
        "2",
        "--dist",
        "loadfile",
        "--report-dir",
        str(report_dir),
        timeout=280,
    )


# Nested xdist runs start (and, for the dying check, restart) workers: on a loaded machine
# that takes minutes, hence the long subprocess timeouts (still under pytest-timeout).
@pytest.mark.timeout(290)
def test_plugin_under_xdist_gives_same_verdicts(checks: pytest.Pytester) -> None:
    checks.makepyfile(test_mixed=MIXED)
    checks.makepyfile(
        test_other=f'''
import pytest

@pytest.mark.requirement("{MUST[7]}")
def test_more():
    pass

@pytest.mark.requirement("{MUST[8]}")
def test_worker_dies():
    import os
    os._exit(3)
'''
    )
    report_dir = checks.path / "out"
    result = _run_under_xdist(checks, report_dir)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    verdicts = _verdicts(report_dir)
    assert {k: verdicts[k] for k in EXPECTED} == EXPECTED
    assert verdicts[MUST[7]] == "pass"
    died = {r["id"]: r for r in _results(report_dir)["requirements"]}[MUST[8]]
    assert died["verdict"] == "error", "a check that kills its worker is a harness error"
    assert "the process running this check died" in died["reason"]
    checks = {c["nodeid"]: c for c in _results(report_dir)["checks"]}
    assert checks["test_other.py::test_more"]["worker"].startswith("gw")
    assert checks["test_other.py::test_worker_dies"]["started_at"] is None, "its times died too"
    junit = (report_dir / "junit.xml").read_text(encoding="utf-8")
    assert f'<property name="requirement" value="{MUST[1]}"' in junit
    assert list((report_dir / "allure-results").glob("*-result.json")), "workers wrote Allure"


def test_plugin_deselected_checks_are_untested_not_selected(checks: pytest.Pytester) -> None:
    checks.makepyfile(test_mixed=MIXED)
    report_dir = checks.path / "out"
    result = checks.runpytest("--report-dir", str(report_dir), "-k", "test_passes")
    assert result.ret == pytest.ExitCode.OK
    requirements = {r["id"]: r for r in _results(report_dir)["requirements"]}
    assert requirements[MUST[0]]["verdict"] == "pass"
    assert requirements[MUST[1]]["verdict"] == "untested"
    assert "not selected" in requirements[MUST[1]]["reason"]


def test_plugin_only_option_scopes_the_run(checks: pytest.Pytester) -> None:
    checks.makepyfile(test_mixed=MIXED)
    report_dir = checks.path / "out"
    result = checks.runpytest("--report-dir", str(report_dir), "--only", MUST[1])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=1, deselected=6)
    assert _verdicts(report_dir) == {MUST[1]: "fail"}


def test_plugin_area_option_selects_by_area(checks: pytest.Pytester) -> None:
    checks.makepyfile(test_mixed=MIXED)
    report_dir = checks.path / "out"
    area = _CATALOG[MUST[0]].area
    checks.runpytest("--report-dir", str(report_dir), "--area", area)
    verdicts = _verdicts(report_dir)
    assert set(verdicts) == {r.id for r in _CATALOG if r.area == area}


def test_plugin_unknown_only_id_is_a_usage_error(checks: pytest.Pytester) -> None:
    checks.makepyfile(test_mixed=MIXED)
    result = checks.runpytest("--report-dir", str(checks.path / "out"), "--only", "NOPE-X-01")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--only names unknown requirement ids*NOPE-X-01*"])


def test_plugin_unknown_requirement_id_fails_collection(checks: pytest.Pytester) -> None:
    checks.makepyfile(
        test_bad="""
import pytest

@pytest.mark.requirement("NOPE-NOPE-99")
def test_cites_unknown():
    pass
"""
    )
    result = checks.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(
        [
            "*ERROR collecting test_bad.py*",
            "*test_bad.py::test_cites_unknown: cites unknown requirement ids NOPE-NOPE-99*",
        ]
    )


@pytest.mark.timeout(290)
def test_plugin_unknown_requirement_id_fails_collection_under_xdist(
    checks: pytest.Pytester,
) -> None:
    checks.makepyfile(
        test_bad="""
import pytest

@pytest.mark.requirement("NOPE-NOPE-99")
def test_cites_unknown():
    pass
"""
    )
    result = checks.runpytest_subprocess("-p", "xdist", "-n", "2", timeout=280)
    # xdist reports a worker's collection error as a failed run (1), pytest alone as 2.
    assert result.ret in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.TESTS_FAILED)
    result.stdout.fnmatch_lines(
        ["*test_bad.py::test_cites_unknown: cites unknown requirement ids NOPE-NOPE-99*"]
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_plugin_check_citing_nothing_fails_collection(checks: pytest.Pytester) -> None:
    checks.makepyfile(test_bare="def test_cites_nothing():\n    pass\n")
    result = checks.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*test_bare.py::test_cites_nothing: cites no requirement*"])


def test_plugin_empty_requirement_marker_fails_collection(checks: pytest.Pytester) -> None:
    checks.makepyfile(
        test_empty="import pytest\n\n@pytest.mark.requirement()\ndef test_x():\n    pass\n"
    )
    result = checks.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*names no id*"])


def test_plugin_ordinary_tests_are_left_alone(pytester: pytest.Pytester) -> None:
    pytester.makefile(".ini", pytest="[pytest]\nfilterwarnings = error\n")
    pytester.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.OK
    assert not (pytester.path / "reports").exists(), "no check ran, so no report is written"
    assert "conformance verdicts" not in result.stdout.str()


def test_plugin_capability_missing_is_a_skip(checks: pytest.Pytester) -> None:
    checks.makepyfile(
        test_capability=f'''
import pytest
from conformance.target.profile import CapabilityMissing

@pytest.fixture
def low_limit_key():
    raise CapabilityMissing("key role 'low-limit'", "add a [keys.low-limit] table")

@pytest.mark.requirement("{MUST[0]}")
def test_in_body():
    raise CapabilityMissing("console session 'second'", "add a [sessions.second] table")

@pytest.mark.requirement("{MUST[1]}")
def test_in_fixture(low_limit_key):
    pass
'''
    )
    report_dir = checks.path / "out"
    result = checks.runpytest("--report-dir", str(report_dir))
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(skipped=2)
    requirements = {r["id"]: r for r in _results(report_dir)["requirements"]}
    assert requirements[MUST[0]]["verdict"] == "skip"
    assert (
        "needs console session 'second': add a [sessions.second]"
        in (requirements[MUST[0]]["reason"])
    )
    assert "needs key role 'low-limit'" in requirements[MUST[1]]["reason"]


CANARIES = {
    "key": "gk_CANARYkey0123456789abcdef",
    "signing": "CANARYsigning0123456789",
    "token": "CANARYsession0123456789abcdef",
}

CANARY_PROFILE = f'''
name = "canary target"
base_url = "http://127.0.0.1:9"
key_prefix = "gk"
[keys.primary]
key = "{CANARIES["key"]}"
account = "primary"
scopes = ["images:generate"]
signing_secret = "{CANARIES["signing"]}"
[sessions.primary]
token = "{CANARIES["token"]}"
'''


def test_plugin_artifacts_never_hold_secrets(checks: pytest.Pytester) -> None:
    """Canary secrets planted in a profile reach no artifact, however a check leaks them."""
    profile = checks.makefile(".toml", profile=CANARY_PROFILE)
    checks.makepyfile(
        test_leaky=f'''
import base64, logging, sys
import pytest

KEY = "{CANARIES["key"]}"
SIGNING = "{CANARIES["signing"]}"
TOKEN = "{CANARIES["token"]}"

@pytest.mark.requirement("{MUST[0]}")
def test_leaks_in_assertion(request):
    request.node.user_properties.append(("token", TOKEN))
    print("signing secret is", SIGNING)
    print("basic", base64.b64encode(("user:" + TOKEN).encode()).decode(), file=sys.stderr)
    logging.getLogger("leak").warning("Authorization: Bearer %s", KEY)
    assert KEY == "something else", f"expected another key, saw {{KEY}} and {{SIGNING}}"

@pytest.mark.requirement("{INTERP[0]}")
def test_leaks_when_passing():
    print(KEY, SIGNING, TOKEN)

@pytest.mark.requirement("{MUST[1]}")
def test_leaks_in_skip():
    pytest.skip("needs a key other than " + KEY)

@pytest.mark.requirement("{MUST[2]}")
def test_leaks_in_harness_error():
    raise RuntimeError("broke holding " + TOKEN)
'''
    )
    report_dir = checks.path / "out"
    result = checks.runpytest(
        "--profile", str(profile), "--report-dir", str(report_dir), "-rA", "--tb=long"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    artifacts = [p for p in report_dir.rglob("*") if p.is_file()]
    names = {p.name for p in artifacts}
    assert {"results.json", "report.html", "junit.xml"} <= names
    assert any(p.parent.name == "allure-results" for p in artifacts)
    for path in artifacts:
        data = path.read_bytes()
        for label, secret in CANARIES.items():
            assert secret.encode() not in data, f"{label} leaked into {path.name}"
        assert b"CANARY" not in data, f"a piece of a canary leaked into {path.name}"
    terminal = result.stdout.str() + result.stderr.str()
    for label, secret in CANARIES.items():
        assert secret not in terminal, f"{label} leaked to the terminal"
    verdicts = _verdicts(report_dir)
    assert verdicts[MUST[0]] == "fail" and verdicts[MUST[2]] == "error"
    data = _results(report_dir)
    assert data["profile"]["name"] == "canary target"
    assert len(data["profile"]["sha256"]) == 64


def test_a_target_that_gives_no_answer_is_named_not_the_harness(
    checks: pytest.Pytester,
) -> None:
    """A request that gets no answer is an error (nothing was judged), said to be the
    target's silence, in the check and in a fixture alike."""
    checks.makepyfile(
        test_silent=f'''
import httpx
import pytest

@pytest.fixture
def unanswered():
    raise httpx.ConnectError("connection refused")

@pytest.mark.requirement("{MUST[0]}")
def test_no_answer():
    raise httpx.ReadTimeout("no answer within 30 s")

@pytest.mark.requirement("{MUST[1]}")
def test_no_answer_in_setup(unanswered):
    pass
'''
    )
    report_dir = checks.path / "out"
    checks.runpytest("--report-dir", str(report_dir))
    by_id = {r["id"]: r for r in _results(report_dir)["requirements"]}
    assert by_id[MUST[0]]["verdict"] == by_id[MUST[1]]["verdict"] == "error"
    assert (
        "no answer from the target, nothing judged: httpx.ReadTimeout" in (by_id[MUST[0]]["reason"])
    )
    assert (
        "no answer from the target (setup), nothing judged: httpx.ConnectError"
        in (by_id[MUST[1]]["reason"])
    )
    assert "harness" not in by_id[MUST[0]]["reason"].split(":", 1)[1]


def test_plugin_allure_labels_area_and_requirement(checks: pytest.Pytester) -> None:
    checks.makepyfile(
        test_labelled=f'''
import pytest

@pytest.mark.requirement("{MUST[0]}")
def test_labelled():
    pass
'''
    )
    report_dir = checks.path / "out"
    result = checks.runpytest("--report-dir", str(report_dir))
    assert result.ret == pytest.ExitCode.OK
    (path,) = (report_dir / "allure-results").glob("*-result.json")
    allure = json.loads(path.read_text(encoding="utf-8"))
    labels = {(label["name"], label["value"]) for label in allure["labels"]}
    assert ("feature", _CATALOG[MUST[0]].area) in labels
    assert ("story", MUST[0]) in labels
    assert ("check", "test_labelled.py::test_labelled") in labels
    # The spec's words embedded (a relative link would break in the Allure UI).
    assert not any("spec/generation-api.md" in link["url"] for link in allure.get("links", ()))
    assert _CATALOG[MUST[0]].statement in allure["description"]


def test_plugin_bad_profile_is_a_usage_error(checks: pytest.Pytester) -> None:
    profile = checks.makefile(".toml", profile='name = "x"\n')
    checks.makepyfile(
        test_x=f'import pytest\n\n@pytest.mark.requirement("{MUST[0]}")\ndef test_x():\n    pass\n'
    )
    result = checks.runpytest("--profile", str(profile))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*profile*is not usable*"])


def test_needs_markers_are_the_capabilities_a_profile_may_lack() -> None:
    assert set(plugin.NEEDS_MARKERS) == {
        "sandbox",
        "dns",
        "console",
        "destructive",
        "slow",
        "clock",
    }


BARE_PROFILE = """
name = "bare target"
base_url = "http://127.0.0.1:9"
key_prefix = "gk"
adapter = "none"
[keys.primary]
key = "gk_bareKEY0123456789abcdef"
account = "primary"
scopes = ["images:generate"]
"""

CONSOLE_ONLY = next(r.id for r in _CATALOG if set(r.needs) == {Need.CONSOLE})


def _passing_checks(*checks: tuple[str, str, str | None]) -> str:
    """The source of a module of fake checks that pass: (name, cited id, marker or None)."""
    sources = [
        (f"@pytest.mark.{marker}\n" if marker else "")
        + f'@pytest.mark.requirement("{requirement}")\ndef {name}():\n    pass\n'
        for name, requirement, marker in checks
    ]
    return "import pytest\n\n" + "\n".join(sources)


def test_plugin_needs_the_profile_lacks_are_skips_with_the_fix(checks: pytest.Pytester) -> None:
    profile = checks.makefile(".toml", profile=BARE_PROFILE)
    checks.makepyfile(
        test_needs=_passing_checks(
            ("test_needs_dns", MUST[0], "dns"),
            ("test_needs_console", MUST[1], "console"),
            ("test_catalog_says_console", CONSOLE_ONLY, None),
            ("test_spends_the_cap", MUST[3], "destructive"),
            ("test_needs_nothing", MUST[2], None),
        )
    )
    report_dir = checks.path / "out"
    result = checks.runpytest("--profile", str(profile), "--report-dir", str(report_dir))
    result.assert_outcomes(passed=1, skipped=4)
    reasons = {r["id"]: r["reason"] for r in _results(report_dir)["requirements"]}
    assert "needs destructive: set [budgets] destructive = true" in reasons[MUST[3]]
    assert "needs dns: add a [dns] table" in reasons[MUST[0]]
    assert "needs console: add [sessions.primary]" in reasons[MUST[1]]
    assert "needs console: add [sessions.primary]" in reasons[CONSOLE_ONLY]


#: Every MUST of the implementation that a black-box check can observe.
OBSERVABLE_MUSTS = [
    r for r in _CATALOG if r.level is Level.MUST and r.party.value == "service" and r.observable
]


def test_verdict_line_of_a_profile_lacking_capabilities(checks: pytest.Pytester) -> None:
    """One passing check per observable MUST, run with a profile that has no console, no
    dns, no adapter and no destructive budget: the checks needing them skip, and the
    verdict line says conformant with the skips counted by capability. Without the check
    of one requirement, the line says how many MUSTs were checked and which were not."""
    profile = checks.makefile(".toml", profile=BARE_PROFILE)
    names = {r.id: f"test_{r.id.lower().replace('-', '_')}" for r in OBSERVABLE_MUSTS}
    checks.makepyfile(test_all=_passing_checks(*((names[i], i, None) for i in names)))
    report_dir = checks.path / "out"
    result = checks.runpytest("--profile", str(profile), "--report-dir", str(report_dir))
    coverage = _results(report_dir)["coverage"]
    lacking = coverage["must_skipped_for_capability"]
    assert set(lacking) == {"adapter", "console", "dns", "destructive"}
    skipped = sum(len(ids) for ids in lacking.values())
    assert coverage["must_checked"] == len(OBSERVABLE_MUSTS) - skipped
    by_capability = ", ".join(f"{name} ({len(ids)})" for name, ids in sorted(lacking.items()))
    line = (
        f"conformant: no failures among the {coverage['must_checked']} MUST requirements "
        f"checked; {skipped} skipped for capabilities the profile lacks: {by_capability}"
    )
    assert coverage["line"] == line
    assert coverage["conformant"]
    assert coverage["not_observable"][0]["id"] == "KEY-HASH-01"
    result.stdout.fnmatch_lines([line, "cannot be observed from outside (*): *KEY-HASH-01*"])

    left_out = next(r.id for r in OBSERVABLE_MUSTS if set(r.needs) == {Need.BLACK_BOX})
    checks.makepyfile(
        test_all=_passing_checks(*((names[i], i, None) for i in names if i != left_out))
    )
    result = checks.runpytest("--profile", str(profile), "--report-dir", str(report_dir))
    coverage = _results(report_dir)["coverage"]
    assert coverage["line"] == (
        f"no failures among the {coverage['must_checked']} MUST requirements checked; 1 not checked"
    )
    assert not coverage["conformant"]
    assert [entry["id"] for entry in coverage["must_not_checked"]] == [left_out]
    result.stdout.fnmatch_lines([f"not checked (1): {left_out}"])


def _ordered_checks(checks: pytest.Pytester) -> Path:
    """Checks in three files, the run-wide module's in the middle of the collection: each
    other check leaves a mark, and the run-wide one asserts that every mark is there and
    that the run's final-event log started empty. Returns the report folder, with a stale
    log of an earlier run in it."""
    marks = checks.mkdir("marks")
    leaves = "def test_{0}():\n    (__import__('pathlib').Path({1!r}) / '{0}').touch()\n"
    checks.makepyfile(
        test_aa=pytest_mark(MUST[0]) + leaves.format("a1", str(marks)),
        test_zz=pytest_mark(MUST[1]) + leaves.format("z1", str(marks)),
    )
    last = f'''
import pathlib
import pytest

@pytest.mark.requirement("{INTERP[0]}")
def test_runs_last(final_events):
    assert final_events() == [], "an earlier run's log was cleared"
    assert sorted(p.name for p in pathlib.Path({str(marks)!r}).iterdir()) == ["a1", "z1"]
'''
    (checks.path / LAST_MODULE).write_text(last, encoding="utf-8")
    report_dir = checks.path / "out"
    stale = report_dir / EVENTS_DIR / "gw9.jsonl"
    stale.parent.mkdir(parents=True)
    stale.write_text(
        '{"generation_id": "gen_old", "event": "generation.completed", "state": {}}\n',
        encoding="utf-8",
    )
    return report_dir


def pytest_mark(requirement: str) -> str:
    return f'import pytest\n\n@pytest.mark.requirement("{requirement}")\n'


def test_plugin_runs_the_run_wide_module_last(checks: pytest.Pytester) -> None:
    report_dir = _ordered_checks(checks)
    result = checks.runpytest("--report-dir", str(report_dir))
    result.assert_outcomes(passed=3)
    assert _verdicts(report_dir)[INTERP[0]] == "pass"
    assert not (report_dir / EVENTS_DIR).exists(), "the logs are removed at the end"


@pytest.mark.timeout(290)
def test_plugin_runs_the_run_wide_module_last_under_xdist(checks: pytest.Pytester) -> None:
    report_dir = _ordered_checks(checks)
    result = _run_under_xdist(checks, report_dir)
    result.assert_outcomes(passed=3)
    assert _verdicts(report_dir)[INTERP[0]] == "pass"
    assert not (report_dir / EVENTS_DIR).exists()


def test_worker_python_from_the_environment_is_what_execnet_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``GENAPI_WORKER_PYTHON`` becomes each popen worker's Python (the command execnet
    starts with ``-u -c CODE``); unset, the specs are left as pytest-xdist made them."""
    import execnet
    from execnet.gateway_io import popen_args

    specs = [execnet.XSpec("popen"), execnet.XSpec("popen")]
    monkeypatch.delenv(plugin.WORKER_PYTHON_ENV, raising=False)
    plugin.pytest_xdist_setupnodes(config=None, specs=specs)  # type: ignore[arg-type]
    assert [spec.python for spec in specs] == [None, None]
    monkeypatch.setenv(plugin.WORKER_PYTHON_ENV, "/opt/py -S /tmp/client.py /tmp/sock")
    plugin.pytest_xdist_setupnodes(config=None, specs=specs)  # type: ignore[arg-type]
    for spec in specs:
        assert popen_args(spec)[:5] == ["/opt/py", "-S", "/tmp/client.py", "/tmp/sock", "-u"]
