"""The suite's pytest plugin (registered through the ``pytest11`` entry point).

What it adds to pytest:

* options ``--profile PATH`` (or ``GENAPI_PROFILE``), ``--report-dir DIR``, and the
  selections ``--only ID`` and ``--area AREA`` (both repeatable);
* the marker ``@pytest.mark.requirement("ID", ...)``: collection fails on an id the
  catalog does not know, and on a check (a test under ``conformance/checks`` or a folder
  named by the ``genapi_checks`` ini option) that cites none; the ``area`` marker, added
  to each check from its requirements; the ``needs`` markers (``sandbox``, ``dns``,
  ``console``, ``destructive``, ``slow``), each described;
* verdicts: each check's outcome becomes a :class:`~conformance.verdicts.CheckResult`
  (redacted, with the check's recorded exchanges), carried to the controller under
  pytest-xdist as a report attribute, and judged per requirement at the end of the run;
* reports in ``--report-dir`` (default ``reports/<UTC timestamp>/``): ``results.json`` and
  ``report.html``; with ``--report-dir`` or a profile given, also ``junit.xml`` (the
  requirement ids are properties of each test case) and ``allure-results/`` (feature =
  area, story = requirement id, a link to the spec section);
* the exit status ignores warnings: a failed check of an ``INTERPRETATION`` never fails
  the run (DESIGN.md, requirements catalog).

Outside a conformance run (the project's own tests) it stays out of the way: tests that
cite no requirement and live outside the checks folders are not touched.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Generator, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import conformance
import genapi_spec
from conformance import findings
from conformance.catalog import Catalog, Requirement, load_catalog
from conformance.client import EXCHANGES_KEY
from conformance.evidence import Exchange
from conformance.profile import CapabilityMissing, Profile, ProfileError, load_profile
from conformance.reports import RunInfo, new_report_dir, redact_tree, write_reports
from conformance.secrets import Redactor
from conformance.verdicts import (
    CheckResult,
    Outcome,
    RunVerdicts,
    Verdict,
    check_verdict,
    judge,
    trim_exchanges,
)

__all__ = [
    "CHECK_RESULT_KEY",
    "NEEDS_MARKERS",
    "REQUIREMENTS_KEY",
    "RUN_KEY",
    "RunState",
    "is_warning",
    "profile_path",
]

#: SUITE-CORE's fixtures, one concern per module.
pytest_plugins = [
    "conformance.fixtures.profile",
    "conformance.fixtures.client",
    "conformance.fixtures.receiver",
]

#: Capabilities a check may need; a profile that lacks one makes the check skip.
NEEDS_MARKERS: dict[str, str] = {
    "sandbox": "needs the sandbox contract ([sandbox]: prompts that make a generation fail "
    "or be cancelled)",
    "dns": "needs controllable DNS ([dns] in the profile); skipped without it",
    "console": "needs console sessions ([sessions.*] in the profile)",
    "destructive": "spends limited resources (the daily credit cap, keys up to the limit); "
    "runs only with [budgets] destructive = true",
    "slow": "takes more than a few seconds (timing-bound delivery chains)",
}

#: The requirement ids a test cites (set at collection).
REQUIREMENTS_KEY = pytest.StashKey[tuple[str, ...]]()


@dataclass(frozen=True)
class _Phase:
    """What one phase (setup, call, teardown) of a check gave."""

    when: str
    outcome: Outcome
    message: str
    longrepr: str
    duration: float


#: The phases of a check so far.
_PHASES_KEY = pytest.StashKey[list[_Phase]]()
#: The rules a check's failure broke (set when its call fails).
_BROKEN_KEY = pytest.StashKey[tuple[str, ...]]()
#: The per-test verdict data, complete after teardown.
CHECK_RESULT_KEY = pytest.StashKey[CheckResult]()

_CHECK_ATTR = "genapi_check"  # report attribute that carries a CheckResult (as a dict)
_IDS_ATTR = "genapi_requirements"  # report attribute: the ids a check's report is about
_WARN_ATTR = "genapi_warn"  # report attribute: this failure only breaks interpretations
_WORKER_REPORT_DIR = "genapi_report_dir"
_WORKER_MAP = "genapi_requirements_by_nodeid"
_WORKER_DESELECTED = "genapi_deselected"

#: Exceptions that mean "the implementation did not do what the check asserts"; any other
#: exception in a check is the harness breaking (a verdict of error, not fail).
_FAILURES: tuple[type[BaseException], ...] = (
    AssertionError,
    TimeoutError,
    pytest.fail.Exception,
)


@dataclass
class RunState:
    """Everything the plugin keeps for one pytest session (``config.stash[RUN_KEY]``)."""

    report_dir: Path
    explicit: bool
    profile: Profile | None
    redactor: Redactor
    is_worker: bool
    only: tuple[str, ...]
    areas: tuple[str, ...]
    catalog: Catalog | None = None
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    results: dict[str, CheckResult] = field(default_factory=dict)
    requirements_by_nodeid: dict[str, tuple[str, ...]] = field(default_factory=dict)
    deselected: set[str] = field(default_factory=set)
    crashed: dict[str, str] = field(default_factory=dict)
    other_failures: int = 0
    verdicts: RunVerdicts | None = None
    written: list[Path] = field(default_factory=list)

    def get_catalog(self) -> Catalog:
        if self.catalog is None:
            self.catalog = load_catalog()
        return self.catalog


RUN_KEY = pytest.StashKey[RunState]()


def profile_path(config: pytest.Config) -> Path | None:
    """The profile this run targets: ``--profile``, else ``GENAPI_PROFILE``, else none."""
    value = config.getoption("genapi_profile") or os.environ.get("GENAPI_PROFILE")
    return Path(value) if value else None


# -- options and markers ---------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("genapi-conformance", "Generation API conformance suite")
    group.addoption(
        "--profile",
        dest="genapi_profile",
        metavar="PATH",
        default=None,
        help="target profile (TOML) of the implementation under test; default: $GENAPI_PROFILE",
    )
    group.addoption(
        "--report-dir",
        dest="genapi_report_dir",
        metavar="DIR",
        default=None,
        help="where the reports go; default: reports/<UTC timestamp>/",
    )
    group.addoption(
        "--only",
        dest="genapi_only",
        metavar="ID",
        action="append",
        default=[],
        help="run only the checks of this requirement id (repeatable)",
    )
    group.addoption(
        "--area",
        dest="genapi_area",
        metavar="AREA",
        action="append",
        default=[],
        help="run only the checks of requirements in this area (repeatable)",
    )
    parser.addini(
        "genapi_checks",
        type="paths",
        default=[],
        help="further folders whose tests are conformance checks (must cite a requirement)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "requirement(*ids): the catalog requirement ids this check verifies "
        "(conformance/requirements.yaml); unknown ids fail collection",
    )
    config.addinivalue_line(
        "markers", "area(name): the spec area of a check (added from its requirements)"
    )
    for name, description in NEEDS_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {description}")

    path = profile_path(config)
    profile: Profile | None = None
    if path is not None:
        try:
            profile = load_profile(path)
        except ProfileError as error:
            raise pytest.UsageError(str(error)) from None
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    explicit_dir = config.getoption("genapi_report_dir")
    if workerinput is not None and workerinput.get(_WORKER_REPORT_DIR):
        report_dir = Path(workerinput[_WORKER_REPORT_DIR])
    elif explicit_dir:
        report_dir = Path(explicit_dir).resolve()
    else:
        report_dir = new_report_dir()
    state = RunState(
        report_dir=report_dir,
        explicit=bool(explicit_dir) or profile is not None,
        profile=profile,
        redactor=profile.redactor() if profile is not None else Redactor(),
        is_worker=workerinput is not None,
        only=tuple(config.getoption("genapi_only")),
        areas=tuple(config.getoption("genapi_area")),
    )
    config.stash[RUN_KEY] = state
    if state.only:
        unknown_only = state.get_catalog().unknown(state.only)
        if unknown_only:
            raise pytest.UsageError(
                f"--only names unknown requirement ids: {', '.join(unknown_only)}"
            )
    if state.areas:
        unknown_areas = [a for a in state.areas if a not in state.get_catalog().areas]
        if unknown_areas:
            raise pytest.UsageError(
                f"--area names unknown areas: {', '.join(unknown_areas)} "
                f"(known: {', '.join(state.get_catalog().areas)})"
            )
    if not state.is_worker:
        config.pluginmanager.register(_RunHooks(config, state), "genapi-conformance-run")
    if state.explicit:
        # JUnit and Allure join the run's folder unless asked elsewhere. They must be set
        # before their plugins' own pytest_configure (hence tryfirst).
        if not config.option.xmlpath and not state.is_worker:
            config.option.xmlpath = str(report_dir / "junit.xml")
        if hasattr(config.option, "allure_report_dir") and not config.option.allure_report_dir:
            config.option.allure_report_dir = str(report_dir / "allure-results")
        if not state.is_worker:
            # Registered first, so it runs last: after JUnit and Allure wrote their files.
            config.add_cleanup(lambda: _redact_artifacts(state))


def _redact_artifacts(state: RunState) -> None:
    if state.report_dir.is_dir():
        redact_tree(state.report_dir, state.redactor)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist (controller): workers write Allure results into the same folder."""
    state = node.config.stash[RUN_KEY]
    node.workerinput[_WORKER_REPORT_DIR] = str(state.report_dir)


