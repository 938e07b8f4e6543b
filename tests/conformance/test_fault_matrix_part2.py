"""The fault matrix, part 2: the rest of the faults (see ``test_fault_matrix.py``).

A module of its own so that pytest-xdist (``--dist loadfile``) runs it on another worker
than part 1. Run through ``bash scripts/test`` (each case starts the reference).
"""

from __future__ import annotations

from fault_matrix import (
    PARTS,
    fault_is_caught_test,
)

#: This module's buckets of the faults (part 1 holds the others).
PART = PARTS[1]


test_fault_is_caught = fault_is_caught_test(PART)
