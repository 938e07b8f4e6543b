"""Settings shared by the project's own tests."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

# Derandomised everywhere, not only under CI=true: a red test must be red again on rerun.
settings.register_profile(
    "project", parent=settings.get_profile("ci"), derandomize=True, database=None
)
settings.load_profile("project")


def pytest_report_header() -> str:
    namespace = os.environ.get("GENAPI_NETNS", "not set (run through scripts/test)")
    return f"network namespace: {namespace}"


def _declared_seconds(item: pytest.Item) -> float:
    """The time limit a test declares with ``@pytest.mark.timeout`` (0 without one)."""
    marker = item.get_closest_marker("timeout")
    return float(marker.args[0]) if marker is not None and marker.args else 0.0


def _slow(item: pytest.Item) -> bool:
    return item.get_closest_marker("slow") is not None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The modules that declare the longest time limits first, then those with tests
    marked ``slow``, the others after them by their number of tests; each module's tests
    in their own order.

    CI runs the tests on xdist workers a module at a time (``--dist loadfile``), in this
    order (``scripts/check`` turns xdist's own reordering off). xdist would sort by the
    number of tests alone and so hand out the longest test, a full run of the suite
    against the reference's variant (a module of seven tests), after every module with
    more tests. A test that runs the suite declares a limit for it, and the
    limits rank the modules by how long they may take. Tests that mostly wait (on real
    deliveries, on processes) are marked ``slow``: started while the cores are busy with
    the long runs, their waits cost nothing, where at the end of the session they left the
    cores half idle; the short modules that only compute end it instead.
    """
    by_module: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_module.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    ranked = sorted(
        by_module.values(),
        key=lambda tests: (
            -sum(map(_declared_seconds, tests)),
            -sum(map(_slow, tests)),
            -len(tests),
        ),
    )
    items[:] = [item for tests in ranked for item in tests]
