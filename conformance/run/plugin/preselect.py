"""Which of the suite's check modules a run restricted by ``--only``/``--area`` must collect,
read from their source before any of them is imported.

Importing a check module costs its imports (Hypothesis, Schemathesis) and its collection;
a run of one requirement needs only the few modules that cite it. A module's citations
are read from its syntax tree:

* every string constant that is a catalog id (``@pytest.mark.requirement("ID")``, and the
  tables of ids that parametrized cases cite, such as ``{"scope": ("ID",)}``);
* an f-string inside ``requirement(...)`` cites the ids its constant head starts
  (``f"TIER-FIELD-0{n}"`` may cite every ``TIER-FIELD-0*``);
* a call inside ``requirement(...)`` (ids computed from data, e.g. a fixture file) makes
  the module *opaque*: it is always collected.

A module is kept when anything it may cite is in the run's scope, so nothing that cites
a selected id is left out: the collection that follows still selects checks by their
markers, as it does without this step. The project's tests prove, for every catalog id,
that the modules kept are exactly those whose checks a full collection selects (save the
opaque ones), so a citation this reading cannot see fails there, not here.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = ["SourceCitations", "may_cite", "source_citations"]

_MARK = "requirement"


@dataclass(frozen=True)
class SourceCitations:
    """What a check module's source says it may cite."""

    ids: frozenset[str]
    prefixes: tuple[str, ...]
    opaque: bool

    def possible(self, known: Iterable[str]) -> frozenset[str]:
        """The ids of *known* the module may cite (all of them when it is opaque)."""
        if self.opaque:
            return frozenset(known)
        return self.ids | {i for i in known if i.startswith(self.prefixes)}


def _is_requirement_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Attribute) and func.attr == _MARK) or (
        isinstance(func, ast.Name) and func.id == _MARK
    )


def _head(node: ast.JoinedStr) -> str:
    first = node.values[0] if node.values else None
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return ""


@cache
def _read(path: Path, mtime_ns: int, known: frozenset[str]) -> SourceCitations:
    tree = ast.parse(path.read_bytes(), filename=str(path))
    ids = frozenset(
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in known
    )
    prefixes: list[str] = []
    opaque = False
    for call in filter(_is_requirement_call, ast.walk(tree)):
        assert isinstance(call, ast.Call)
        for arg in call.args:
            for node in ast.walk(arg):
                if isinstance(node, ast.Call):
                    opaque = True
                elif isinstance(node, ast.JoinedStr):
                    head = _head(node)
                    # An f-string with no constant head may be any id.
                    opaque = opaque or not head
                    prefixes.append(head)
    return SourceCitations(ids, tuple(sorted(set(prefixes))), opaque)


def source_citations(path: Path, known: Iterable[str]) -> SourceCitations:
    """What the module at *path* may cite, of the ids in *known* (the catalog's)."""
    return _read(path, path.stat().st_mtime_ns, frozenset(known))


def may_cite(
    citations: SourceCitations, known: Iterable[str], wanted: Callable[[str], bool]
) -> bool:
    """Whether a module with *citations* may cite an id of *known* that *wanted* selects."""
    return citations.opaque or any(wanted(i) for i in citations.possible(known))
