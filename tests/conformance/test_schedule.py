"""The run's scheduler under pytest-xdist (``conformance/run/plugin/schedule.py``),
driven with simulated workers: the chains start first, one per worker, while one worker
at least is left to the other modules; the run-wide check of GEN-CONSIST-01 runs after
every other check."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from conformance.run.plugin.channels import LAST_MODULE
from conformance.run.plugin.schedule import CHAIN_MODULES, run_scheduling


class _Node:
    """A worker as xdist drives it: it runs a check only once it knows the next one or
    that none follows (shut down)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.gateway = SimpleNamespace(id=name)
        self.queue: list[int] = []
        self.ran = 0
        self.shutting_down = False

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.queue.extend(indexes)

    def shutdown(self) -> None:
        self.shutting_down = True

    def can_run(self) -> bool:
        return self.ran < len(self.queue) and (self.ran + 1 < len(self.queue) or self.shutting_down)

    def __repr__(self) -> str:
        return self.name


def _config(workers: int) -> Any:
    values = {"tx": [f"{workers}*popen"], "dist": "loadfile"}
    return SimpleNamespace(
        getvalue=values.__getitem__, option=SimpleNamespace(loadscopereorder=False)
    )


def _scheduled(collection: list[str], workers: int) -> tuple[Any, list[_Node]]:
    """The scheduler and its simulated workers, once the first modules are handed out."""
    scheduler = run_scheduling()(_config(workers))
    nodes = [_Node(f"gw{i}") for i in range(workers)]
    for node in nodes:
        scheduler.add_node(node)
    for node in nodes:
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    return scheduler, nodes


def _run(collection: list[str], workers: int, prefer: int) -> list[str]:
    """Drive the scheduler to the end; the node ids in the order they completed. Node
    *prefer* runs whenever it can (the others are slower)."""
    scheduler, nodes = _scheduled(collection, workers)
    order: list[str] = []
    for _ in range(10 * len(collection)):
        ready = [n for n in nodes[prefer:] + nodes[:prefer] if n.can_run()]
        if not ready:
            break
        node = ready[0]
        index = node.queue[node.ran]
        node.ran += 1
        order.append(collection[index])
        scheduler.mark_test_complete(node, index)
    assert scheduler.tests_finished
    return order


LAST = f"checks/{LAST_MODULE}"
COLLECTION = [
    "checks/test_a.py::test_1",
    "checks/test_a.py::test_2",
    f"{LAST}::test_state",
    f"{LAST}::test_run_wide",
    "checks/test_b.py::test_1",
    "checks/test_c.py::test_1",
    "checks/test_c.py::test_2",
    "checks/test_c.py::test_3",
    "checks/test_d.py::test_1",
]


@pytest.mark.parametrize("workers", [1, 2, 3])
@pytest.mark.parametrize("prefer", [0, 1])
def test_scheduler_runs_the_last_module_after_every_other_check(workers: int, prefer: int) -> None:
    order = _run(COLLECTION, workers, prefer % workers)
    assert sorted(order) == sorted(COLLECTION), "every check runs once"
    assert order[-2:] == [f"{LAST}::test_state", f"{LAST}::test_run_wide"]


def test_scheduler_runs_the_last_module_alone() -> None:
    only = [f"{LAST}::test_state", f"{LAST}::test_run_wide"]
    assert _run(only, 2, 0) == only


def test_scheduler_without_the_last_module_is_loadfile() -> None:
    others = [nodeid for nodeid in COLLECTION if LAST not in nodeid]
    assert sorted(_run(others, 2, 1)) == sorted(others)


# -- the chains ----------------------------------------------------------------------------

LONG, MINUTE = (f"checks/{name}" for name in CHAIN_MODULES[:2])
WITH_CHAINS = [
    "checks/test_a.py::test_1",
    "checks/test_a.py::test_2",
    "checks/test_a.py::test_3",
    "checks/test_a.py::test_4",
    f"{LONG}::test_roll",
    "checks/test_b.py::test_1",
    f"{MINUTE}::test_1",
    f"{MINUTE}::test_2",
    f"{MINUTE}::test_3",
    f"{MINUTE}::test_4",
    "checks/test_c.py::test_1",
    "checks/test_c.py::test_2",
    "checks/test_d.py::test_1",
    "checks/test_e.py::test_1",
    "checks/test_e.py::test_2",
    "checks/test_e.py::test_3",
]


