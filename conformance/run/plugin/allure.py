"""Allure labels of a check: feature = area, story = requirement id, a link to the spec."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from conformance.catalog import Catalog

__all__ = ["allure_labels", "spec_anchor"]


def allure_labels(catalog: Catalog, ids: Sequence[str]) -> None:
    import allure  # only when allure-pytest is active

    dynamic: Any = allure.dynamic  # untyped library

    for requirement_id in ids:
        requirement = catalog[requirement_id]
        dynamic.feature(requirement.area)
        dynamic.story(requirement.id)
        dynamic.link(
            f"spec/generation-api.md#{spec_anchor(requirement.heading)}",
            name=f"spec §{requirement.section} {requirement.heading}",
        )


def spec_anchor(heading: str) -> str:
    """The GitHub-style anchor of a Markdown heading."""
    kept = "".join(c for c in heading.lower() if c.isalnum() or c in " -_")
    return kept.strip().replace(" ", "-")
