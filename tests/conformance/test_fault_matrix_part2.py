"""The fault matrix, part 2: the rest of the faults (see ``test_fault_matrix.py``).

A module of its own so that pytest-xdist (``--dist loadfile``) runs it on another worker
than part 1. Run through ``bash scripts/test`` (each case starts the reference).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fault_matrix import (
    FAULT_RUN_TIMEOUT_S,
    PARTS,
    FaultRuns,
    RegisteredFault,
    fault_problem,
    planned_faults,
    registry,
    share,
)

#: This module's buckets of the faults (part 1 holds the others).
PART = PARTS[1]


@pytest.fixture(scope="module")
def fault_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FaultRuns]:
    """The runs of this module's selected faults, started a few ahead of their tests."""
    runs = FaultRuns(tmp_path_factory.mktemp("faults"), planned_faults(request))
    try:
        yield runs
    finally:
        runs.close()


@pytest.mark.slow
@pytest.mark.timeout(2 * FAULT_RUN_TIMEOUT_S + 60)
@pytest.mark.parametrize("fault", share(registry(), PART), ids=lambda f: f.name)
def test_fault_is_caught(fault: RegisteredFault, fault_runs: FaultRuns) -> None:
    """The reference with this one fault fails (MUST) or warns (INTERPRETATION) the
    requirement the fault names, in a run of only that requirement's checks."""
    problem = fault_problem(fault, fault_runs.result(fault))
    if problem is not None:
        pytest.fail(problem, pytrace=False)
