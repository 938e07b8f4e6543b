"""What :mod:`conformance.run.plugin.preselect` reads from a check module's source.

That it keeps, for every catalog id, every check module pytest's collection finds citing it
is proven here against :mod:`conformance.run.check_index`; its exactness (no module kept
for nothing) against a full run in ``test_fault_matrix.py``.
"""

from __future__ import annotations

from pathlib import Path

from conformance.catalog import load_catalog
from conformance.run.check_index import checks_by_requirement
from conformance.run.plugin.citations import OWN_CHECKS
from conformance.run.plugin.preselect import may_cite, source_citations

KNOWN = ("AUTH-KEY-01", "TIER-FIELD-02", "TIER-FIELD-03", "URL-LOOP-01", "GEN-ID-01")


def _module(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "test_check.py"
    path.write_text(source, encoding="utf-8")
    return path


def test_literal_ids_anywhere_in_the_module_are_cited(tmp_path: Path) -> None:
    path = _module(
        tmp_path,
        '_IDS = {"scope": ("URL-LOOP-01",)}\n'
        '@pytest.mark.requirement("AUTH-KEY-01")\n'
        "def test_x(): ...\n"
        '"""GEN-ID-01 in prose is not a constant equal to an id."""\n',
    )
    citations = source_citations(path, KNOWN)
    assert not citations.opaque
    assert citations.possible(KNOWN) == {"AUTH-KEY-01", "URL-LOOP-01"}
    assert may_cite(citations, KNOWN, lambda i: i == "URL-LOOP-01")
    assert not may_cite(citations, KNOWN, lambda i: i == "GEN-ID-01")


def test_an_f_string_cites_every_id_its_head_starts(tmp_path: Path) -> None:
    path = _module(tmp_path, 'marks = [pytest.mark.requirement(f"TIER-FIELD-0{n}") for n in R]\n')
    citations = source_citations(path, KNOWN)
    assert citations.possible(KNOWN) == {"TIER-FIELD-02", "TIER-FIELD-03"}


def test_ids_computed_by_a_call_make_the_module_opaque(tmp_path: Path) -> None:
    path = _module(tmp_path, "marks = pytest.mark.requirement(*ids_of(vector))\n")
    citations = source_citations(path, KNOWN)
    assert citations.opaque
    assert may_cite(citations, KNOWN, lambda i: i == "GEN-ID-01")


def test_a_module_without_citations_is_never_kept(tmp_path: Path) -> None:
    citations = source_citations(_module(tmp_path, "def test_x(): ...\n"), KNOWN)
    assert not may_cite(citations, KNOWN, lambda i: True)


def test_preselection_keeps_every_module_the_check_index_collects_for_each_id() -> None:
    """For every catalog id, the check modules a run restricted to it imports (read from
    their source, :mod:`~conformance.run.plugin.preselect`) include every module with a
    check citing it in pytest's collection (:mod:`conformance.run.check_index`): the same
    modules, or more (the opaque ones, whose ids come from data)."""
    catalog = load_catalog()
    known = catalog.ids
    index = checks_by_requirement()
    modules = sorted(OWN_CHECKS.glob("test_*.py"))
    citations = {module.name: source_citations(module, known) for module in modules}
    left_out: list[str] = []
    for requirement_id in known:
        collected = {check.split("::", 1)[0] for check in index.get(requirement_id, ())}
        kept = {
            name
            for name, cites in citations.items()
            if may_cite(cites, known, lambda i, wanted=requirement_id: i == wanted)
        }
        left_out += [f"{requirement_id}: {name}" for name in sorted(collected - kept)]
    assert index and not left_out, "preselect leaves out modules that cite:\n" + "\n".join(left_out)
