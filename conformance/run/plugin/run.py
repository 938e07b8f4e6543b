"""The run's end (the controller under pytest-xdist, else the one process).

:class:`RunHooks` gathers every check's result (from the workers' reports under xdist),
judges each requirement once the run is over, writes the reports, sets the exit status
(warnings never fail a run) and prints the verdicts. The verdicts stay in the run's state
(``RunState.verdicts``) for whoever started pytest in this process (the CLI).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Generator
from datetime import UTC, datetime
from typing import Any

import pytest

import conformance
import genapi_spec
from conformance.provenance import catalog_sha256, distribution_sha256
from conformance.reports import ReportWriteError, Reproduction, RunInfo, write_reports
from conformance.run.plugin.citations import WORKER_DESELECTED, WORKER_MAP, in_scope
from conformance.run.plugin.redaction import longrepr_text
from conformance.run.plugin.results import CHECK_ATTR, IDS_ATTR
from conformance.run.plugin.state import RunState
from conformance.verdicts import CheckResult, Outcome, judge

__all__ = ["RunHooks", "reproduction"]


class RunHooks:
    """Hooks that gather every check's result and judge the run at its end."""

    def __init__(self, config: pytest.Config, state: RunState) -> None:
        self.config = config
        self.state = state
        self.finished = False

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        state = self.state
        data = getattr(report, CHECK_ATTR, None)
        if isinstance(data, dict):
            result = CheckResult.from_dict(data)
            state.results[result.nodeid] = result
            state.requirements_by_nodeid.setdefault(result.nodeid, result.requirement_ids)
        elif report.failed and report.when not in ("setup", "call", "teardown"):
            # pytest-xdist reports a check whose worker died with when="???".
            state.crashed[report.nodeid] = longrepr_text(report) or "the worker crashed"
        elif report.failed and not getattr(report, IDS_ATTR, None):
            state.other_failures += 1

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        output: dict[str, Any] = getattr(node, "workeroutput", None) or {}
        for nodeid, ids in output.get(WORKER_MAP, {}).items():
            self.state.requirements_by_nodeid.setdefault(nodeid, tuple(ids))
        self.state.deselected.update(output.get(WORKER_DESELECTED, ()))

    def pytest_internalerror(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        # Another plugin failed to write its files (Allure's results on a full disk): name
        # it among the write problems, which the CLI says in words.
        error = _os_error_in(excinfo.value)
        if error is not None:
            self.state.write_problems.append(
                f"the run stopped: a file under {self.state.report_dir} could not be written "
                f"({error.strerror or error})"
            )

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.state.started_at = datetime.now(UTC)

    @pytest.hookimpl(wrapper=True, specname="pytest_sessionfinish")
    def pytest_sessionfinish_guard(self, session: pytest.Session) -> Generator[None, None, None]:
        """A plugin that finishes before this one may fail to write its file (JUnit on a
        full disk), which would skip the verdicts: they are judged and written anyway, and
        the failure joins the write problems instead of ending pytest with a traceback."""
        try:
            yield
        except OSError as error:
            self.state.write_problems.append(
                f"a report file under {self.state.report_dir} could not be written "
                f"({error.strerror or error})"
            )
            if not self.finished:
                self.pytest_sessionfinish(session)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        state = self.state
        self.finished = True
        if session.config.option.collectonly:
            return
        if not state.results and not state.requirements_by_nodeid:
            return  # not a conformance run: no check was collected
        self._adopt_crashes()
        catalog = state.catalog
        requirements = [r for r in catalog if in_scope(state, r)]
        deselected_ids = frozenset(
            i for nodeid in state.deselected for i in state.requirements_by_nodeid.get(nodeid, ())
        )
        outside = [r for r in catalog if not in_scope(state, r)]
        verdicts = judge(requirements, state.results.values(), deselected_ids, outside)
        state.verdicts = verdicts
        try:
            state.written = write_reports(state.report_dir, self._run_info(), verdicts)
        except ReportWriteError as error:
            state.write_problems += error.problems
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
            suite_sha256=distribution_sha256(),
            catalog_sha256=catalog_sha256(),
            reproduction=reproduction(self.config, self.state),
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
        coverage = verdicts.coverage()
        for line in (coverage.line(), *coverage.details()):
            terminalreporter.write_line(line)
        terminalreporter.write_line(f"reports: {self.state.report_dir}")


def _os_error_in(error: BaseException | None) -> OSError | None:
    """The OSError behind *error*, if any (pluggy wraps a hook wrapper's error in a
    warning that pytest's settings turn into an exception), following a bounded chain."""
    for _ in range(10):
        if error is None or isinstance(error, OSError):
            return error
        error = error.__cause__ or error.__context__
    return None


def reproduction(config: pytest.Config, state: RunState) -> Reproduction:
    """How this run is repeated: its target, its ``-k`` selection, its secrets' variables."""
    keyword = config.getoption("keyword", "")
    profile = state.profile
    return Reproduction(
        target=state.target_args,
        selection=("-k", keyword) if keyword else (),
        secret_env=profile.secret_env if profile is not None else {},
        secret_labels=tuple(profile.secrets()) if profile is not None else (),
    )
