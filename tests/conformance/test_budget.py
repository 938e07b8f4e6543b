"""The run's request budget (``--budget-requests``, :mod:`conformance.target.budget` and
:mod:`conformance.run.plugin.budget`): shared by every process of a run, never exceeded
(counted at the reference), and what it does not reach is reported as not run."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest
from suite_run import run_suite

from conformance.run.cli import EXIT_OK
from conformance.run.launcher import EmbeddedReference
from conformance.target.budget import NOT_RUN, BudgetSpent, RunBudget

#: The budget of the run against the reference: a few checks' worth.
BUDGET = 25


def _spend_all(path: Path, requests: int, tries: int) -> int:
    budget = RunBudget(path, requests)
    spent = 0
    for _ in range(tries):
        try:
            budget.spend()
        except BudgetSpent:
            continue
        spent += 1
    return spent


def test_processes_spending_at_once_never_spend_more_than_the_budget(tmp_path: Path) -> None:
    budget = RunBudget.create(tmp_path / "budget", 100)
    with multiprocessing.get_context("fork").Pool(4) as pool:
        spent = pool.starmap(_spend_all, [(budget.path, 100, 60)] * 4)
    assert sum(spent) == 100 == budget.spent()
    with pytest.raises(BudgetSpent, match=NOT_RUN):
        budget.check_left()


def _requests_logged(stderr_log: Path) -> int:
    """The requests the reference served, from its log (a JSON object a line; its
    warnings are plain text)."""
    lines = stderr_log.read_text(encoding="utf-8").splitlines()
    events = (json.loads(line) for line in lines if line.startswith("{"))
    return sum(1 for event in events if event.get("event") == "request")


@pytest.mark.timeout(600)
def test_a_budgeted_run_sends_no_more_than_its_budget_and_reports_the_rest_not_run(
    tmp_path: Path,
) -> None:
    workdir = tmp_path / "reference"
    with EmbeddedReference(workdir=workdir) as profile:
        before = _requests_logged(workdir / "stderr.log")
        run = run_suite(
            tmp_path / "report",
            "--profile",
            str(profile),
            "--budget-requests",
            str(BUDGET),
            timeout=480,
        )
        sent = _requests_logged(workdir / "stderr.log") - before
    assert sent <= BUDGET, f"the reference saw {sent} requests of a budget of {BUDGET}"
    assert run.returncode == EXIT_OK, run.describe()
    assert f"budget: {sent} of {BUDGET} requests spent" in run.stdout, run.stdout
    assert run.results is not None
    outcomes = {c["outcome"] for c in run.results["checks"]}
    not_run = [c for c in run.results["checks"] if c["message"].startswith(NOT_RUN)]
    assert not_run and all(c["outcome"] == "skipped" for c in not_run)
    assert "passed" in outcomes, "the budget bought some verdicts"
    assert "no failures among" in run.stdout and "not checked" in run.stdout
