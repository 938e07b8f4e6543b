"""Which checks cite which requirement, from pytest's collection of the checks.

The checks are collected (imported, none of them run, no target contacted) and each
case's ``@pytest.mark.requirement`` marks are read: the same marks the plugin reads at a
run, so ids a case takes from a fixture file (the callback URL vectors) or builds from a
table are seen too. A parametrized check counts once per function. Some cases depend on
the profile (the scope matrix has one case per key the profile holds): collect with the
profile to see them (without one, such a check's one skipped case cites every id it
would check, so the ids count as checked here).

(Restricted runs read the check modules' source instead, to import fewer of them:
:mod:`conformance.run.plugin.preselect`; that reading over-approximates by module, fine
for choosing what to import, not for telling whether a requirement is checked.)
"""

from __future__ import annotations

import contextlib
import io
from functools import cache
from pathlib import Path

import pytest

__all__ = ["CHECKS_DIR", "CollectError", "checks_by_requirement", "checks_pytest_args"]

CHECKS_DIR = Path(__file__).resolve().parent.parent / "checks"


def checks_pytest_args() -> list[str]:
    """The start of every pytest command line that collects the checks: the installed
    package's checks with the suite's own settings, whatever pytest configuration the
    current folder has, and no cache written into it."""
    return [
        "--pyargs",
        "conformance.checks",
        "-c",
        str(CHECKS_DIR / "pytest.ini"),
        "--rootdir",
        str(CHECKS_DIR.parent.parent),
        "-p",
        "no:cacheprovider",
    ]


class CollectError(RuntimeError):
    """pytest could not collect the checks (its output says why)."""


class _Citations:
    """A pytest plugin that notes each collected check's requirement marks."""

    def __init__(self) -> None:
        self.index: dict[str, list[str]] = {}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            # A parametrized check counts once per function: its cases share its name.
            check = item.nodeid.split("[", 1)[0].rsplit("/", 1)[-1]
            for mark in item.iter_markers("requirement"):
                for requirement_id in mark.args:
                    checks = self.index.setdefault(str(requirement_id), [])
                    if check not in checks:
                        checks.append(check)


@cache
def checks_by_requirement(profile: Path | None = None) -> dict[str, tuple[str, ...]]:
    """Requirement id → the checks (``test_module.py::test_function``) citing it, from
    pytest's collection (none runs), with *profile* for its profile-dependent cases."""
    citations = _Citations()
    output = io.StringIO()
    args = [*checks_pytest_args(), "-p", "no:xdist", "--collect-only", "-q"]
    if profile is not None:
        args += ["--profile", str(profile)]
    with contextlib.redirect_stdout(output):
        code = pytest.main(args, plugins=[citations])
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        raise CollectError(
            f"collecting the checks failed (pytest exit {int(code)}):\n" + output.getvalue()[-2000:]
        )
    return {rid: tuple(sorted(checks)) for rid, checks in sorted(citations.index.items())}
