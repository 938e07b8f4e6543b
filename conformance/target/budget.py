"""The run's request budget (``genapi-conformance run --budget-requests N``), for
deployments where every request costs money.

Every request the suite sends to the target goes through
:meth:`~conformance.target.client.ApiClient.request`, which spends one request of the
run's budget before it sends anything; once the budget is spent, the request is not sent
and :class:`BudgetSpent` stops the check, which is then reported as not run ("not run:
budget"), never as passed and never as the target's failure. The count is shared by the
run's processes (the xdist workers): it lives in one small file, read and written under
an exclusive lock, so the run as a whole never sends more than the budget, whichever
process sends.

:class:`BudgetSpent` derives from :class:`BaseException`: a check that catches
``Exception`` to judge a broken answer must not swallow it.
"""

from __future__ import annotations

import fcntl
from pathlib import Path

__all__ = ["NOT_RUN", "BudgetSpent", "RunBudget"]

#: How the reason of a check the budget stopped begins.
NOT_RUN = "not run: budget"


class BudgetSpent(BaseException):
    """The run's request budget is spent: the check stops, reported as not run."""


class RunBudget:
    """A budget of *requests* shared through the file *path* by every process of a run.

    The controller creates it (:meth:`create`); each process opens it by path.
    """

    def __init__(self, path: Path, requests: int) -> None:
        self.path = path
        self.requests = requests

    @classmethod
    def create(cls, path: Path, requests: int) -> RunBudget:
        """A new budget with nothing spent (an earlier run's file is replaced)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("0", encoding="ascii")
        return cls(path, requests)

    def _words(self) -> str:
        return f"{NOT_RUN}: the run's budget of {self.requests} requests is spent"

    def spend(self) -> None:
        """Spend one request, or raise :class:`BudgetSpent` (nothing spent) if none is left."""
        with self.path.open("r+", encoding="ascii") as file:
            fcntl.flock(file, fcntl.LOCK_EX)
            spent = int(file.read() or 0)
            if spent >= self.requests:
                raise BudgetSpent(self._words())
            file.seek(0)
            file.write(str(spent + 1))
            file.truncate()

    def spent(self) -> int:
        """How many requests were spent so far."""
        with self.path.open("r", encoding="ascii") as file:
            fcntl.flock(file, fcntl.LOCK_SH)
            return int(file.read() or 0)

    def check_left(self) -> None:
        """Raise :class:`BudgetSpent` when nothing is left (a check not to start)."""
        if self.spent() >= self.requests:
            raise BudgetSpent(self._words())
