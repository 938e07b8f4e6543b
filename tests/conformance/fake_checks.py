"""Fake checks for the suite's own tests: the requirement ids a fake check may cite, the
``pytest.ini`` that makes a folder (for pytester) a folder of checks, and the result of a
check made up without running one."""

from __future__ import annotations

from typing import Any

from conformance.catalog import Level, Need, load_catalog
from conformance.verdicts import CheckResult, Outcome

__all__ = ["CATALOG", "INI", "INTERP", "MUST", "black_box", "check_result", "checks_module"]

CATALOG = load_catalog()


def black_box(level: Level) -> list[str]:
    """The ids of the catalog's requirements of *level* that need nothing beyond HTTP, in
    catalog order: a fake check citing one is judged without any capability to skip on."""
    return [r.id for r in CATALOG if r.level is level and set(r.needs) <= {Need.BLACK_BOX}]


MUST = black_box(Level.MUST)
INTERP = black_box(Level.INTERPRETATION)
#: The ini of a folder of fake checks: the plugin collects the folder as the checks.
INI = "[pytest]\ngenapi_checks = .\nfilterwarnings = error\n"


def checks_module(*checks: tuple[str, str, str]) -> str:
    """The source of a module of fake checks, one per ``(name, requirement id, body)``: the
    check ``name`` cites the requirement and runs the one-line ``body``."""
    cited = [
        f'\n@pytest.mark.requirement("{rid}")\ndef {name}():\n    {body}\n'
        for name, rid, body in checks
    ]
    return "\nimport pytest\n" + "".join(cited)


def check_result(
    nodeid: str,
    *requirement_ids: str,
    outcome: Outcome = Outcome.FAILED,
    duration: float = 0.1,
    **details: Any,
) -> CheckResult:
    """The result of the check *nodeid* citing *requirement_ids* (failed unless told);
    *details* are the other fields of :class:`CheckResult` (message, exchanges, ...)."""
    return CheckResult(
        nodeid=nodeid,
        requirement_ids=requirement_ids,
        outcome=outcome,
        duration=duration,
        **details,
    )
