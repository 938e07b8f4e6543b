"""Settings shared by the project's own tests."""

from __future__ import annotations

import os

from hypothesis import settings

# Derandomised everywhere, not only under CI=true: a red test must be red again on rerun.
settings.register_profile(
    "project", parent=settings.get_profile("ci"), derandomize=True, database=None
)
settings.load_profile("project")


def pytest_report_header() -> str:
    namespace = os.environ.get("GENAPI_NETNS", "not set (run through scripts/test)")
    return f"network namespace: {namespace}"
