"""Which checks cite which requirement, read from the check modules' source.

The index is built without importing or running a check: each ``conformance/checks/
test_*.py`` is parsed with :mod:`ast`, and a check (``module::test_function``) cites

* the ids of the module's ``pytestmark``,
* the ids of its own ``@pytest.mark.requirement("ID", ...)`` decorators,
* the ids in its ``@pytest.mark.parametrize(...)`` cases (``pytest.param(...,
  marks=pytest.mark.requirement(...))``), following the module-level names a decorator
  uses (a list of cases, a function that builds them, a table of ids) one level at a
  time, with every id-shaped string literal found there.

What the source does not spell (ids a case takes from a fixture file at collection, such
as the callback URL vectors, or builds from a table keyed by operation) this reading cannot
see. :func:`collected_checks_by_requirement` asks pytest instead: it collects the checks
(imports them, runs none, needs no profile) and reads each case's requirement marks, the
same ones the plugin reads at a run. It is exact and takes a few seconds.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

__all__ = [
    "CHECKS_DIR",
    "CollectError",
    "checks_by_requirement",
    "collected_checks_by_requirement",
    "module_citations",
]

CHECKS_DIR = Path(__file__).resolve().parent.parent / "checks"
#: A catalog id: AREA-TOPIC-NN.
_ID = re.compile(r"^[A-Z]+(?:-[A-Z0-9]+)+-\d{2}$")
#: How many module-level names deep a decorator's cases are followed.
_FOLLOW_DEPTH = 4


def _called(node: ast.AST) -> str:
    if not isinstance(node, ast.Call):
        return ""
    return str(getattr(node.func, "attr", getattr(node.func, "id", "")))


def _literal_ids(node: ast.AST) -> set[str]:
    return {
        n.value
        for n in ast.walk(node)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and _ID.match(n.value)
    }


def _marked_ids(node: ast.AST) -> set[str]:
    """The literal ids of every ``….requirement("ID", ...)`` call inside *node*."""
    return {
        arg.value
        for call in ast.walk(node)
        if _called(call) == "requirement"
        for arg in call.args  # type: ignore[attr-defined]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
    }


def _followed_ids(nodes: Iterable[ast.AST], definitions: Mapping[str, ast.AST]) -> set[str]:
    """Id literals reachable from *nodes* through the module-level names they use."""
    found: set[str] = set()
    seen: set[str] = set()
    frontier = list(nodes)
    for _ in range(_FOLLOW_DEPTH):
        found |= {i for node in frontier for i in _literal_ids(node)}
        names = {
            n.id
            for node in frontier
            for n in ast.walk(node)
            if isinstance(n, ast.Name) and n.id in definitions and n.id not in seen
        }
        seen |= names
        frontier = [definitions[name] for name in sorted(names)]
        if not frontier:
            break
    return found


def module_citations(module: str, source: str) -> dict[str, frozenset[str]]:
    """The ids each check of one module's *source* cites, by ``module::function``."""
    tree = ast.parse(source)
    definitions: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            definitions |= {t.id: node.value for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            if isinstance(node.target, ast.Name):
                definitions[node.target.id] = node.value
        elif isinstance(node, ast.FunctionDef) and not node.name.startswith("test_"):
            definitions[node.name] = node
    module_ids = _marked_ids(definitions["pytestmark"]) if "pytestmark" in definitions else set()
    citations: dict[str, frozenset[str]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
            continue
        marked = [d for d in node.decorator_list if _called(d) == "requirement"]
        cases = [d for d in node.decorator_list if _called(d) == "parametrize"]
        ids = module_ids | {i for d in marked for i in _marked_ids(d)}
        ids |= _followed_ids(cases, definitions)
        citations[f"{module}::{node.name}"] = frozenset(ids)
    return citations


def checks_by_requirement(checks_dir: Path = CHECKS_DIR) -> dict[str, tuple[str, ...]]:
    """Requirement id → the checks (``test_module.py::test_function``) that cite it."""
    index: dict[str, list[str]] = {}
    for path in sorted(checks_dir.glob("test_*.py")):
        for check, ids in module_citations(path.name, path.read_text(encoding="utf-8")).items():
            for requirement_id in ids:
                index.setdefault(requirement_id, []).append(check)
    return {rid: tuple(checks) for rid, checks in sorted(index.items())}


class CollectError(RuntimeError):
    """pytest could not collect the checks (its output says why)."""


class _Citations:
    """A pytest plugin that notes each collected check's requirement marks."""

    def __init__(self) -> None:
        self.index: dict[str, list[str]] = {}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            # A parametrized check counts once per function, as in the static index.
            check = item.nodeid.split("[", 1)[0].rsplit("/", 1)[-1]
            for mark in item.iter_markers("requirement"):
                for requirement_id in mark.args:
                    checks = self.index.setdefault(str(requirement_id), [])
                    if check not in checks:
                        checks.append(check)


def collected_checks_by_requirement() -> dict[str, tuple[str, ...]]:
    """Requirement id → checks, from pytest's collection of the checks (none runs)."""
    citations = _Citations()
    output = io.StringIO()
    args = [
        "--pyargs",
        "conformance.checks",
        "-c",
        str(CHECKS_DIR / "pytest.ini"),
        "--rootdir",
        str(CHECKS_DIR.parent.parent),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "--collect-only",
        "-q",
    ]
    with contextlib.redirect_stdout(output):
        code = pytest.main(args, plugins=[citations])
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        raise CollectError(
            f"collecting the checks failed (pytest exit {int(code)}):\n" + output.getvalue()[-2000:]
        )
    return {rid: tuple(sorted(checks)) for rid, checks in sorted(citations.index.items())}
