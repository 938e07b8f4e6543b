"""Checks name only the requirement ids their marker cites ("one id, one rule").

A failure message or a finding that names an id the check does not cite would blame a
rule the check never claimed to verify (and, through :mod:`conformance.findings`, turns a
verdict into a harness error). This reads the check modules' source: every id-shaped
string in a test function must be one its ``@pytest.mark.requirement`` (or the module's
``pytestmark``) cites.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import conformance

CHECKS = Path(conformance.__file__).parent / "checks"
#: Calls whose strings may name other rules: a skip or a set-up error says which rule
#: reports the cause; it is not a finding about the implementation.
_EXEMPT_CALLS = frozenset({"skip", "xfail", "importorskip", "SetupFailed"})
ID = re.compile(r"\b[A-Z]+-[A-Z0-9]+-\d{2}\b")


def _marker_ids(decorators: list[ast.expr]) -> set[str]:
    ids: set[str] = set()
    for decorator in decorators:
        for node in ast.walk(decorator):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "requirement"
            ):
                ids |= {a.value for a in node.args if isinstance(a, ast.Constant)}
    return ids


def _module_ids(tree: ast.Module) -> set[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets
        ):
            return _marker_ids([node.value])
    return set()


def _offences() -> Iterator[str]:
    for path in sorted(CHECKS.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module_ids = _module_ids(tree)
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test_"):
                continue
            cited = module_ids | _marker_ids(node.decorator_list)
            if not cited:
                continue  # cited through parametrize marks: checked at run time
            exempt: set[int] = set()
            if ast.get_docstring(node):
                exempt |= {id(n) for n in ast.walk(node.body[0])}
            for inner in ast.walk(node):
                called = (
                    getattr(inner.func, "attr", getattr(inner.func, "id", ""))
                    if isinstance(inner, ast.Call)
                    else ""
                )
                if called in _EXEMPT_CALLS:
                    exempt |= {id(n) for n in ast.walk(inner)}
            for inner in ast.walk(node):
                if id(inner) in exempt:
                    continue
                if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                    for named in ID.findall(inner.value):
                        if named not in cited:
                            yield f"{path.name}:{inner.lineno} {node.name} names {named}"


def test_checks_name_only_the_ids_they_cite() -> None:
    offences = list(_offences())
    assert not offences, "\n".join(offences)


#: Where each judging helper takes its rule: (positional index, keyword).
_RULE_ARGUMENT = {
    "assert_status": 2,
    "assert_status_in": 2,
    "assert_refused": 1,
    "assert_not_refused_for_auth": 1,
    "assert_webhook_list": 2,
    "assert_delivery_list": 1,
    "measure": 0,
    "judge_timing": 0,
}


def _rule_offences() -> Iterator[str]:
    for path in sorted(CHECKS.glob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for call in ast.walk(tree):
            if not isinstance(call, ast.Call):
                continue
            name = getattr(call.func, "attr", getattr(call.func, "id", ""))
            given = [k.value for k in call.keywords if k.arg == "rule"]
            index = _RULE_ARGUMENT.get(name)
            if index is not None and len(call.args) > index:
                given.append(call.args[index])
            for rule in given:
                if isinstance(rule, ast.JoinedStr) or (
                    isinstance(rule, ast.Constant)
                    and isinstance(rule.value, str)
                    and not ID.fullmatch(rule.value)
                ):
                    yield f"{path.name}:{call.lineno} {name} is given a rule that is not one id"


def test_rules_given_to_the_judging_helpers_are_single_ids() -> None:
    """A rule argument is exactly one id (context belongs in the message): anything else
    would make a failure a harness error instead of a verdict."""
    offences = list(_rule_offences())
    assert not offences, "\n".join(offences)
