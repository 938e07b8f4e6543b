"""The run's budget (``--budget-requests``, ``--budget-credits``,
:mod:`conformance.target.budget` and :mod:`conformance.run.plugin.budget`): shared by every
process of a run, never exceeded (counted at the reference), and what it does not reach is
reported as not run."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest
from suite_run import run_suite

from conformance.run.cli import EXIT_OK
from conformance.run.launcher import EmbeddedReference
from conformance.target.budget import NOT_RUN, BudgetSpent, RunBudget
from reference.tiers import load_tiers

#: The budget of the run against the reference: a few checks' worth.
BUDGET = 25
#: Its budget of credits: three submits at the reference's dearest price (video, 4).
CREDITS = 12
#: The category of each submit operation, for the reference's price table.
CATEGORY = {
    "/v1/images/generate": "image",
    "/v1/images/edit": "image",
    "/v1/videos/generate": "video",
    "/v1/audio/generate": "audio",
    "/v1/agents/run": "agent",
}


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


def test_a_submit_spends_credits_until_they_are_not_left_and_a_refusal_gives_them_back(
    tmp_path: Path,
) -> None:
    budget = RunBudget.create(tmp_path / "budget", None, credits=10, price=4)
    charge = budget.charge_of("POST", "/prefix/v1/videos/generate")
    assert charge == 4 and budget.charge_of("GET", "/v1/videos/generate") == 0
    assert budget.charge_of("POST", "/v1/webhooks") == 0
    budget.spend(charge)
    budget.spend(charge)
    with pytest.raises(BudgetSpent, match="2 of the run's budget of 10 credits are left"):
        budget.spend(charge)
    budget.refund(charge)  # the second was refused: its credits come back
    budget.spend(charge)
    budget.spend()  # a request that is no submit still goes
    assert budget.credits_spent() == 8 and budget.spent() == 4
    assert budget.spent_words() == "8 of 10 credits spent"
    budget.check_left()  # credits never stop a check that submits nothing


def test_without_a_budget_of_credits_a_submit_costs_nothing(tmp_path: Path) -> None:
    budget = RunBudget.create(tmp_path / "budget", 5, price=4)
    assert budget.charge_of("POST", "/v1/images/generate") == 0
    assert budget.spent_words() == "0 of 5 requests spent"


def _logged(stderr_log: Path) -> tuple[int, int]:
    """The requests the reference served and the credits its accepted submits cost, from
    its log (a JSON object a line; its warnings are plain text)."""
    prices = load_tiers().prices
    lines = stderr_log.read_text(encoding="utf-8").splitlines()
    events = [json.loads(line) for line in lines if line.startswith("{")]
    requests = [e for e in events if e.get("event") == "request"]
    credits = sum(
        prices[CATEGORY[e["path"]]]
        for e in requests
        if e["method"] == "POST" and e["path"] in CATEGORY and 200 <= e["status"] < 300
    )
    return len(requests), credits


@pytest.mark.timeout(600)
def test_a_budgeted_run_spends_no_more_than_its_budget_and_reports_the_rest_not_run(
    tmp_path: Path,
) -> None:
    workdir = tmp_path / "reference"
    with EmbeddedReference(workdir=workdir) as profile:
        before, credits_before = _logged(workdir / "stderr.log")
        run = run_suite(
            tmp_path / "report",
            "--profile",
            str(profile),
            "--budget-requests",
            str(BUDGET),
            "--budget-credits",
            str(CREDITS),
            timeout=480,
        )
        after, credits_after = _logged(workdir / "stderr.log")
    sent, spent = after - before, credits_after - credits_before
    assert sent <= BUDGET, f"the reference saw {sent} requests of a budget of {BUDGET}"
    assert spent <= CREDITS, f"the run spent {spent} credits of a budget of {CREDITS}"
    assert run.returncode == EXIT_OK, run.describe()
    assert f"budget: {sent} of {BUDGET} requests, " in run.stdout, run.stdout
    assert f" of {CREDITS} credits spent" in run.stdout, run.stdout
    assert run.results is not None
    outcomes = {c["outcome"] for c in run.results["checks"]}
    not_run = [c for c in run.results["checks"] if c["message"].startswith(NOT_RUN)]
    assert not_run and all(c["outcome"] == "skipped" for c in not_run)
    assert "passed" in outcomes, "the budget bought some verdicts"
    assert "no failures among" in run.stdout and "not checked" in run.stdout