# -- collection ------------------------------------------------------------------------


def _checks_dirs(config: pytest.Config) -> list[Path]:
    own = Path(__file__).resolve().parent / "checks"
    return [own, *(Path(p).resolve() for p in config.getini("genapi_checks"))]


def _is_check(item: pytest.Item, dirs: Sequence[Path]) -> bool:
    path = item.path.resolve()
    return any(path.is_relative_to(d) for d in dirs)


def _cited(item: pytest.Item) -> tuple[list[str], list[str]]:
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
    ids, problems = _cited(item)
    if not ids and not problems and not _is_check(item, dirs):
        return []
    if not ids and not problems:
        problems.append(
            'cites no requirement: add @pytest.mark.requirement("<ID>", ...) '
            "with the catalog ids it verifies"
        )
    unknown = state.get_catalog().unknown(ids)
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
        ids, _ = _cited(item)
        if not ids:
            continue
        catalog = state.get_catalog()
        item.stash[REQUIREMENTS_KEY] = tuple(ids)
        state.requirements_by_nodeid[item.nodeid] = tuple(ids)
        for requirement_id in ids:
            item.user_properties.append(("requirement", requirement_id))
        for area in sorted({catalog[i].area for i in ids}):
            item.add_marker(pytest.mark.area(area))
    if state.only or state.areas:
        keep, drop = [], []
        for item in items:
            cited: tuple[str, ...] = item.stash.get(REQUIREMENTS_KEY, ())
            if _selected(state, cited):
                keep.append(item)
            else:
                drop.append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
    workeroutput: dict[str, Any] | None = getattr(config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput[_WORKER_MAP] = {k: list(v) for k, v in state.requirements_by_nodeid.items()}


def _in_scope(state: RunState, requirement: Requirement) -> bool:
    """Whether --only/--area put *requirement* in this run's scope (all when neither)."""
    if not state.only and not state.areas:
        return True
    return requirement.id in state.only or requirement.area in state.areas


def _selected(state: RunState, ids: Iterable[str]) -> bool:
    catalog = state.get_catalog()
    return any(_in_scope(state, catalog[i]) for i in ids)


def pytest_deselected(items: Sequence[pytest.Item]) -> None:
    for item in items:
        if REQUIREMENTS_KEY in item.stash:
            state = item.config.stash[RUN_KEY]
            state.deselected.add(item.nodeid)
            workeroutput: dict[str, Any] | None = getattr(item.config, "workeroutput", None)
            if workeroutput is not None:
                workeroutput[_WORKER_DESELECTED] = sorted(state.deselected)


# -- running a check -------------------------------------------------------------------


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    ids = item.stash.get(REQUIREMENTS_KEY, ())
    if not ids:
        return
    findings.begin(ids)
    state = item.config.stash[RUN_KEY]
    if item.config.pluginmanager.has_plugin("allure_listener"):
        _allure_labels(state, ids)
    if state.profile is not None:
        missing = _missing_capability(_needs(item, state.get_catalog(), ids), state.profile)
        if missing:
            pytest.skip(missing)


def _needs(item: pytest.Item, catalog: Catalog, ids: Sequence[str]) -> set[str]:
    """The capabilities a check needs: its needs markers, and what every requirement it
    cites needs (the catalog's ``needs``; a need of only some of them may be met another
    way by this check)."""
    marked = {name for name in NEEDS_MARKERS if item.get_closest_marker(name)}
    common = set.intersection(*({need.value for need in catalog[i].needs} for i in ids))
    return marked | common


def _missing_capability(needs: set[str], profile: Profile) -> str | None:
    """A skip reason ``needs <capability>: <what to add to the profile>``, or None."""
    if "destructive" in needs and not profile.budgets.destructive:
        return "needs destructive: set [budgets] destructive = true in the profile"
    if "dns" in needs and profile.dns is None:
        return "needs dns: add a [dns] table (server, domain) to the profile"
    if "console" in needs and not profile.sessions:
        return "needs console: add [sessions.primary] with token (or token_env) to the profile"
    if "adapter" in needs and profile.adapter == "none":
        return 'needs adapter: set adapter = "reference" (or an adapter for this target)'
    return None


def _allure_labels(state: RunState, ids: Sequence[str]) -> None:
    import allure  # only when allure-pytest is active

    dynamic: Any = allure.dynamic  # untyped library

    catalog = state.get_catalog()
    for requirement_id in ids:
        requirement = catalog[requirement_id]
        dynamic.feature(requirement.area)
        dynamic.story(requirement.id)
        dynamic.link(
            f"spec/generation-api.md#{_spec_anchor(requirement.heading)}",
            name=f"spec §{requirement.section} {requirement.heading}",
        )


def _spec_anchor(heading: str) -> str:
    """The GitHub-style anchor of a Markdown heading."""
    kept = "".join(c for c in heading.lower() if c.isalnum() or c in " -_")
    return kept.strip().replace(" ", "-")


def _redactors(item: pytest.Item) -> list[Redactor]:
    """The run's redactor, and the test's own one (it may have learned created keys)."""
    found = [item.config.stash[RUN_KEY].redactor]
    own = getattr(item, "funcargs", {}).get("redactor")
    if isinstance(own, Redactor) and own is not found[0]:
        found.append(own)
    return found


def _redact(redactors: Sequence[Redactor], text: str) -> str:
    for redactor in redactors:
        text = redactor.text(text)
    return text


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    ids = item.stash.get(REQUIREMENTS_KEY, ())
    if not ids:
        return report
    setattr(report, _IDS_ATTR, list(ids))
    redactors = _redactors(item)
    excinfo = call.excinfo
    if excinfo is not None and excinfo.errisinstance(CapabilityMissing):
        # A capability the profile lacks (profile.key("low-limit") without that key):
        # not the implementation's fault, so a skip with the fix as its reason.
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {excinfo.value}")
    _redact_report(report, redactors)

    outcome, message = _phase_outcome(report, call)
    phases = item.stash.setdefault(_PHASES_KEY, [])
    phases.append(_Phase(report.when, outcome, message, _longrepr_text(report), report.duration))
    if report.when == "call" and outcome is Outcome.FAILED:
        broken = _broken(excinfo, ids)
        item.stash[_BROKEN_KEY] = broken
        catalog = item.config.stash[RUN_KEY].get_catalog()
        if all(check_verdict(Outcome.FAILED, catalog[i]) is Verdict.WARN for i in broken):
            setattr(report, _WARN_ATTR, True)
    if report.when == "teardown":
        result = _check_result(item, ids, phases, redactors)
        item.stash[CHECK_RESULT_KEY] = result
        setattr(report, _CHECK_ATTR, result.to_dict())
    return report


def _broken(
    excinfo: pytest.ExceptionInfo[BaseException] | None, ids: tuple[str, ...]
) -> tuple[str, ...]:
    """The rules a failure broke: those a :class:`~conformance.findings.RuleBroken` names
    (one of the cited ids each, checked where it was raised), else every cited one."""
    if excinfo is not None and isinstance(excinfo.value, findings.RuleBroken):
        named = tuple(i for i in excinfo.value.ids if i in ids)
        if named:
            return named
    return ids


@dataclass(frozen=True)
class _Crash:
    """Where and why a check failed (what pytest's one-line summaries show)."""

    path: str
    lineno: int
    message: str


@dataclass(frozen=True)
class _RedactedLongrepr:
    """A failure's text with the secrets masked, shaped like pytest's own repr (it has
    ``toterminal`` and ``reprcrash``), so terminal, JUnit and xdist treat it alike."""

    text: str
    reprcrash: _Crash | None

    def toterminal(self, tw: Any) -> None:
        for line in self.text.splitlines():
            tw.line(line)

    def __str__(self) -> str:
        return self.text


def _redact_report(report: pytest.TestReport, redactors: Sequence[Redactor]) -> None:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):
        path, lineno, reason = longrepr
        report.longrepr = (path, lineno, _redact(redactors, reason))
    elif longrepr is not None:
        text = str(longrepr)
        masked = _redact(redactors, text)
        if masked != text:
            # Only then: pytest's structured repr (colours) is worth keeping otherwise.
            crash = getattr(longrepr, "reprcrash", None)
            # Duck-typed like pytest's TerminalRepr, which is not public API.
            report.longrepr = _RedactedLongrepr(  # type: ignore[assignment]
                masked,
                None
                if crash is None
                else _Crash(str(crash.path), crash.lineno, _redact(redactors, crash.message)),
            )
    report.sections = [(title, _redact(redactors, body)) for title, body in report.sections]
    report.user_properties = [
        (name, _redact(redactors, value) if isinstance(value, str) else value)
        for name, value in report.user_properties
    ]


