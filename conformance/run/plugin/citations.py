"""Citations: which requirements a check verifies, checked at collection.

A check cites catalog ids with ``@pytest.mark.requirement("ID", ...)``. A check that cites
an unknown id, or none (a test under ``conformance/checks`` or a folder named by the
``genapi_checks`` ini option), is a collection error of its module. Each check's ids are
noted (:data:`REQUIREMENTS_KEY`), its area markers added, and ``--only``/``--area`` applied.
A run restricted by them does not even import the suite's check modules that cannot cite
anything in its scope (:mod:`.preselect`).
"""

from __future__ import annotations

from collections.abc import Collection, Generator, Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest

from conformance.catalog import Catalog, Requirement
from conformance.run.plugin.preselect import may_cite, source_citations
from conformance.run.plugin.state import RUN_KEY, RunState

__all__ = [
    "OWN_CHECKS",
    "REQUIREMENTS_KEY",
    "WORKER_DESELECTED",
    "WORKER_MAP",
    "cited",
    "collected_modules",
    "in_scope",
]

#: The requirement ids a test cites (set at collection).
REQUIREMENTS_KEY = pytest.StashKey[tuple[str, ...]]()
#: xdist worker output: the ids of every check by node id, and the deselected node ids.
WORKER_MAP = "genapi_requirements_by_nodeid"
WORKER_DESELECTED = "genapi_deselected"


#: The suite's own checks (those :mod:`.preselect` reads before importing).
OWN_CHECKS = Path(__file__).resolve().parent.parent.parent / "checks"


def _checks_dirs(config: pytest.Config) -> list[Path]:
    return [OWN_CHECKS, *(Path(p).resolve() for p in config.getini("genapi_checks"))]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """In a run restricted by --only/--area, skip the suite's check modules that cannot
    cite a requirement in its scope, before importing them (None: pytest decides)."""
    if collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    state = config.stash.get(RUN_KEY, None)
    if state is None or not (state.only or state.areas):
        return None
    if collection_path.resolve().parent != OWN_CHECKS:
        return None
    if _may_collect(collection_path, state.catalog, state.only, state.areas):
        return None
    return True


def _may_collect(
    module: Path, catalog: Catalog, only: Collection[str], areas: Collection[str]
) -> bool:
    citations = source_citations(module, catalog.ids)
    return may_cite(citations, catalog.ids, lambda i: _within(only, areas, catalog[i]))


def collected_modules(
    catalog: Catalog, only: Collection[str], areas: Collection[str]
) -> list[Path]:
    """The suite's own check modules that a run restricted by ``only``/``areas`` collects
    (every one when neither restricts it), read from their source as the run does."""
    return [
        module
        for module in sorted(OWN_CHECKS.glob("test_*.py"))
        if _may_collect(module, catalog, only, areas)
    ]


def _is_check(item: pytest.Item, dirs: Sequence[Path]) -> bool:
    path = item.path.resolve()
    return any(path.is_relative_to(d) for d in dirs)


def cited(item: pytest.Item) -> tuple[list[str], list[str]]:
    """The requirement ids a test cites, and problems with how it cites them."""
    ids: list[str] = []
    problems: list[str] = []
    for mark in item.iter_markers("requirement"):
        if not mark.args:
            problems.append("@pytest.mark.requirement() names no id")
        for arg in mark.args:
            if isinstance(arg, str) and arg:
                if arg not in ids:
                    ids.append(arg)
            else:
                problems.append(f"requirement ids are strings, got {arg!r}")
    return ids, problems


def _citation_problems(item: pytest.Item, state: RunState, dirs: Sequence[Path]) -> list[str]:
    """What is wrong with how *item* cites requirements (nothing for ordinary tests)."""
    ids, problems = cited(item)
    if not ids and not problems and not _is_check(item, dirs):
        return []
    if not ids and not problems:
        problems.append(
            'cites no requirement: add @pytest.mark.requirement("<ID>", ...) '
            "with the catalog ids it verifies"
        )
    unknown = state.catalog.unknown(ids)
    if unknown:
        problems.append(
            f"cites unknown requirement ids {', '.join(unknown)} "
            "(see conformance/requirements.yaml)"
        )
    return problems


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """A check that cites requirements wrongly is a collection error of its module.

    A collection error (not a usage error) is what pytest-xdist carries from a worker and
    shows by module; the run stops before any check runs ("Interrupted: errors during
    collection").
    """
    report = yield
    if not report.passed:
        return report
    items = [node for node in report.result if isinstance(node, pytest.Item)]
    if not items:
        return report
    state = collector.config.stash[RUN_KEY]
    dirs = _checks_dirs(collector.config)
    problems = [
        f"{item.nodeid}: {problem}"
        for item in items
        for problem in _citation_problems(item, state, dirs)
    ]
    if problems:
        report.outcome = "failed"
        report.longrepr = "conformance checks cite requirements wrongly:\n" + "\n".join(
            f"  {problem}" for problem in problems
        )
        report.result = []
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Note every check's requirement ids, mark its area, apply --only and --area.

    tryfirst: this sees every item, also those that ``-k``/``-m`` deselect later.
    """
    state = config.stash[RUN_KEY]
    for item in items:
        ids, _ = cited(item)
        if not ids:
            continue
        catalog = state.catalog
        item.stash[REQUIREMENTS_KEY] = tuple(ids)
        state.requirements_by_nodeid[item.nodeid] = tuple(ids)
        for requirement_id in ids:
            item.user_properties.append(("requirement", requirement_id))
        for area in sorted({catalog[i].area for i in ids}):
            item.add_marker(pytest.mark.area(area))
    if state.only or state.areas:
        keep, drop = [], []
        for item in items:
            ids_of_item: tuple[str, ...] = item.stash.get(REQUIREMENTS_KEY, ())
            if _selected(state, ids_of_item):
                keep.append(item)
            else:
                drop.append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
    workeroutput: dict[str, Any] | None = getattr(config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[WORKER_MAP] = {k: list(v) for k, v in state.requirements_by_nodeid.items()}


def _within(only: Collection[str], areas: Collection[str], requirement: Requirement) -> bool:
    """Whether --only (*only*) and --area (*areas*) put *requirement* in a run's scope
    (all when neither is given)."""
    if not only and not areas:
        return True
    return requirement.id in only or requirement.area in areas


def in_scope(state: RunState, requirement: Requirement) -> bool:
    """Whether --only/--area put *requirement* in this run's scope (all when neither)."""
    return _within(state.only, state.areas, requirement)


def _selected(state: RunState, ids: Iterable[str]) -> bool:
    catalog = state.catalog
    return any(in_scope(state, catalog[i]) for i in ids)


def pytest_deselected(items: Sequence[pytest.Item]) -> None:
    for item in items:
        if REQUIREMENTS_KEY in item.stash:
            state = item.config.stash[RUN_KEY]
            state.deselected.add(item.nodeid)
            workeroutput: dict[str, Any] | None = getattr(item.config, "workeroutput", None)
            if workeroutput is not None:
                workeroutput[WORKER_DESELECTED] = sorted(state.deselected)
