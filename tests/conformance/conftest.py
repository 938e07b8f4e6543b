"""Fixtures of the fault matrix modules (``test_fault_matrix*.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fault_matrix import FaultRuns, planned_faults


@pytest.fixture(scope="module")
def fault_runs(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FaultRuns]:
    """The runs of the module's selected faults, started a few ahead of their tests."""
    runs = FaultRuns(tmp_path_factory.mktemp("faults"), planned_faults(request))
    try:
        yield runs
    finally:
        runs.close()
