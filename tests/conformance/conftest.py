"""Fixtures shared by the suite's own tests: the module's parsed ``PROFILE``, a receiver
per module, and the runs of the fault matrix modules (``test_fault_matrix*.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fault_matrix import FaultRuns, planned_faults

from conformance.observe.receiver import Receiver
from conformance.target.profile import Profile, parse_profile


@pytest.fixture
def profile(request: pytest.FixtureRequest) -> Profile:
    """The test module's ``PROFILE`` text, parsed without an environment."""
    text: str = request.module.PROFILE
    return parse_profile(text, env={})


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    """The suite's receiver on a free loopback port, one for the module's tests."""
    with Receiver() as server:
        yield server


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
