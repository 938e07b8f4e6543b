"""Checks name only the requirement ids they cite ("one id, one rule").

A failure message or a finding that names an id the check does not cite would blame a
rule the check never claimed to verify (and, through :mod:`conformance.findings`, turns a
verdict into a harness error). This reads the check modules' source:

* a rule given as a literal to a judging helper (or ``fail``, ``warn``, ``measure``,
  ``judge_timing``, any ``rule=``) is exactly one id the enclosing check cites (a helper
  function's: one its module cites), and not the only id the check cites (no rule means
  every cited id) unless the helper needs it (``measure``, ``judge_timing``: the bands);
* every id-shaped string in a test function is one the check cites, its docstring and
  skip reasons aside.

A check cites through its ``@pytest.mark.requirement``, the module's ``pytestmark`` and
the requirement marks of its parametrized cases (``pytest.param(..., marks=...)``, in the
decorator or in the module-level list it names).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import conformance
from conformance.catalog import load_catalog

CHECKS = Path(conformance.__file__).parent / "checks"
#: Calls whose strings may name other rules: a skip or a set-up error says which rule
#: reports the cause; it is not a finding about the implementation.
_EXEMPT_CALLS = frozenset({"skip", "xfail", "importorskip", "SetupFailed"})
ID = re.compile(r"\b[A-Z]+-[A-Z0-9]+-\d{2}\b")
#: Where a judging helper takes its rule positionally (any call may name it ``rule=``).
_RULE_POSITION = {
    "assert_status": 2,
    "assert_status_in": 2,
    "assert_webhook_list": 2,
    "assert_delivery_list": 1,
    "measure": 0,
    "judge_timing": 0,
}
#: Helpers that need their rule even where it is the only one cited (its timing bands).
_RULE_REQUIRED = frozenset({"measure", "judge_timing"})


def _called(node: ast.AST) -> str:
    """The name a call calls (``fail``, ``pytest.skip`` -> ``skip``); "" if no call."""
    if not isinstance(node, ast.Call):
        return ""
    return str(getattr(node.func, "attr", getattr(node.func, "id", "")))


def _requirement_ids(nodes: Iterable[ast.AST]) -> frozenset[str]:
    """The ids of every ``….requirement("ID", …)`` call inside *nodes*."""
    found: set[str] = set()
    for node in nodes:
        for call in ast.walk(node):
            if isinstance(call, ast.Call) and _called(call) == "requirement":
                found |= {
                    a.value
                    for a in call.args
                    if isinstance(a, ast.Constant) and isinstance(a.value, str)
                }
    return frozenset(found)


@dataclass(frozen=True)
class Check:
    """A test function and the ids it cites: for every case (``fixed``), or in some of its
    parametrized cases (``by_case``)."""

    node: ast.FunctionDef
    fixed: frozenset[str]
    by_case: frozenset[str]

    @property
    def cited(self) -> frozenset[str]:
        return self.fixed | self.by_case


@dataclass(frozen=True)
class Module:
    name: str
    tree: ast.Module
    checks: dict[str, Check]
    #: Every id cited anywhere in the module: a helper serves the module's checks.
    cited: frozenset[str]


def read_module(name: str, source: str) -> Module:
    tree = ast.parse(source)
    assigned: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            assigned |= {t.id: node.value for t in targets if isinstance(t, ast.Name)}
    module_ids = _requirement_ids([assigned["pytestmark"]] if "pytestmark" in assigned else [])
    checks: dict[str, Check] = {}
    for node in tree.body:
        if not (isinstance(node, ast.FunctionDef) and node.name.startswith("test_")):
            continue
        marked = [d for d in node.decorator_list if _called(d) == "requirement"]
        cases = [d for d in node.decorator_list if _called(d) == "parametrize"]
        named = [
            assigned[n.id]
            for case in cases
            for n in ast.walk(case)
            if isinstance(n, ast.Name) and n.id in assigned
        ]
        checks[node.name] = Check(
            node, module_ids | _requirement_ids(marked), _requirement_ids(cases + named)
        )
    return Module(name, tree, checks, _requirement_ids([tree]))


def _modules() -> list[Module]:
    return [
        read_module(path.name, path.read_text(encoding="utf-8"))
        for path in sorted(CHECKS.glob("test_*.py"))
    ]


def _rules_given(call: ast.Call) -> list[ast.expr]:
    given = [k.value for k in call.keywords if k.arg == "rule"]
    position = _RULE_POSITION.get(_called(call))
    if position is not None and len(call.args) > position:
        given.append(call.args[position])
    return given


def rule_offences(modules: Iterable[Module]) -> Iterator[str]:
    for module in modules:
        for top in module.tree.body:
            check = module.checks.get(getattr(top, "name", ""))
            for call in ast.walk(top):
                if not isinstance(call, ast.Call):
                    continue
                for rule in _rules_given(call):
                    where = f"{module.name}:{call.lineno} {_called(call)}"
                    if isinstance(rule, ast.JoinedStr):
                        yield f"{where} is given a composed rule (context goes in the message)"
                    if not (isinstance(rule, ast.Constant) and isinstance(rule.value, str)):
                        continue  # a variable: checked at run time (conformance.findings)
                    named = rule.value
                    if not ID.fullmatch(named):
                        yield f"{where} is given {named!r}, which is not one id"
                    elif check is None:
                        if named not in module.cited:
                            yield f"{where} names {named}, which no check here cites"
                    elif named not in check.cited:
                        yield f"{where} names {named}, which {check.node.name} does not cite"
                    elif check.cited == {named} and _called(call) not in _RULE_REQUIRED:
                        yield f"{where} names {named}, the one id {check.node.name} cites"


def message_offences(modules: Iterable[Module]) -> Iterator[str]:
    for module in modules:
        for check in module.checks.values():
            node = check.node
            exempt: set[int] = set()
            if ast.get_docstring(node):
                exempt |= {id(n) for n in ast.walk(node.body[0])}
            for inner in ast.walk(node):
                if _called(inner) in _EXEMPT_CALLS or _called(inner) == "parametrize":
                    exempt |= {id(n) for n in ast.walk(inner)}
            for inner in ast.walk(node):
                if id(inner) in exempt:
                    continue
                if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                    for named in ID.findall(inner.value):
                        if named not in check.cited:
                            yield f"{module.name}:{inner.lineno} {node.name} names {named}"


def test_rules_given_to_the_judging_helpers_are_single_cited_ids() -> None:
    """A rule argument is exactly one id the check cites, and only where it cites several
    (no rule means every cited id): anything else would make a failure a harness error
    instead of a verdict, or blame a rule the check does not verify."""
    offences = list(rule_offences(_modules()))
    assert not offences, "\n".join(offences)


def test_no_check_cites_a_requirement_the_catalog_calls_unobservable() -> None:
    """A rule the catalog says no black-box check can observe (``observable: false``) is
    cited by no check: either the catalog or the check would be wrong."""
    unobservable = {r.id for r in load_catalog().unobservable()}
    assert unobservable, "the catalog lists KEY-HASH-01 as unobservable"
    cited = {(m.name, i) for m in _modules() for i in m.cited if i in unobservable}
    assert not cited, f"checks cite requirements the catalog calls unobservable: {cited}"


def test_checks_name_only_the_ids_they_cite() -> None:
    offences = list(message_offences(_modules()))
    assert not offences, "\n".join(offences)


EXAMPLE = '''
import pytest

CASES = [pytest.param(1, marks=pytest.mark.requirement("AA-BB-05"))]

@pytest.mark.requirement("AA-BB-01", "AA-BB-02")
def test_a(response):
    """Mentions AA-ZZ-09 in passing."""
    assert_status(response, 200, "AA-BB-01 (set-up)")
    fail("expected", rule="AA-CC-03")
    assert_refused(response, "why", rule="AA-BB-02")
    pytest.skip("AA-ZZ-08 reports the cause")
    assert False, "AA-ZZ-07: not cited"

@pytest.mark.requirement("AA-BB-04")
def test_b(response):
    assert_status(response, 404, "AA-BB-04")
    judge_timing("AA-BB-04", 1.0, profile)
    warn(f"AA-BB-04 {response}", rule=f"AA-BB-04 ({response})")

@pytest.mark.parametrize("case", CASES)
def test_c(response, case):
    assert_status(response, 404, "AA-BB-05")
    assert False, "AA-BB-05 and AA-BB-01"

def _helper(response):
    fail("x", rule="AA-BB-02")
    fail("y", rule="AA-ZZ-06")
'''


def test_the_reading_finds_each_kind_of_offence() -> None:
    """The reading itself: a rule that is not one id, composed, not cited or redundant,
    and an uncited id in a message are found; docstrings, skip reasons, cited ids and the
    ids of parametrized cases are not."""
    module = read_module("test_example.py", EXAMPLE)
    assert module.checks["test_c"].cited == {"AA-BB-05"}
    assert [line.split(" ", 1)[1] for line in rule_offences([module])] == [
        "assert_status is given 'AA-BB-01 (set-up)', which is not one id",
        "fail names AA-CC-03, which test_a does not cite",
        "assert_status names AA-BB-04, the one id test_b cites",
        "warn is given a composed rule (context goes in the message)",
        "assert_status names AA-BB-05, the one id test_c cites",
        "fail names AA-ZZ-06, which no check here cites",
    ]
    assert sorted(line.split(" ", 1)[1] for line in message_offences([module])) == [
        "test_a names AA-CC-03",
        "test_a names AA-ZZ-07",
        "test_c names AA-BB-01",
    ]
