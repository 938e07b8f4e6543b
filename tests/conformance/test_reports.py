"""Reports: results.json references its evidence; report.html is self-contained and safe."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

from conformance.catalog import Level, Need, Requirement
from conformance.evidence import Exchange
from conformance.reports import (
    RunInfo,
    new_report_dir,
    redact_tree,
    render_html,
    results_document,
    write_reports,
)
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


def _run() -> RunVerdicts:
    requirements = [
        _requirement("TIER-READ-01"),
        _requirement("TIER-READ-02", Level.INTERPRETATION),
        _requirement("TIER-FIELD-01"),
        _requirement("KEY-PREFIX-01", area="KEY"),
    ]
    checks = [
        CheckResult(
            nodeid="conformance/checks/test_tier.py::test_ok",
            requirement_ids=("TIER-FIELD-01",),
            outcome=Outcome.PASSED,
            duration=0.1,
        ),
        CheckResult(
            nodeid=f"conformance/checks/test_tier.py::test_bad[{XSS}]",
            requirement_ids=("TIER-READ-01", "TIER-READ-02"),
            outcome=Outcome.FAILED,
            duration=0.3,
            message=f"AssertionError: expected 2xx, saw 500 {XSS}",
            longrepr=f"Traceback {XSS}",
            exchanges=(_exchange("{}"), _exchange(f"<html>{XSS}</html>")),
        ),
    ]
    return judge(requirements, checks)


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
    assert "<script" not in page.lower()
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
    assert "Summary by requirement" in page
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
    passed = CheckResult(
        nodeid="conformance/checks/test_tier.py::test_ok",
        requirement_ids=("TIER-FIELD-01",),
        outcome=Outcome.PASSED,
        duration=0.1,
    )
    return judge([_requirement("TIER-FIELD-01"), hashed], [passed])


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
