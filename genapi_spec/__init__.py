"""The specification as data: the OpenAPI document, the JSON Schemas and the fixtures.

Both the suite (``conformance``) and the reference implementation (``reference``) load
the spec artifacts through this package, so neither needs to import the other. In a
wheel the artifacts sit in ``genapi_spec/data/``; in a source checkout they are read
from the top-level ``openapi/``, ``schemas/`` and ``fixtures/`` folders.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "API_VERSION",
    "SPEC_VERSION",
    "data_root",
    "fixtures_dir",
    "load_fixture",
    "openapi_document",
    "schema",
    "schema_names",
    "schemas_dir",
    "spec_text",
]

#: The api_version value the spec gives for event envelopes (spec §9).
API_VERSION = "2026-08-01"
#: Identifies the edition of the spec this package encodes.
SPEC_VERSION = "generation-api/2026-08-01"


def data_root() -> Traversable:
    """The folder that holds ``openapi/``, ``schemas/`` and ``fixtures/``."""
    packaged = resources.files(__name__) / "data"
    if packaged.is_dir():
        return packaged
    # Source checkout: the artifacts live at the top of the repository.
    return Path(__file__).resolve().parent.parent


def schemas_dir() -> Traversable:
    return data_root() / "schemas"


def fixtures_dir() -> Traversable:
    return data_root() / "fixtures"


@cache
def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document, parsed (``$ref`` to schema files left unresolved)."""
    text = (data_root() / "openapi" / "generation-api.yaml").read_text(encoding="utf-8")
    document: dict[str, Any] = yaml.safe_load(text)
    return document


def schema_names() -> list[str]:
    """Names of every schema file, without the ``.json`` suffix."""
    return sorted(
        entry.name.removesuffix(".json")
        for entry in schemas_dir().iterdir()
        if entry.name.endswith(".json")
    )


@cache
def schema(name: str) -> dict[str, Any]:
    """One JSON Schema (2020-12) by file name, e.g. ``schema("event-envelope")``."""
    loaded: dict[str, Any] = json.loads(
        (schemas_dir() / f"{name}.json").read_text(encoding="utf-8")
    )
    return loaded


def load_fixture(relative_path: str) -> Any:
    """A YAML or JSON fixture file under ``fixtures/``, parsed."""
    entry = fixtures_dir()
    for part in relative_path.split("/"):
        entry = entry / part
    text = entry.read_text(encoding="utf-8")
    if relative_path.endswith(".json"):
        return json.loads(text)
    return yaml.safe_load(text)


def spec_text() -> str:
    """The specification's Markdown text, which the catalog's section numbers refer to."""
    return (data_root() / "spec" / "generation-api.md").read_text(encoding="utf-8")
