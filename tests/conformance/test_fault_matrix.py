"""The fault matrix, part 1: the reference passes every check; each of its faults is caught.

Every fault of the reference implementation (``reference/faults.py``) breaks exactly one
catalogued requirement. The matrix proves the suite sees each one, as a user would:

* a full ``genapi-conformance run`` against the embedded reference with no fault gives no
  failure, error or warning (so a check that fails below fails because of the fault);
* for each fault, a run with that one fault and only the checks citing its requirement
  (``--only ID``) gives that requirement ``fail`` (a MUST) or ``warn`` (an
  INTERPRETATION); a fault whose requirement no check cites fails with "has no check";
* the other way round, every MUST requirement a check cites has a fault, so no check is
  left without proof that it can fail.

The faults are split over this module and ``test_fault_matrix_part2.py`` (the project runs
its tests with ``-n 2 --dist loadfile``: one module per worker). Run through
``bash scripts/test``: every run starts the reference, so it needs the loopback-only
network namespace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fault_matrix import (
    FULL_RUN_TIMEOUT_S,
    PARTS,
    SHARES,
    RegisteredFault,
    SuiteRun,
    fault_is_caught_test,
    registry,
    run_suite,
    share,
)

from conformance.catalog import load_catalog
from conformance.run.cli import EXIT_OK
from conformance.run.plugin.citations import OWN_CHECKS
from conformance.run.plugin.preselect import source_citations
from reference.faults import FAULTS

#: This module's buckets of the faults (part 2 holds the others).
PART = PARTS[0]


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory: pytest.TempPathFactory) -> SuiteRun:
    """One full run against the embedded reference with no fault (two workers, as users
    run it); its results also say which requirements the checks cite."""
    report_dir = tmp_path_factory.mktemp("clean") / "report"
    return run_suite(report_dir, timeout=FULL_RUN_TIMEOUT_S)


def _with_checks(run: SuiteRun) -> list[dict[str, Any]]:
    assert run.results is not None, f"the run wrote no results.json{run.describe()}"
    return [r for r in run.results["requirements"] if r["evidence"]]


def test_faults_json_lists_the_registry() -> None:
    """``faults --json`` (what the matrix reads) is the registry, entry for entry, in order."""
    listed = registry()
    assert listed == tuple(
        RegisteredFault(f.name, f.requirement_id, f.description) for f in FAULTS.values()
    )
    assert len({f.name for f in listed}) == len(listed), "fault names are unique"


def test_parts_of_the_matrix_hold_every_fault_once() -> None:
    """The two modules' buckets partition the hash space: no fault is left out or run twice."""
    buckets = [b for part in PARTS for b in part]
    assert sorted(buckets) == list(range(SHARES))
    names = [f.name for part in PARTS for f in share(registry(), part)]
    assert sorted(names) == sorted(f.name for f in registry())


@pytest.mark.slow
@pytest.mark.timeout(FULL_RUN_TIMEOUT_S + 60)
def test_reference_passes_every_check(clean_run: SuiteRun) -> None:
    """Every requirement with checks passes against the reference (or is skipped for a
    capability the embedded profile lacks, with that reason); the four reports exist."""
    run = clean_run
    requirements = _with_checks(run)
    assert requirements, f"no requirement has a check{run.describe()}"
    wrong = [
        f"{r['id']} ({r['level']}): {r['verdict']}: {r['reason']}"
        for r in requirements
        if r["verdict"] not in ("pass", "skip")
    ]
    assert not wrong, "the reference does not pass every check:\n" + "\n".join(wrong)
    assert run.results is not None
    unexplained = [
        c["nodeid"]
        for c in run.results["checks"]
        if c["outcome"] == "skipped" and not c["message"].strip()
    ]
    assert not unexplained, f"checks skipped without a reason: {unexplained}"
    assert run.returncode == EXIT_OK, run.describe()
    assert run.results["ok"] is True
    assert (run.report_dir / "report.html").is_file()
    assert (run.report_dir / "junit.xml").is_file()
    assert list((run.report_dir / "allure-results").glob("*-result.json"))


@pytest.mark.slow
@pytest.mark.timeout(FULL_RUN_TIMEOUT_S + 60)
def test_every_checked_requirement_has_a_fault(clean_run: SuiteRun) -> None:
    """Each MUST requirement that a check cites is broken by at least one reference fault,
    so that every such check is shown able to fail (client duties aside: only the suite's
    own client can break those)."""
    assert clean_run.results is not None, clean_run.describe()
    entries = {r["id"]: r for r in clean_run.results["requirements"]}
    cited = {i for check in clean_run.results["checks"] for i in check["requirement_ids"]}
    faulted = {f.requirement_id for f in registry()}
    missing = [
        f"{i} ({entries[i]['heading']})"
        for i in sorted(cited)
        if entries[i]["level"] == "MUST"
        and entries[i].get("party") != "client"
        and i not in faulted
    ]
    assert not missing, (
        f"{len(missing)} MUST requirements cited by checks have no reference fault "
        "(add one to reference/faults.py):\n" + "\n".join(missing)
    )


@pytest.mark.slow
@pytest.mark.timeout(FULL_RUN_TIMEOUT_S + 60)
def test_preselection_keeps_exactly_the_modules_citing_each_id(clean_run: SuiteRun) -> None:
    """For every catalog id, the check modules a run restricted to it collects (read from
    their source, before import) are exactly those with a check citing it in the full
    run: none is left out, and none is imported for nothing, save the opaque ones (whose
    ids come from data) that every restricted run collects."""
    assert clean_run.results is not None, clean_run.describe()
    root = OWN_CHECKS.parent.parent
    cited_by: dict[Path, set[str]] = {}
    for check in clean_run.results["checks"]:
        module = root / check["nodeid"].split("::", 1)[0]
        cited_by.setdefault(module, set()).update(check["requirement_ids"])
    known = load_catalog().ids
    wrong: list[str] = []
    for module in sorted(OWN_CHECKS.glob("test_*.py")):
        citations = source_citations(module, known)
        possible, cited = citations.possible(known), cited_by.get(module, set())
        if cited - possible:
            wrong.append(f"{module.name}: left out for {sorted(cited - possible)}")
        if not citations.opaque and possible - cited:
            wrong.append(f"{module.name}: collected for nothing for {sorted(possible - cited)}")
    assert not wrong, "the preselection is not exact:\n" + "\n".join(wrong)


test_fault_is_caught = fault_is_caught_test(PART)
