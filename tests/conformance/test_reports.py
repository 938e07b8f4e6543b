"""Reports: results.json references its evidence; report.html is self-contained and safe."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fake_checks import check_result

from conformance.catalog import Level, Need, Requirement
from conformance.evidence import Exchange
from conformance.findings import Arrival, ChainTrace
from conformance.reports import (
    RunInfo,
    new_report_dir,
    redact_tree,
    render_html,
    results_document,
    write_reports,
)
from conformance.reports.html_assets import SCRIPT
from conformance.reports.html_charts import allowed_window, timeline_svg
from conformance.secrets import Redactor
from conformance.verdicts import CheckResult, Outcome, RunVerdicts, judge

XSS = "<script>alert('owned')</script>"
STARTED = datetime(2026, 11, 22, 1, 0, tzinfo=UTC)


def _requirement(rid: str, level: Level = Level.MUST, area: str = "TIER") -> Requirement:
    return Requirement(
        id=rid,
        area=area,
        section="4",
        heading=f"GET /v1/account/tier {XSS}",
        statement=f"statement of {rid} & more",
        level=level,
        needs=(Need.BLACK_BOX,),
    )


def _exchange(body: str) -> Exchange:
    return Exchange(
        method="GET",
        url="http://127.0.0.1:8765/v1/account/tier",
        request_headers=(("authorization", "Bearer [redacted:keys.primary.key]"),),
        request_body="",
        status=500,
        response_headers=(("content-type", "text/html"),),
        response_body=body,
        elapsed_ms=12.0,
    )


def _info() -> RunInfo:
    return RunInfo(
        suite_version="0.1.0",
        spec_version="generation-api/2026-08-01",
        api_version="2026-08-01",
        profile_name=f"target {XSS}",
        profile_sha256="ab" * 32,
        base_url="http://127.0.0.1:8765",
        started_at=STARTED,
        finished_at=STARTED + timedelta(seconds=42),
    )


def _tier(test: str) -> str:
    """The node id of the check *test* of ``conformance/checks/test_tier.py``."""
    return f"conformance/checks/test_tier.py::{test}"


def _passed() -> CheckResult:
    return check_result(_tier("test_ok"), "TIER-FIELD-01", outcome=Outcome.PASSED)


def _page(requirement: Requirement, check: CheckResult) -> str:
    """The report page of a run of one *check* of one *requirement*."""
    return render_html(_info(), judge([requirement], [check]))


def _run() -> RunVerdicts:
    requirements = [
        _requirement("TIER-READ-01"),
        _requirement("TIER-READ-02", Level.INTERPRETATION),
        _requirement("TIER-FIELD-01"),
        _requirement("KEY-PREFIX-01", area="KEY"),
    ]
    failed = check_result(
        _tier(f"test_bad[{XSS}]"),
        "TIER-READ-01",
        "TIER-READ-02",
        duration=0.3,
        message=f"AssertionError: expected 2xx, saw 500 {XSS}",
        longrepr=f"Traceback {XSS}",
        exchanges=(_exchange("{}"), _exchange(f"<html>{XSS}</html>")),
    )
    return judge(requirements, [_passed(), failed])


def test_results_document_references_checks_and_exchanges() -> None:
    document = results_document(_info(), _run())
    json.dumps(document)  # plain data all the way down
    assert document["spec_version"] == "generation-api/2026-08-01"
    assert document["api_version"] == "2026-08-01"
    assert document["profile"]["sha256"] == "ab" * 32
    assert document["duration_seconds"] == 42.0
    assert document["counts"] == {
        "fail": 1,
        "error": 0,
        "warn": 1,
        "pass": 1,
        "skip": 0,
        "untested": 1,
        "unobservable": 0,
    }
    assert document["ok"] is False
    by_id = {r["id"]: r for r in document["requirements"]}
    assert by_id["TIER-READ-01"]["verdict"] == "fail"
    assert by_id["TIER-READ-02"]["verdict"] == "warn"
    assert by_id["TIER-READ-02"]["level"] == "INTERPRETATION"
    assert by_id["TIER-READ-02"]["party"] == "service"
    assert by_id["KEY-PREFIX-01"]["verdict"] == "untested"
    evidence = by_id["TIER-READ-01"]["evidence"][0]
    assert evidence["exchanges"] == [0, 1]
    check = next(c for c in document["checks"] if c["nodeid"] == evidence["check"])
    assert check["exchanges"][1]["status"] == 500


def test_html_escapes_everything_from_the_run() -> None:
    page = render_html(_info(), _run())
    assert page.lower().count("<script") == 1, "the page's own filter script, nothing else"
    assert f"<script>{SCRIPT}</script>" in page
    assert "&lt;script&gt;" in page
    assert "alert(&#x27;owned&#x27;)" in page


def test_html_is_self_contained() -> None:
    page = render_html(_info(), _run())
    assert not re.search(r"<(link|img|iframe|object|embed)\b", page, re.IGNORECASE)
    assert not re.search(r"(src|href)\s*=\s*['\"]?(https?:)?//", page, re.IGNORECASE)
    assert "@import" not in page and "url(" not in page
    assert "<style>" in page


def test_html_lists_summary_failures_first_and_untested() -> None:
    page = render_html(_info(), _run())
    assert "Untested (1)" in page and "KEY-PREFIX-01" in page
    tier_fail = page.index("id='req-TIER-READ-01'")
    tier_warn = page.index("id='req-TIER-READ-02'")
    tier_pass = page.index("id='req-TIER-FIELD-01'")
    assert tier_fail < tier_warn < tier_pass, "within an area, the worst verdicts come first"
    assert page.index("area TIER") < page.index("area KEY"), "the failing area comes first"


def _unobservable_run() -> RunVerdicts:
    hashed = replace(
        _requirement("KEY-HASH-01", area="KEY"),
        observable=False,
        unobservable_reason="how a key is stored is not visible over HTTP",
    )
    return judge([_requirement("TIER-FIELD-01"), hashed], [_passed()])


def test_results_document_gives_the_verdict_line_and_the_unobservable_apart() -> None:
    document = results_document(_info(), _unobservable_run())
    by_id = {r["id"]: r for r in document["requirements"]}
    assert by_id["KEY-HASH-01"]["verdict"] == "unobservable"
    assert by_id["KEY-HASH-01"]["observable"] is False
    assert document["counts"]["unobservable"] == 1
    assert document["coverage"] == {
        "line": "conformant: no failures among the 1 MUST requirement checked, "
        "every observable one",
        "conformant": True,
        "must_checked": 1,
        "must_failed": [],
        "must_not_checked": [],
        "must_outside_selection": [],
        "must_skipped_for_capability": {},
        "not_observable": [
            {"id": "KEY-HASH-01", "reason": "how a key is stored is not visible over HTTP"}
        ],
    }
    failing = results_document(_info(), _run())["coverage"]
    assert failing["line"] == (
        "not conformant: 1 of the 2 MUST requirements checked failed; 1 not checked"
    )
    assert failing["must_not_checked"] == [
        {"id": "KEY-PREFIX-01", "reason": "no check in the suite verifies this requirement"}
    ]


def test_html_gives_the_verdict_line_and_lists_the_unobservable_under_their_heading() -> None:
    page = render_html(_info(), _unobservable_run())
    assert "conformant: no failures among the 1 MUST requirement checked" in page
    heading = page.index("Not observable from outside (never passed) (1)")
    assert "KEY-HASH-01" in page[heading:]
    assert "Untested (" not in page
    failing = render_html(_info(), _run())
    assert "not conformant: 1 of the 2 MUST requirements checked failed" in failing
    assert "not checked (1): KEY-PREFIX-01" in failing


def test_html_failure_shows_expected_seen_exchange_and_reproduction() -> None:
    page = render_html(_info(), _run())
    assert "expected vs seen" in page
    assert "expected 2xx, saw 500" in page
    assert "<details><summary>exchange #0:" in page
    assert "<details open><summary>exchange #1:" in page, "the last exchange is shown open"
    assert "${GENAPI_KEY_PRIMARY}" in page, "the curl line names the key's variable"
    assert "genapi-conformance run --only TIER-READ-01" in page


def test_write_reports_writes_both_files(tmp_path: Path) -> None:
    written = write_reports(tmp_path / "run", _info(), _run())
    assert [p.name for p in written] == ["results.json", "report.html"]
    assert json.loads(written[0].read_text(encoding="utf-8"))["format"]


def test_redact_tree_masks_secrets_in_every_file(tmp_path: Path) -> None:
    secret = "gk_treeSECRET0123456789abcdef"
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text(f"key={secret}", encoding="utf-8")
    (tmp_path / "sub" / "b.json").write_text(json.dumps({"k": secret}), encoding="utf-8")
    (tmp_path / "clean.txt").write_text("nothing here", encoding="utf-8")
    changed = redact_tree(tmp_path, Redactor({"keys.primary.key": secret}))
    assert changed == 2
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(encoding="utf-8")


def test_new_report_dir_is_a_fresh_timestamped_path(tmp_path: Path) -> None:
    first = new_report_dir(tmp_path)
    assert re.fullmatch(r"\d{8}T\d{6}Z", first.name)
    assert not first.exists()
    first.mkdir()
    second = new_report_dir(tmp_path)
    assert second != first and not second.exists()


def test_html_banner_says_not_conformant_why_counts_and_duration() -> None:
    page = render_html(_info(), _run())
    banner = page[page.index("<div class='banner") : page.index("</div>", page.index("banner"))]
    assert "banner bad" in banner and "Not conformant" in banner
    assert "1 stated requirement(s) failed: TIER-READ-01" in banner
    assert "1 fail" in banner and "1 warn" in banner and "1 untested" in banner
    assert "checks: 2 (1 passed, 1 failed" in banner
    assert "duration 0 min 42 s" in banner


def test_html_banner_is_green_when_only_warnings() -> None:
    message = "AssertionError: an interpretation"
    warned = check_result(_tier("test_warned"), "TIER-READ-02", message=message)
    page = _page(_requirement("TIER-READ-02", Level.INTERPRETATION), warned)
    assert "banner ok" in page and ">Conformant<" in page
    assert "1 interpretation(s) not met, reported as warnings only: TIER-READ-02" in page


def test_html_rows_show_the_statement_and_carry_filter_data() -> None:
    page = render_html(_info(), _run())
    row = page[page.index("id='req-TIER-READ-01'") :]
    assert row.index("statement of TIER-READ-01 &amp; more") < row.index("</summary>")
    assert "data-verdict='fail' data-area='TIER'" in row
    assert "data-search='tier-read-01 statement of tier-read-01 &amp; more" in row
    assert "<select id='f-area'><option value=''>all</option><option value='KEY'>" in page


def test_html_shows_control_bytes_escaped() -> None:
    check = check_result(
        _tier("test_bytes"),
        "TIER-READ-01",
        message="AssertionError: saw \x1b[31mred\x00 \u202etxt.exe",
        exchanges=(_exchange("a\x07b\r\nc\td"),),
    )
    page = _page(_requirement("TIER-READ-01"), check)
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f\u202e]", page), "no raw control byte"
    assert "<span class='ctl'>\\x1b</span>[31mred<span class='ctl'>\\x00</span>" in page
    assert "<span class='ctl'>\\u202e</span>txt.exe" in page
    assert "a<span class='ctl'>\\x07</span>b<span class='ctl'>\\x0d</span>\nc\td" in page


def test_html_keeps_passing_exchanges_to_one_line_each() -> None:
    body = "PASSING-BODY " * 100
    passed = replace(_passed(), exchanges=(_exchange(body), _exchange(body)))
    page = _page(_requirement("TIER-FIELD-01"), passed)
    assert "PASSING-BODY" not in page and "curl -sS" not in page
    assert "exchange #1: GET http://127.0.0.1:8765/v1/account/tier → 500" in page


def _chain(*arrivals: tuple[float, int, float]) -> ChainTrace:
    return ChainTrace(
        name="slow-target",
        arrivals=tuple(
            Arrival(at, str(i + 1), status, held) for i, (at, status, held) in enumerate(arrivals)
        ),
        timeout=10.0,
        backoffs=(1.0, 2.0),
        tolerance=0.5,
    )


def test_allowed_window_spans_both_readings_of_the_backoff() -> None:
    at_once = _chain((0.0, 500, 0.0), (1.0, 500, 0.0), (3.0, 500, 0.0), (4.0, 500, 0.0))
    assert allowed_window(at_once, 1) == (0.5, 1.5)
    assert allowed_window(at_once, 2) == (2.5, 3.5)
    assert allowed_window(at_once, 3) is None, "there are 3 attempts at most"
    # Held past the 10 s timeout: the 2nd attempt is due 10 s (backoff from the start)
    # to 11 s (from the end) after the first.
    assert allowed_window(_chain((0.0, 200, 16.0), (10.4, 200, 0.0)), 1) == (9.5, 11.5)


def test_timeline_marks_attempts_against_their_windows() -> None:
    svg = timeline_svg(_chain((0.0, 500, 0.0), (0.1, 500, 0.0), (3.2, 500, 0.0), (9.0, 500, 0.0)))
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert svg.count("class='arrival") == 4
    assert svg.count("class='arrival late'") == 3, "a 0.1 s backoff, a 4th attempt"
    assert "class='window'" in svg and "class='forbidden'" in svg
    assert "+0.10 s, replied 500 at once" in svg
    held = timeline_svg(_chain((0.0, 200, 16.0), (10.6, 200, 0.0)))
    assert "class='timeout'" in held and "held 16 s (over the 10 s timeout) then 200" in held
    assert "class='arrival on-time'" in held and "late" not in held


def test_html_draws_a_timeline_for_each_chain_a_check_saw() -> None:
    check = check_result(
        "conformance/checks/test_delivery_retries.py::test_backoff",
        "DLV-BACKOFF-01",
        duration=3.0,
        message="AssertionError: 0.10 s",
        chains=(_chain((0.0, 500, 0.0), (0.1, 500, 0.0)),),
    )
    page = _page(_requirement("DLV-BACKOFF-01", area="DLV"), check)
    assert "delivery chain <code>slow-target</code>" in page and "<svg class='timeline'" in page
    restored = CheckResult.from_dict(json.loads(json.dumps(check.to_dict())))
    assert restored.chains == check.chains, "chains travel from xdist workers as data"


def test_html_charts_remaining_requests_for_rate_checks() -> None:
    def limited(at: float, remaining: int, status: int) -> Exchange:
        return replace(
            _exchange(""),
            request_headers=(),
            status=status,
            response_headers=(("X-RateLimit-Remaining", str(remaining)),),
            elapsed_ms=1.0,
            started_at=1_800_000_000.0 + at,
        )

    check = check_result(
        "conformance/checks/test_rate.py::test_rpm",
        "RATE-RPM-01",
        duration=3.0,
        message="AssertionError: limited early",
        exchanges=(limited(0, 2, 200), limited(0.5, 1, 200), limited(1, 0, 429)),
    )
    page = _page(_requirement("RATE-RPM-01", area="RATE"), check)
    assert "<svg class='ratechart'" in page
    assert page.count("class='served'") == 2 and page.count("class='limited'") == 1