def _longrepr_text(report: pytest.TestReport) -> str:
    if report.longrepr is None or isinstance(report.longrepr, tuple):
        return ""
    return str(report.longrepr)


def _phase_outcome(report: pytest.TestReport, call: pytest.CallInfo[None]) -> tuple[Outcome, str]:
    if report.passed:
        return Outcome.PASSED, ""
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else ""
        if hasattr(report, "wasxfail"):
            reason = f"expected to fail: {report.wasxfail}"
        return Outcome.SKIPPED, reason.removeprefix("Skipped: ")
    excinfo = call.excinfo
    if report.when != "call":
        detail = excinfo.exconly() if excinfo is not None else _longrepr_text(report)
        return Outcome.ERROR, f"{report.when} failed (harness): {detail}"
    if excinfo is None or excinfo.errisinstance(_FAILURES):
        detail = excinfo.exconly() if excinfo is not None else _longrepr_text(report)
        return Outcome.FAILED, detail
    return Outcome.ERROR, f"the check broke (harness): {excinfo.exconly()}"


def _check_result(
    item: pytest.Item,
    ids: tuple[str, ...],
    phases: Sequence[_Phase],
    redactors: Sequence[Redactor],
) -> CheckResult:
    """One outcome from the phases: a setup error or skip decides; else the call does;
    a teardown error turns a pass or a skip into an error (the harness broke)."""
    by_when = {phase.when: phase for phase in phases}
    decisive = by_when.get("setup") or _Phase("setup", Outcome.ERROR, "setup did not run", "", 0)
    if decisive.outcome is Outcome.PASSED and "call" in by_when:
        decisive = by_when["call"]
    outcome, message, longrepr = decisive.outcome, decisive.message, decisive.longrepr
    teardown = by_when.get("teardown")
    if teardown is not None and teardown.outcome is Outcome.ERROR:
        if outcome in (Outcome.PASSED, Outcome.SKIPPED):
            outcome, message, longrepr = teardown.outcome, teardown.message, teardown.longrepr
        else:
            message = f"{message}\n(and {teardown.message})"
    recorded: list[Exchange] = item.stash.get(EXCHANGES_KEY, [])
    exchanges, omitted = trim_exchanges(recorded)
    duration = sum(phase.duration for phase in phases)
    found = findings.end() or findings.CheckFindings(ids)
    return CheckResult(
        nodeid=item.nodeid,
        requirement_ids=ids,
        outcome=outcome,
        duration=duration,
        message=_redact(redactors, message),
        longrepr=_redact(redactors, longrepr),
        exchanges=exchanges,
        exchanges_omitted=omitted,
        broken=item.stash.get(_BROKEN_KEY, ()) if outcome is Outcome.FAILED else (),
        warnings=tuple(
            findings.Finding(f.rule, _redact(redactors, f.message)) for f in found.warnings
        ),
        measurements=tuple(found.measurements),
    )


