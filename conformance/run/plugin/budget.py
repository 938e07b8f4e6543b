"""The run's budget (``--budget-requests N``, ``--budget-credits M``,
:mod:`conformance.target.budget`): every client of every process spends from it, the
checks run cheapest first, and a check that finds it spent is reported as not run ("not
run: budget"), never as passed.

Cheapest first: the checks that need no long chain come before the ``slow`` ones (timing
chains), and the ``destructive`` ones (the credit cap, keys up to the limit) come last,
each group in its collection order, so that a small budget buys as many verdicts as it
can.
"""

from __future__ import annotations

from typing import Final

import pytest

from conformance.run.plugin.state import run_state
from conformance.target.budget import BudgetSpent
from conformance.target.client import ApiClient

__all__ = ["BudgetSpent"]

#: The order of the checks under a budget: the marker that puts a check later.
_LATER: Final = ("slow", "destructive")


def pytest_sessionstart(session: pytest.Session) -> None:
    # Not pytest_configure: this module is registered while the plugin configures, before
    # the run's state exists.
    config = session.config
    budget = run_state(config).budget
    if budget is None:
        return
    ApiClient.run_budget = budget

    def forget() -> None:
        ApiClient.run_budget = None

    config.add_cleanup(forget)


def _cost(item: pytest.Item) -> int:
    return max(
        (rank + 1 for rank, name in enumerate(_LATER) if item.get_closest_marker(name)),
        default=0,
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if run_state(config).budget is not None:
        items.sort(key=_cost)  # stable: each group keeps its order


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    budget = run_state(item.config).budget
    if budget is not None:
        budget.check_left()
