"""``genapi-conformance requirements`` and the check index it reads."""

from __future__ import annotations

import json

import pytest

from conformance.catalog import load_catalog
from conformance.checks.test_scope_matrix import _IDS as MATRIX_IDS
from conformance.run.check_index import checks_by_requirement
from conformance.run.cli import main
from conformance.run.commands.requirements import faults_by_requirement, uncovered_musts


def test_the_index_cites_only_catalog_ids() -> None:
    catalog = load_catalog()
    index = checks_by_requirement()
    assert index
    assert [rid for rid in index if rid not in catalog] == []
    assert index["RATE-RPM-03"] == ("test_rate_minute.py::test_rate_limit_is_per_key",)


def test_uncovered_counts_only_observable_service_musts() -> None:
    catalog = load_catalog()
    everything = {r.id: ("c",) for r in catalog}
    assert uncovered_musts(catalog, everything) == []
    counted = [r for r in catalog if r.level == "MUST" and r.observable and r.party == "service"]
    assert uncovered_musts(catalog, {}) == [r.id for r in counted]
    unobservable = [r.id for r in catalog if not r.observable]
    assert not set(unobservable) & set(uncovered_musts(catalog, {}))


def test_faults_come_from_the_reference_process() -> None:
    faults = faults_by_requirement()
    assert faults is not None
    assert "rate-limit-per-account" in faults["RATE-RPM-03"]


def test_json_listing_filters_by_pattern_and_level(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["requirements", "RATE-RPM-*", "--level", "MUST", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    ids = [entry["id"] for entry in listing["requirements"]]
    assert ids and all(i.startswith("RATE-RPM-") for i in ids)
    assert all(entry["level"] == "MUST" for entry in listing["requirements"])
    per_key = next(e for e in listing["requirements"] if e["id"] == "RATE-RPM-03")
    assert per_key["checks"] and "rate-limit-per-account" in per_key["faults"]
    assert isinstance(listing["uncovered_musts"], list)


def test_unobservable_entries_show_their_reason(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["requirements", "--unobservable", "--no-faults"]) == 0
    out = capsys.readouterr().out
    for requirement in load_catalog().unobservable():
        assert requirement.id in out
        assert "not observable:" in out


def test_search_and_summary_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["requirements", "--search", "rolling", "--no-faults"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert any(line.startswith("RATE-RPM-04") for line in out)
    assert "observable MUST requirements without a check:" in out[-1]


def test_unknown_area_is_a_usage_error() -> None:
    assert main(["requirements", "--area", "NOPE"]) == 2


def test_the_index_sees_data_driven_ids(capsys: pytest.CaptureFixture[str]) -> None:
    """The URL vectors take their ids from a fixture file, not from the source."""
    assert main(["requirements", "URL-PRIV-01", "--json", "--no-faults"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["requirements"]
    assert entry["checks"]


def test_without_a_profile_the_scope_matrix_ids_count_as_checked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The scope matrix builds its cases from the profile's keys; without a profile its
    skipped case still cites every id the matrix checks."""
    catalog = load_catalog()
    index = checks_by_requirement()
    matrix = {rid for rid, checks in index.items() if any("test_scope_matrix" in c for c in checks)}
    assert {i for both in MATRIX_IDS.values() for half in both for i in half} <= matrix
    assert uncovered_musts(catalog, index) == []
    assert main(["requirements", "SCOPE-*", "--no-faults"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith("without a check: 0")