def _first_units(collection: list[str], workers: int) -> dict[str, list[str]]:
    """Each simulated worker's modules as first handed out (before any check ran)."""
    _, nodes = _scheduled(collection, workers)
    modules: dict[str, list[str]] = {}
    for node in nodes:
        for index in node.queue:
            module = collection[index].split("::")[0]
            if module not in modules.setdefault(node.name, []):
                modules[node.name].append(module)
    return modules


def test_chains_start_first_each_on_its_own_worker() -> None:
    units = _first_units(WITH_CHAINS, 4)
    assert units["gw0"][0] == LONG and units["gw1"][0] == MINUTE, units
    assert all(units[f"gw{i}"][0] not in (LONG, MINUTE) for i in (2, 3)), units


def test_a_worker_is_always_left_to_the_other_modules() -> None:
    units = _first_units(WITH_CHAINS, 2)
    assert units["gw0"][0] == LONG, units
    assert units["gw1"][0] not in (LONG, MINUTE), "two workers: one for the chains"


def test_a_chain_at_its_last_check_queues_the_smallest_module() -> None:
    units = _first_units(WITH_CHAINS, 4)
    # LONG is one check, so its worker knows its next module at once: the smallest.
    assert units["gw0"] == [LONG, "checks/test_d.py"], units


def _step(scheduler: Any, node: _Node) -> None:
    index = node.queue[node.ran]
    node.ran += 1
    scheduler.mark_test_complete(node, index)


def test_a_chain_at_its_last_checks_is_shut_down_when_free_workers_can_take_the_rest() -> None:
    scheduler, nodes = _scheduled(WITH_CHAINS, 4)
    chain_node = nodes[1]
    assert WITH_CHAINS[chain_node.queue[0]].startswith(MINUTE)
    # the free workers work until one module is left for them to take
    for _ in range(len(WITH_CHAINS)):
        ready = [n for n in nodes[2:] if n.can_run()]
        if len(scheduler.workqueue) <= 1 or not ready:
            break
        _step(scheduler, ready[0])
    assert len(scheduler.workqueue) == 1
    for _ in range(2):  # two checks left: a chain does not ask for its next yet
        _step(scheduler, chain_node)
    assert not chain_node.shutting_down and len(chain_node.queue) == 4
    _step(scheduler, chain_node)  # its last check: now it asks
    assert chain_node.shutting_down, "no module queued behind the chain's end"
    assert all(WITH_CHAINS[i].startswith(MINUTE) for i in chain_node.queue)
    assert len(scheduler.workqueue) == 1, "the module left is for a free worker"


def test_a_chain_at_its_last_check_is_not_kept_for_the_last_module() -> None:
    """When only the run-wide module is left, a chain's worker at its last check is shut
    down and a free worker waits for that module: the chain's last check still holds its
    leases (the target's clock), which another chain's worker may be waiting for, and a
    kept worker's last check waits for the run-wide module, which waits for every other
    check: a run seen hanging so in a soak."""
    collection = [f"{LONG}::test_1", f"{LONG}::test_2"]
    collection += [f"checks/test_b.py::test_{n}" for n in (1, 2, 3)]
    collection.append(f"{LAST}::test_run_wide")
    scheduler, nodes = _scheduled(collection, 2)
    chain_node, free_node = nodes
    assert collection[chain_node.queue[0]].startswith(LONG)
    assert len(free_node.queue) == 3, "the free worker is busy with the other module"
    _step(scheduler, chain_node)  # down to its last check, with only the last module left
    assert chain_node.shutting_down, "a chain's worker is not kept for the last module"
    assert not free_node.shutting_down
    while chain_node.can_run():
        _step(scheduler, chain_node)
    while free_node.can_run():
        _step(scheduler, free_node)
    assert [collection[i] for i in free_node.queue][-1] == f"{LAST}::test_run_wide"
    assert scheduler.tests_finished


@pytest.mark.parametrize("workers", [1, 2, 3, 5])
@pytest.mark.parametrize("prefer", [0, 1])
def test_every_check_runs_once_with_chains(workers: int, prefer: int) -> None:
    collection = [*WITH_CHAINS, f"{LAST}::test_run_wide"]
    order = _run(collection, workers, prefer % workers)
    assert sorted(order) == sorted(collection)
    assert order[-1] == f"{LAST}::test_run_wide"


def test_every_chain_module_exists() -> None:
    checks = Path(__file__).resolve().parents[2] / "conformance" / "checks"
    assert [name for name in CHAIN_MODULES if not (checks / name).is_file()] == []
