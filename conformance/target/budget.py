"""The run's budget (``genapi-conformance run --budget-requests N --budget-credits M``),
for deployments where every request, or every generation, costs money.

Every request the suite sends to the target goes through
:meth:`~conformance.target.client.ApiClient.request`, which spends from the run's budget
before it sends anything; once the budget is spent, the request is not sent and
:class:`BudgetSpent` stops the check, which is then reported as not run ("not run:
budget"), never as passed and never as the target's failure. The counts are shared by
the run's processes (the xdist workers): they live in one small file, read and written
under an exclusive lock, so the run as a whole never spends more than its budget,
whichever process spends.

Credits: spec §1 shows no price ("Credit prices per operation: not shown"), so the
profile states the most one submit may cost (``[budgets] credits_per_submit``). A submit
(a POST to one of :data:`SUBMIT_PATHS`) spends that much before it is sent; when it is
answered other than 2xx the credits are given back (spec §4: a refused submit fails
"before credits are spent"; CREDIT-CAP-06 judges the cap's 429). A submit whose answer
never came keeps them: the run counts what it may have spent, never less.

:class:`BudgetSpent` derives from :class:`BaseException`: a check that catches
``Exception`` to judge a broken answer must not swallow it.
"""

from __future__ import annotations

import fcntl
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Final

__all__ = ["NOT_RUN", "SUBMIT_PATHS", "BudgetSpent", "RunBudget"]

#: How the reason of a check the budget stopped begins.
NOT_RUN = "not run: budget"
#: The operations that start a generation (spec §4), which spend credits when accepted.
SUBMIT_PATHS: Final = (
    "/v1/images/generate",
    "/v1/images/edit",
    "/v1/videos/generate",
    "/v1/audio/generate",
    "/v1/agents/run",
)


class BudgetSpent(BaseException):
    """The run's budget is spent: the check stops, reported as not run."""


class RunBudget:
    """A budget of *requests* and of *credits* (None: no limit on that one), shared
    through the file *path* by every process of a run; a submit costs *price* credits.

    The controller creates it (:meth:`create`); each process opens it by path.
    """

    def __init__(
        self, path: Path, requests: int | None, credits: int | None = None, price: int = 0
    ) -> None:
        self.path = path
        self.requests = requests
        self.credits = credits
        self.price = price

    @classmethod
    def create(
        cls, path: Path, requests: int | None, credits: int | None = None, price: int = 0
    ) -> RunBudget:
        """A new budget with nothing spent (an earlier run's file is replaced)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"requests": 0, "credits": 0}), encoding="ascii")
        return cls(path, requests, credits, price)

    def charge_of(self, method: str, path: str) -> int:
        """The credits a request spends before it is sent: the price, for a submit when
        the run has a budget of credits; else nothing."""
        if self.credits is None or method != "POST":
            return 0
        return self.price if path.rstrip("/").endswith(SUBMIT_PATHS) else 0

    @contextmanager
    def _counts(self) -> Iterator[dict[str, int]]:
        with self.path.open("r+", encoding="ascii") as file:
            fcntl.flock(file, fcntl.LOCK_EX)
            counts = _read(file)
            yield counts
            file.seek(0)
            file.write(json.dumps(counts))
            file.truncate()

    def spend(self, credits: int = 0) -> None:
        """Spend one request and *credits*, or raise :class:`BudgetSpent` (nothing
        spent) when either is not left."""
        with self._counts() as counts:
            if self.requests is not None and counts["requests"] >= self.requests:
                raise BudgetSpent(
                    f"{NOT_RUN}: the run's budget of {self.requests} requests is spent"
                )
            if credits and self.credits is not None and counts["credits"] + credits > self.credits:
                raise BudgetSpent(
                    f"{NOT_RUN}: {self.credits - counts['credits']} of the run's budget of "
                    f"{self.credits} credits are left, and a submit may cost {credits} "
                    "([budgets] credits_per_submit)"
                )
            counts["requests"] += 1
            counts["credits"] += credits

    def refund(self, credits: int) -> None:
        """Give back the credits of a submit that was not accepted."""
        if credits:
            with self._counts() as counts:
                counts["credits"] = max(0, counts["credits"] - credits)

    def spent(self) -> int:
        """How many requests were spent so far."""
        return self._read_shared()["requests"]

    def credits_spent(self) -> int:
        """How many credits were spent (or are held by submits not yet answered)."""
        return self._read_shared()["credits"]

    def _read_shared(self) -> dict[str, int]:
        with self.path.open("r", encoding="ascii") as file:
            fcntl.flock(file, fcntl.LOCK_SH)
            return _read(file)

    def spent_words(self) -> str:
        """What was spent, for the run's summary: "12 of 25 requests, 4 of 8 credits
        spent" (the budgets the run had)."""
        counts = self._read_shared()
        parts = [
            f"{counts[name]} of {limit} {name}"
            for name, limit in (("requests", self.requests), ("credits", self.credits))
            if limit is not None
        ]
        return ", ".join(parts) + " spent"

    def check_left(self) -> None:
        """Raise :class:`BudgetSpent` when no request is left (a check not to start)."""
        if self.requests is not None and self.spent() >= self.requests:
            raise BudgetSpent(f"{NOT_RUN}: the run's budget of {self.requests} requests is spent")


def _read(file: IO[str]) -> dict[str, int]:
    file.seek(0)
    counts = json.loads(file.read() or "{}")
    return {"requests": int(counts.get("requests", 0)), "credits": int(counts.get("credits", 0))}
