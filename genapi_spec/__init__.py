"""The specification as data: the OpenAPI document, the JSON Schemas and the fixtures.

Both the suite (``conformance``) and the reference implementation (``reference``) load
the spec artifacts through this package, so neither needs to import the other. In a
wheel the artifacts sit in ``genapi_spec/data/``; in a source checkout they are read
from the top-level ``openapi/``, ``schemas/`` and ``fixtures/`` folders.

PYTEST_DONT_REWRITE: this package holds no assertions, and the suite's CLI imports it
before pytest starts (see ``conformance/__init__.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator, FormatChecker, ValidationError
from jsonschema.protocols import Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

__all__ = [
    "API_VERSION",
    "SCHEMA_BASE_URI",
    "SPEC_VERSION",
    "data_root",
    "error_where",
    "fixtures_dir",
    "load_fixture",
    "load_yaml",
    "openapi_document",
    "schema",
    "schema_errors",
    "schema_names",
    "schema_registry",
    "schemas_dir",
    "spec_text",
    "validator",
]

#: libyaml's safe loader where PyYAML was built with it: the same documents, parsed about
#: ten times faster than the pure-Python loader (the catalog is read by every run).
_SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """Parse YAML *text* with the safe loader (no Python objects), the fast one if built."""
    return yaml.load(text, Loader=_SAFE_LOADER)  # noqa: S506 - a safe loader


#: The api_version value the spec gives for event envelopes (spec §9).
API_VERSION = "2026-08-01"
#: Identifies the edition of the spec this package encodes.
SPEC_VERSION = "generation-api/2026-08-01"
#: Every schema's ``$id`` is this base plus its file name, so that a relative ``$ref``
#: such as ``"event-data.json"`` resolves the same way against the ``$id`` (in a
#: registry) as against the file's location (in the OpenAPI document's tooling).
SCHEMA_BASE_URI = "https://genapi-conformance.test/schemas/"


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
    document: dict[str, Any] = load_yaml(text)
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
    return load_yaml(text)


def spec_text() -> str:
    """The specification's Markdown text, which the catalog's section numbers refer to."""
    return (data_root() / "spec" / "generation-api.md").read_text(encoding="utf-8")


@cache
def schema_registry() -> Registry[Any]:
    """Every schema file as a :class:`referencing.Registry` keyed by ``$id``.

    Cross-file ``$ref`` s resolve from it without any retrieval: nothing is ever
    fetched over the network (the ``$id`` host is under the reserved ``.test`` TLD).
    """
    resources = [
        (f"{SCHEMA_BASE_URI}{name}.json", Resource.from_contents(schema(name), DRAFT202012))
        for name in schema_names()
    ]
    registry: Registry[Any] = Registry().with_resources(resources)
    return registry.crawl()


@cache
def validator(name: str) -> Draft202012Validator:
    """A 2020-12 validator of one schema, with cross-file refs and format checking.

    Format checking is on because ``format`` is only an annotation by default; which
    formats are checked depends on what jsonschema finds installed (``date-time`` and
    ``email`` are; ``uri`` needs an optional package, so the schemas never rely on it).
    Use ``validator(name).iter_errors(payload)`` to see every violation.
    """
    return Draft202012Validator(
        schema(name), registry=schema_registry(), format_checker=FormatChecker()
    )


def schema_errors(validator: Validator, instance: Any) -> list[ValidationError]:
    """Every way *instance* breaks *validator*'s schema, ordered by where each sits, so a
    message lists them the same way on every run (``iter_errors`` promises no order)."""
    return sorted(
        validator.iter_errors(instance),
        key=lambda error: [str(part) for part in error.absolute_path],
    )


def error_where(path: Iterable[str | int], top: str = "(top level)") -> str:
    """Where an error sits, as a dotted path (``data.output_url``); *top* for the whole
    instance."""
    return ".".join(str(part) for part in path) or top