def is_warning(report: pytest.TestReport) -> bool:
    """Whether *report* is a check's failure that breaks only interpretations (a warning)."""
    return bool(getattr(report, _WARN_ATTR, False))


def pytest_report_teststatus(
    report: pytest.TestReport, config: pytest.Config
) -> tuple[str, str, str] | None:
    """A failure that only breaks interpretations shows as WARN, not FAILED."""
    if report.when == "call" and is_warning(report):
        return "warn", "W", "WARN"
    return None


# -- verdicts and reports (the controller under xdist, else the one process) ----------


class _RunHooks:
    """Hooks that gather every check's result and judge the run at its end."""

    def __init__(self, config: pytest.Config, state: RunState) -> None:
        self.config = config
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        state = self.state
        data = getattr(report, _CHECK_ATTR, None)
        if isinstance(data, dict):
            result = CheckResult.from_dict(data)
            state.results[result.nodeid] = result
            state.requirements_by_nodeid.setdefault(result.nodeid, result.requirement_ids)
        elif report.failed and report.when not in ("setup", "call", "teardown"):
            # pytest-xdist reports a check whose worker died with when="???".
            state.crashed[report.nodeid] = _longrepr_text(report) or "the worker crashed"
        elif report.failed and not getattr(report, _IDS_ATTR, None):
            state.other_failures += 1

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        output: dict[str, Any] = getattr(node, "workeroutput", None) or {}
        for nodeid, ids in output.get(_WORKER_MAP, {}).items():
            self.state.requirements_by_nodeid.setdefault(nodeid, tuple(ids))
        self.state.deselected.update(output.get(_WORKER_DESELECTED, ()))

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.state.started_at = datetime.now(UTC)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        state = self.state
        if session.config.option.collectonly:
            return
        if not state.results and not state.requirements_by_nodeid:
            return  # not a conformance run: no check was collected
        self._adopt_crashes()
        catalog = state.get_catalog()
        requirements = [r for r in catalog if _in_scope(state, r)]
        deselected_ids = frozenset(
            i for nodeid in state.deselected for i in state.requirements_by_nodeid.get(nodeid, ())
        )
        verdicts = judge(requirements, state.results.values(), deselected_ids)
        state.verdicts = verdicts
        state.written = write_reports(state.report_dir, self._run_info(), verdicts)
        if (
            session.exitstatus == pytest.ExitCode.TESTS_FAILED
            and verdicts.ok
            and not state.other_failures
        ):
            # Only interpretations failed: warnings, which never fail a run.
            session.exitstatus = pytest.ExitCode.OK

    def _adopt_crashes(self) -> None:
        state = self.state
        for nodeid, text in state.crashed.items():
            ids = state.requirements_by_nodeid.get(nodeid)
            if ids and nodeid not in state.results:
                state.results[nodeid] = CheckResult(
                    nodeid=nodeid,
                    requirement_ids=ids,
                    outcome=Outcome.ERROR,
                    duration=0.0,
                    message="the process running this check died (harness)",
                    longrepr=state.redactor.text(text),
                )
            elif not ids:
                state.other_failures += 1

    def _run_info(self) -> RunInfo:
        profile = self.state.profile
        digest = None
        if profile is not None:
            canonical = json.dumps(profile.redacted(), sort_keys=True, separators=(",", ":"))
            digest = hashlib.sha256(canonical.encode()).hexdigest()
        return RunInfo(
            suite_version=conformance.__version__,
            spec_version=genapi_spec.SPEC_VERSION,
            api_version=profile.api_version if profile is not None else None,
            profile_name=profile.name if profile is not None else None,
            profile_sha256=digest,
            base_url=profile.base_url if profile is not None else None,
            started_at=self.state.started_at,
            finished_at=datetime.now(UTC),
        )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        verdicts = self.state.verdicts
        if verdicts is None:
            return
        counts = ", ".join(f"{n} {v.value}" for v, n in verdicts.counts().items() if n)
        terminalreporter.write_sep("=", "conformance verdicts by requirement")
        terminalreporter.write_line(counts or "no requirement in scope")
        for rv in verdicts.requirements:
            if rv.verdict.value in ("fail", "error", "warn"):
                terminalreporter.write_line(
                    f"{rv.verdict.value.upper():5} {rv.requirement.id}: {rv.reason}"
                )
        terminalreporter.write_line(f"reports: {self.state.report_dir}")
