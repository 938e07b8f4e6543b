"""What a run leaves for CI and for people: JUnit and Allure that agree with the verdicts,
the summary, and reproduction lines that reproduce."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fake_checks import CATALOG, INI, INTERP, MUST, check_result
from rich.console import Console

from conformance.evidence import Exchange
from conformance.reports import Reproduction
from conformance.run.allure_report import allure_command, build_allure_report
from conformance.run.plugin.allure import spec_section
from conformance.run.summary import RunEnd, summarise
from conformance.target.profile import parse_profile
from conformance.verdicts import Outcome, judge

pytest_plugins = ["pytester"]

WARNINGS_ONLY = f'''
import pytest
from conformance import findings

@pytest.fixture
def noisy_fixture():
    yield 1

@pytest.mark.requirement("{MUST[0]}")
def test_passes(noisy_fixture):
    pass

@pytest.mark.requirement("{INTERP[0]}")
def test_breaks_an_interpretation(noisy_fixture):
    assert False, "assumed shape not met"

@pytest.mark.requirement("{INTERP[1]}")
def test_passes_with_a_warning():
    findings.warn("met only within the slack", rule="{INTERP[1]}")

@pytest.mark.requirement("{MUST[1]}")
def test_skips():
    pytest.skip("needs dns")
'''

WITH_A_FAILURE = (
    WARNINGS_ONLY
    + f'''
@pytest.mark.requirement("{MUST[2]}")
def test_fails():
    assert 500 == 200, "expected 200, saw 500"
'''
)


def _run(pytester: pytest.Pytester, source: str, exit_code: pytest.ExitCode) -> Path:
    """The report folder of a run of the checks *source*, which ended with *exit_code*."""
    pytester.makefile(".ini", pytest=INI)
    pytester.makepyfile(test_checks=source)
    report_dir = pytester.path / "out"
    result = pytester.runpytest("--report-dir", str(report_dir), "-p", "no:xdist")
    assert result.ret == exit_code
    return report_dir


def _junit(report_dir: Path, counts: tuple[str, ...]) -> dict[str, ET.Element]:
    """The junit suite's cases by name; its counts of tests, failures, errors and skipped
    are *counts*."""
    suite = ET.parse(report_dir / "junit.xml").getroot().find("testsuite")  # noqa: S314
    assert suite is not None
    names = ("tests", "failures", "errors", "skipped")
    assert tuple(suite.get(name, "") for name in names) == counts
    return {case.get("name", ""): case for case in suite.iter("testcase")}


def _allure(report_dir: Path) -> dict[str, dict[str, Any]]:
    results = {}
    for path in (report_dir / "allure-results").glob("*-result.json"):
        result = json.loads(path.read_text(encoding="utf-8"))
        results[result["name"]] = result
    return results


def test_a_warnings_only_run_is_green_in_junit_and_allure_and_the_warnings_stay_visible(
    pytester: pytest.Pytester,
) -> None:
    report_dir = _run(pytester, WARNINGS_ONLY, pytest.ExitCode.OK)
    cases = _junit(report_dir, ("4", "0", "0", "1"))
    warned = cases["test_breaks_an_interpretation"]
    assert warned.find("failure") is None
    properties = {p.get("name"): p.get("value") for p in warned.iter("property")}
    assert properties["verdict"] == "warn"
    out = warned.findtext("system-out") or ""
    assert "WARN" in out and "assumed shape not met" in out
    slack = cases["test_passes_with_a_warning"]
    assert "met only within the slack" in (slack.findtext("system-out") or "")

    allure = _allure(report_dir)
    assert {name: r["status"] for name, r in allure.items()} == {
        "test_passes": "passed",
        "test_breaks_an_interpretation": "passed",
        "test_passes_with_a_warning": "passed",
        "test_skips": "skipped",
    }
    tags = {
        label["value"]
        for label in allure["test_breaks_an_interpretation"]["labels"]
        if label["name"] == "tag"
    }
    assert "warning" in tags
    assert (
        "assumed shape not met"
        in allure["test_breaks_an_interpretation"]["statusDetails"]["message"]
    )
    assert not list((report_dir / "allure-results").glob("*-container.json")), "fixture noise"
    rerun = next(a for a in allure["test_passes"]["attachments"] if a["name"] == "rerun")
    line = (report_dir / "allure-results" / rerun["source"]).read_text(encoding="utf-8")
    assert line.strip() == f"genapi-conformance run --only {MUST[0]}"
    description = allure["test_passes"]["description"]
    assert CATALOG[MUST[0]].statement in description
    assert CATALOG[MUST[0]].quotes[0].splitlines()[0] in description


def test_a_run_with_a_failure_counts_the_same_in_junit_allure_and_the_summary(
    pytester: pytest.Pytester,
) -> None:
    report_dir = _run(pytester, WITH_A_FAILURE, pytest.ExitCode.TESTS_FAILED)
    cases = _junit(report_dir, ("5", "1", "0", "1"))
    assert cases["test_fails"].find("failure") is not None
    statuses = Counter(r["status"] for r in _allure(report_dir).values())
    assert statuses == Counter(passed=3, failed=1, skipped=1)

    data = json.loads((report_dir / "results.json").read_text(encoding="utf-8"))
    assert data["requirements"]  # the summary below is fed the same verdicts
    checks = [
        check_result(
            "t::fails", MUST[2], duration=1.0, message="AssertionError: expected 200, saw 500"
        ),
        check_result(
            "t::warns", INTERP[0], duration=1.0, message="AssertionError: assumed shape not met"
        ),
        check_result("t::passes", MUST[0], outcome=Outcome.PASSED, duration=1.0),
    ]
    verdicts = judge([CATALOG[MUST[0]], CATALOG[MUST[2]], CATALOG[INTERP[0]]], checks)
    out = io.StringIO()
    end = RunEnd(
        target="acme staging",
        verdicts=verdicts,
        report_dir=Path("/runs/r1"),
        duration_s=372.0,
        pytest_code=1,
        reproduction=Reproduction(target=("--profile", "acme.toml")),
    )
    summarise(Console(file=out, width=80), end, CATALOG)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("not conformant: acme staging")
    assert "checks: 3 run: 1 passed, 1 failed, 1 warned, 0 skipped, 0 errors (in 6m12s)" in lines
    fail_line = next(line for line in lines if line.startswith("FAIL  "))
    assert MUST[2] in fail_line and "expected 200, saw 500" in fail_line, "one line, unwrapped"
    assert any(line.startswith(f"WARN  {INTERP[0]}") for line in lines)
    assert (
        f"rerun the failures: genapi-conformance run --profile acme.toml --only {MUST[2]}" in lines
    )
    assert "report: /runs/r1/report.html" in lines

    quiet = io.StringIO()
    summarise(Console(file=quiet), end, CATALOG, quiet=True)
    assert not any(line.startswith(("FAIL", "WARN")) for line in quiet.getvalue().splitlines())
    strict = io.StringIO()
    passing = judge([CATALOG[INTERP[0]]], checks[1:2])
    summarise(
        Console(file=strict),
        RunEnd("t", passing, Path("/r"), 1.0, 0, Reproduction(), strict=True),
        CATALOG,
    )
    assert strict.getvalue().startswith("not accepted (--strict)")


PROFILE = """
name = "acme"
base_url = "http://127.0.0.1:9"
[keys.primary]
key_env = "ACME_API_KEY"
scopes = ["images:generate"]
[keys.other]
key = "gk_plain_0123456789abcdef"
scopes = ["images:generate"]
"""


def test_curl_lines_use_the_profiles_variables_and_the_legend_names_them() -> None:
    profile = parse_profile(PROFILE, env={"ACME_API_KEY": "gk_from_env_0123456789"})
    assert profile.secret_env == {"keys.primary.key": "ACME_API_KEY"}
    again = Reproduction(
        target=("--profile", "my profile.toml"),
        selection=("-k", "tier"),
        secret_env=profile.secret_env,
        secret_labels=tuple(profile.secrets()),
    )
    exchange = Exchange(
        method="GET",
        url="http://127.0.0.1:9/v1/account/tier",
        request_headers=(("authorization", "Bearer [redacted:keys.primary.key]"),),
        request_body="",
        status=200,
        response_headers=(),
        response_body="{}",
        elapsed_ms=1.0,
    )
    assert '"${ACME_API_KEY}"' in again.curl(exchange)
    assert dict(again.legend())["ACME_API_KEY"] == "keys.primary.key"
    assert dict(again.legend())["GENAPI_KEY_OTHER"] == "keys.other.key"
    assert again.rerun(("SIG-HMAC-01",)) == (
        "genapi-conformance run --profile 'my profile.toml' --only SIG-HMAC-01 -k tier"
    )


@pytest.mark.parametrize(
    "body",
    [
        pytest.param('{"prompt": "tab\\there"}\r\n\x1b[31m', id="control-bytes"),
        pytest.param("a\x00b\\x41 [redacted:keys.primary.key] 'q' $HOME", id="nul-byte"),
        pytest.param("plain 'quoted' $HOME `x` \\ multi\nline é 漢", id="printable"),
    ],
)
def test_curl_line_sends_bytes_that_cannot_be_typed(tmp_path: Path, body: str) -> None:
    """The line, run by bash with curl replaced, hands curl exactly the recorded body,
    and holds no control byte itself (it can be pasted)."""
    exchange = Exchange(
        method="POST",
        url="http://127.0.0.1:9/v1/x",
        request_headers=(("content-type", "application/json"),),
        request_body=body,
        status=200,
        response_headers=(),
        response_body="",
        elapsed_ms=1.0,
    )
    line = exchange.as_curl()
    assert all(c == "\n" or c.isprintable() for c in line), line
    sent = tmp_path / "sent"
    fake_curl = (
        'curl() { while [ $# -gt 0 ]; do if [ "$1" = --data-binary ]; then '
        f'if [ "$2" = @- ]; then cat > {sent}; else printf %s "$2" > {sent}; fi; fi; '
        "shift; done; }\n"
    )
    subprocess.run(  # noqa: S603 (a fixed argv; curl is a shell function here)
        ["/bin/bash", "-c", fake_curl + line],
        env={"GENAPI_KEY_PRIMARY": "the-key", "PATH": os.environ.get("PATH", "")},
        timeout=10,
        check=True,
    )
    expected = body.replace("[redacted:keys.primary.key]", "the-key")
    assert sent.read_bytes() == expected.encode("utf-8")


def test_spec_section_is_the_text_under_its_heading() -> None:
    text = spec_section("Signature")
    assert text and not text.startswith("#")
    assert "HMAC" in text
    unresolved = sorted({r.heading for r in CATALOG if not spec_section(r.heading)})
    assert unresolved == [], "every requirement's section is embedded in Allure"


def _local_allure(root: Path) -> list[str] | None:
    """Allure 3 installed on this machine, on PATH or in the project's ``node_modules``
    under *root* (never downloaded by a test)."""
    command = allure_command(cwd=root)
    if command is None or "npx" in Path(command[0]).name:
        return None
    try:
        version = subprocess.run(  # noqa: S603
            [*command, "--version"], capture_output=True, text=True, timeout=60, check=False
        ).stdout.strip()
    except OSError:
        return None
    return command if version.startswith("3.") else None


def test_report_allure_builds_the_html_where_allure_3_is_installed(
    pytester: pytest.Pytester, pytestconfig: pytest.Config
) -> None:
    if shutil.which("node") is None:
        pytest.skip("Node.js is not installed: the Allure report needs it (npm package allure)")
    command = _local_allure(pytestconfig.rootpath)
    if command is None:
        pytest.skip(
            "the npm package allure (Allure 3) is not installed here (no `allure` on PATH or "
            "in ./node_modules/.bin); a test never downloads it"
        )
    report_dir = _run(pytester, WITH_A_FAILURE, pytest.ExitCode.TESTS_FAILED)
    assert build_allure_report(report_dir, allure=Path(command[0])) == 0
    assert (report_dir / "allure-report" / "index.html").is_file()


def test_report_allure_without_results_is_a_usage_error(tmp_path: Path) -> None:
    assert build_allure_report(tmp_path) == 2
