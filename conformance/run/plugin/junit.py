"""``junit.xml`` that agrees with the verdicts.

pytest's JUnit writer knows pytest's outcomes only: a check that broke nothing but an
interpretation is a ``<failure>`` there, and CI dashboards would show a conformant run red.
Each check's teardown report carries its one verdict as a property
(:data:`~conformance.run.plugin.results.VERDICT_PROPERTY`); once the file is written, each
test case gets exactly the element its verdict calls for (``fail``: ``<failure>``,
``error``: ``<error>``, ``skip``: ``<skipped>``, ``pass`` and ``warn``: none), a warned
check keeps its reason in ``<system-out>``, and the suite-level counts are recounted from
the test cases, so they are the CLI's check counts.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

from conformance.run.plugin.results import VERDICT_PROPERTY, WARNING_PROPERTY

__all__ = ["settle_junit"]

#: The element a verdict calls for in a test case (none: a passing test case).
_ELEMENT = {"fail": "failure", "error": "error", "skip": "skipped"}
_OUTCOMES = ("failure", "error", "skipped")


def settle_junit(path: Path) -> None:
    """Rewrite *path* so each check's test case and the counts follow its verdict."""
    if not path.is_file():
        return
    tree = ET.parse(path)  # noqa: S314 (our own file, written by pytest moments ago)
    root = tree.getroot()
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    totals: Counter[str] = Counter()
    for suite in suites:
        for case in suite.iter("testcase"):
            _settle_case(case)
        tally = Counter(
            next((child.tag for child in case if child.tag in _OUTCOMES), "passed")
            for case in suite.iter("testcase")
        )
        suite.set("tests", str(sum(tally.values())))
        suite.set("failures", str(tally["failure"]))
        suite.set("errors", str(tally["error"]))
        suite.set("skipped", str(tally["skipped"]))
        totals += tally
    if root.tag == "testsuites":
        root.set("tests", str(sum(totals.values())))
        root.set("failures", str(totals["failure"]))
        root.set("errors", str(totals["error"]))
        root.set("skipped", str(totals["skipped"]))
    tree.write(path, encoding="utf-8", xml_declaration=True)


def _settle_case(case: ET.Element) -> None:
    properties = case.find("properties")
    found = {} if properties is None else {p.get("name"): p for p in properties}
    verdict_property = found.get(VERDICT_PROPERTY)
    if verdict_property is None:
        return  # not a check (or it never reached teardown): pytest's word stands
    verdict = verdict_property.get("value", "")
    wanted = _ELEMENT.get(verdict)
    outcomes = [child for child in case if child.tag in _OUTCOMES]
    kept = next((child for child in outcomes if child.tag == wanted), None)
    if kept is None and wanted is not None and outcomes:
        kept = outcomes[0]
        kept.tag = wanted
    moved = []
    for child in outcomes:
        if child is not kept:
            moved.append(_describe(child))
            case.remove(child)
    warning = found.get(WARNING_PROPERTY)
    if warning is not None and properties is not None:
        properties.remove(warning)
        moved.insert(
            0,
            f"WARN (an interpretation or an open choice: never a failure)\n"
            f"{warning.get('value', '')}",
        )
    if moved:
        out = case.find("system-out")
        if out is None:
            out = ET.SubElement(case, "system-out")
        out.text = "\n\n".join([*moved, *([out.text] if out.text else [])])


def _describe(element: ET.Element) -> str:
    message = element.get("message", "")
    text = element.text or ""
    return f"pytest {element.tag}: {message}\n{text}".rstrip()
