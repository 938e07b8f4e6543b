"""The suite's pytest plugin (registered through the ``pytest11`` entry point).

What it adds to pytest, one concern per module:

* :mod:`.options`: ``--profile PATH`` (or ``GENAPI_PROFILE``), ``--report-dir DIR``, the
  selections ``--only ID`` and ``--area AREA`` (both repeatable), the markers
  (``requirement``, ``area``, and the ``needs`` markers, each described);
* :mod:`.state`: the run's state, resolved once per process: the profile (read here and
  nowhere else), its one redactor, the report folder;
* :mod:`.citations`: collection fails on an id the catalog does not know and on a check
  (a test under ``conformance/checks`` or a folder named by the ``genapi_checks`` ini
  option) that cites none; area markers; ``--only``/``--area``;
* :mod:`.capabilities`: a check needing what the profile lacks is skipped with the fix;
* :mod:`.results` and :mod:`.redaction`: each check's outcome becomes a redacted
  :class:`~conformance.verdicts.CheckResult`, carried to the controller under xdist;
* :mod:`.run`: verdicts per requirement at the end of the run, the reports
  (``results.json``, ``report.html``; with ``--report-dir`` or a profile also
  ``junit.xml`` and ``allure-results/``), an exit status that ignores warnings;
* :mod:`.ceiling`: no run goes on past the profile's ``[timing] run_ceiling_seconds``: a
  check still going then is stopped, the rest are not run (errors, never passes);
* :mod:`.budget`: ``--budget-requests N``: at most N requests in the whole run, the checks
  cheapest first, those the budget does not reach reported as not run;
* :mod:`.channels`: every process logs the final events its receiver gets, and the check
  that compares them with the reads (GEN-CONSIST-01) runs after every other;
* :mod:`.schedule`: under pytest-xdist the long chains of checks start first, each on its
  own worker, and the run-wide check runs last;
* :mod:`.junit` and :mod:`.allure`: JUnit and Allure settled against the verdicts once
  the run is over (a warning is never a failure there either), Allure with the evidence.

Outside a conformance run (the project's own tests) it stays out of the way: tests that
cite no requirement and live outside the checks folders are not touched.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from conformance.reports import ALLURE_DIR, JUNIT_NAME, ReportWriteError
from conformance.run.plugin import (
    budget,
    capabilities,
    ceiling,
    channels,
    citations,
    results,
    schedule,
)
from conformance.run.plugin.allure import settle_allure
from conformance.run.plugin.citations import REQUIREMENTS_KEY
from conformance.run.plugin.junit import settle_junit
from conformance.run.plugin.options import NEEDS_MARKERS, add_options, register_markers
from conformance.run.plugin.redaction import redact_artifacts
from conformance.run.plugin.results import CHECK_RESULT_KEY, is_warning
from conformance.run.plugin.run import RunHooks, reproduction
from conformance.run.plugin.state import (
    LEASES_DIR,
    RUN_KEY,
    WORKER_DEADLINE,
    WORKER_REPORT_DIR,
    RunState,
    resolve,
    run_state,
    scratch_folder,
)

__all__ = [
    "CHECK_RESULT_KEY",
    "NEEDS_MARKERS",
    "REQUIREMENTS_KEY",
    "RUN_KEY",
    "WORKER_PYTHON_ENV",
    "RunState",
    "is_warning",
    "run_state",
]

#: The fixture modules (:mod:`conformance.run.fixtures`), registered with the plugin.
pytest_plugins = [
    "conformance.run.fixtures.profile",
    "conformance.run.fixtures.client",
    "conformance.run.fixtures.receiver",
    "conformance.run.fixtures.labs",
]


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    register_markers(config)
    # The hook modules: registered here (this package imports them), not by name.
    for module in (citations, capabilities, results, ceiling, budget):
        config.pluginmanager.register(module, f"genapi-conformance.{module.__name__}")
    state = resolve(config)
    config.stash[RUN_KEY] = state
    channels.reset_events(config)
    scratch_folder(config, LEASES_DIR)
    if state.only:
        unknown_only = state.catalog.unknown(state.only)
        if unknown_only:
            raise pytest.UsageError(
                f"--only names unknown requirement ids: {', '.join(unknown_only)}"
            )
    if state.areas:
        unknown_areas = [a for a in state.areas if a not in state.catalog.areas]
        if unknown_areas:
            raise pytest.UsageError(
                f"--area names unknown areas: {', '.join(unknown_areas)} "
                f"(known: {', '.join(state.catalog.areas)})"
            )
    if not state.is_worker:
        config.pluginmanager.register(RunHooks(config, state), "genapi-conformance-run")
    if state.explicit:
        # JUnit and Allure join the run's folder unless asked elsewhere. They must be set
        # before their plugins' own pytest_configure (hence tryfirst).
        if not config.option.xmlpath and not state.is_worker:
            config.option.xmlpath = str(state.report_dir / JUNIT_NAME)
        if hasattr(config.option, "allure_report_dir") and not config.option.allure_report_dir:
            config.option.allure_report_dir = str(state.report_dir / ALLURE_DIR)
        if not state.is_worker:
            # Registered first, so it runs last: after JUnit and Allure wrote their files.
            config.add_cleanup(lambda: _settle_artifacts(config, state))


def _settle_artifacts(config: pytest.Config, state: RunState) -> None:
    """JUnit and Allure made to agree with the verdicts, then every artifact redacted.

    Each step is tried even when one before it failed (a full disk leaves JUnit or
    Allure files truncated): what failed joins ``state.write_problems``, and the
    redaction always runs.
    """
    xmlpath = config.option.xmlpath
    if xmlpath:
        _settling(state, Path(xmlpath), lambda: settle_junit(Path(xmlpath)))
    allure_dir = getattr(config.option, "allure_report_dir", None)
    if allure_dir:
        again = reproduction(config, state)
        _settling(
            state,
            Path(allure_dir),
            lambda: settle_allure(Path(allure_dir), state.results, state.catalog, again),
        )
    _settling(state, state.report_dir, lambda: redact_artifacts(state))


def _settling(state: RunState, path: Path, step: Callable[[], None]) -> None:
    try:
        step()
    except ReportWriteError as error:
        state.write_problems += error.problems
    except (OSError, ValueError, SyntaxError) as error:
        # SyntaxError: ElementTree's ParseError, for a junit.xml cut short.
        state.write_problems.append(f"could not settle {path} with the verdicts: {error}")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The run-wide check of GEN-CONSIST-01 runs after every other check
    (:mod:`.channels`)."""
    channels.order_last(items)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist (controller): ``--dist loadfile`` starts the chains first and runs the
    run-wide check last (:mod:`.schedule`)."""
    return schedule.scheduler(config, log)


#: The environment variable that names the Python a run's pytest-xdist workers start with
#: (this interpreter when unset): a command line, split like a shell would, that takes what
#: ``python`` would (``-u -c CODE``). The project's tests have the workers forked from a
#: process that imported the suite once (``tests/fork_server.py``), as they have the
#: reference (``GENAPI_REFERENCE_COMMAND``); a user can run the workers under a profiler
#: the same way.
WORKER_PYTHON_ENV = "GENAPI_WORKER_PYTHON"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config: pytest.Config, specs: Sequence[Any]) -> None:
    """pytest-xdist (controller): the workers' Python is :data:`WORKER_PYTHON_ENV`'s, when
    it is set (execnet starts ``spec.python`` for a ``popen`` worker)."""
    python = os.environ.get(WORKER_PYTHON_ENV)
    if python:
        for spec in specs:
            spec.python = python


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist (controller): workers write Allure results into the same folder and
    keep the run's deadline."""
    state = run_state(node.config)
    node.workerinput[WORKER_REPORT_DIR] = str(state.report_dir)
    node.workerinput[WORKER_DEADLINE] = state.deadline
