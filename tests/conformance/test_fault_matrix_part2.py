"""The fault matrix, part 2: the rest of the faults (see ``test_fault_matrix.py``).

A module of its own so that pytest-xdist (``--dist loadfile``) runs it on another worker
than part 1. Run through ``bash scripts/test`` (each case starts the reference).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fault_matrix import RegisteredFault, fault_problem, registry, run_suite, share

#: This module's part of the faults (part 1 holds the other).
PART = 1


@pytest.mark.slow
@pytest.mark.parametrize("fault", share(registry(), PART, 2), ids=lambda f: f.name)
def test_fault_is_caught(fault: RegisteredFault, tmp_path: Path) -> None:
    """The reference with this one fault fails (MUST) or warns (INTERPRETATION) the
    requirement the fault names, in a run of only that requirement's checks."""
    run = run_suite(
        tmp_path / "report", faults=[fault.name], only=[fault.requirement_id], workers=0
    )
    problem = fault_problem(fault, run)
    if problem is not None:
        pytest.fail(problem, pytrace=False)
