"""How the controller hands the check modules to pytest-xdist's workers (``--dist
loadfile``, what ``genapi-conformance run`` uses): the long chains first, the run-wide
check last.

A full run lasts at least as long as its longest **chain**: checks that must run in
order because each waits on what the target does in time (a key's rolling minute and
its Retry-After, the delivery timeout and backoff, an account's credits spent to the
cap). Each chain is one module (``conformance/checks/low_limit.py`` explains those of
the rate limits), so a worker runs it alone, in file order; the modules of
:data:`CHAIN_MODULES` start before any other, one per worker, and the short modules fill
the other workers meanwhile; one worker at least is always left to them (with
``--workers 2`` one runs the chains, one the rest). A worker starts a check only once it
knows the next one (or that none follows), so a worker whose chain is down to its last
check must be given a module, which then waits behind the chain's end, or be shut down:
it is given the smallest module left while more modules are left than workers free of
chains to take them, and is shut down otherwise (a module queued behind a 60 s chain's
last check would end the run that much later). It asks at its last check, not with two
left as xdist's workers do, so that this is decided as late as it can be.

The run-wide check of GEN-CONSIST-01 (:data:`~.channels.LAST_MODULE`) is held back until
every other module's checks have ended on every worker (:mod:`.channels` says why),
shutting the other workers down, then given to one worker. A worker that holds its last
check cannot run it until it is shut down or given more, which is why the others are
shut down rather than waited for; and why the one kept for it is not a chain's worker
while another is free (a chain's last check holds leases another chain may wait for).
"""

from __future__ import annotations

import functools
from pathlib import PurePosixPath
from typing import Any, Final

import pytest

from conformance.run.plugin.channels import is_last

__all__ = ["CHAIN_MODULES", "is_chain", "run_scheduling", "scheduler"]

#: The check modules that are chains, in the order they start (longest first). A module
#: named here that a run does not collect is simply absent from its queue.
CHAIN_MODULES: Final = (
    "test_rate_window.py",
    "test_rate_minute.py",
    "test_credits.py",
    "test_delivery_timeout.py",
    "test_delivery_retries.py",
    "test_rate_day.py",
)


def is_chain(scope: str) -> bool:
    """Whether the scope (a module's node id) is one of :data:`CHAIN_MODULES`."""
    return PurePosixPath(scope.split("::", 1)[0]).name in CHAIN_MODULES


def _chain_rank(scope: str) -> int:
    return CHAIN_MODULES.index(PurePosixPath(scope.split("::", 1)[0]).name)


@functools.cache
def run_scheduling() -> type[Any]:
    """The run's ``--dist loadfile`` scheduling class, made on first use: pytest-xdist is
    imported only by a controller that schedules (imported with this plugin, it would be
    too early for pytest to rewrite its asserts)."""
    from xdist.scheduler import LoadFileScheduling  # type: ignore[import-untyped]

    class RunScheduling(LoadFileScheduling):  # type: ignore[misc]
        """``--dist loadfile`` with the chains first and the run-wide check last."""

        def __init__(self, config: pytest.Config, log: Any = None) -> None:
            super().__init__(config, log)
            self._keeper: Any = None

        def _held(self) -> str | None:
            return next((scope for scope in self.workqueue if is_last(scope)), None)

        def _in_chain(self, node: Any) -> bool:
            """Whether *node* has checks of a chain still to run."""
            return any(
                is_chain(scope) and not all(work.values())
                for scope, work in self.assigned_work.get(node, {}).items()
            )

        def _free(self, but: Any) -> int:
            """How many live workers other than *but* have no chain to finish."""
            return sum(
                1
                for n in self.nodes
                if n is not but and not n.shutting_down and not self._in_chain(n)
            )

        def _assign_next(self, node: Any) -> None:
            """Give *node* the next module: a chain while any is left, unless the node is
            in one or no other worker would be left for the other modules; to a node in a
            chain, the smallest other module while they outnumber the free workers (else
            it is shut down); when only chains are left, the next chain."""
            chains = sorted((s for s in self.workqueue if is_chain(s)), key=_chain_rank)
            others = [s for s in self.workqueue if not is_chain(s) and not is_last(s)]
            in_chain = self._in_chain(node)
            chain_free = len(self.nodes) - sum(1 for n in self.nodes if self._in_chain(n))
            if chains and (not others or (not in_chain and chain_free > 1)):
                self.workqueue.move_to_end(chains[0], last=False)
            elif others and in_chain:
                free = self._free(but=node)
                if 0 < free and len(others) + len(chains) <= free:
                    node.shutdown()
                    return
                smallest = min(others, key=lambda s: len(self.workqueue[s]))
                self.workqueue.move_to_end(smallest, last=False)
            elif others:
                self.workqueue.move_to_end(others[0], last=False)
            super()._assign_work_unit(node)

        def _assign_work_unit(self, node: Any) -> None:
            held = self._held()
            if held is None:
                self._assign_next(node)
                return
            self.workqueue.move_to_end(held)
            if len(self.workqueue) > 1:
                self._assign_next(node)
                return
            keeper = self._keeper
            if keeper is None or keeper not in self.assigned_work or keeper.shutting_down:
                self._keeper = self._choose_keeper(node)
            for other in self.nodes:
                pending = self._pending_of(self.assigned_work.get(other, {}))
                if other is not self._keeper and not other.shutting_down and pending <= 1:
                    other.shutdown()
            self._release()

        def _choose_keeper(self, asking: Any) -> Any:
            """The worker that will run the held module: *asking*, unless it is still in
            a chain and another live worker is not. A keeper's last check waits for the
            held module, and a chain's last check still holds the chain's leases (its
            key, the target's clock), which another chain's worker may be waiting for:
            neither wait would end. Shut down instead, the chain's worker runs its last
            check and lets them go."""
            if not self._in_chain(asking):
                return asking
            free = (n for n in self.nodes if not n.shutting_down and not self._in_chain(n))
            return next(free, asking)

        def _reschedule(self, node: Any) -> None:
            # xdist asks for more with two checks left; a chain asks at its last only, so
            # that what follows it is decided as late as it can be (by then the free
            # workers can often take every module left, and the chain's is shut down).
            pending = self._pending_of(self.assigned_work.get(node, {}))
            if not (self.workqueue and self._in_chain(node) and pending > 1):
                super()._reschedule(node)
            self._release()

        def _release(self) -> None:
            """Give the held file to the keeper once no other worker has a check left."""
            keeper = self._keeper
            if self._held() is None or len(self.workqueue) > 1 or keeper is None:
                return
            if keeper not in self.assigned_work or keeper.shutting_down:
                return
            others = [n for n in self.nodes if n is not keeper]
            if any(self._pending_of(self.assigned_work.get(n, {})) for n in others):
                return
            super()._assign_work_unit(keeper)

    return RunScheduling


def scheduler(config: pytest.Config, log: Any) -> Any:
    """The controller's scheduler for ``--dist loadfile`` (None: xdist's own)."""
    if config.getvalue("dist") != "loadfile":
        return None
    return run_scheduling()(config, log)
