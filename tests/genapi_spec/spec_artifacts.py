"""Helpers for walking the spec artifacts: JSON pointers, ``$ref`` s, example files.

Plain functions (no fixtures) so that test modules can use them at collection time to
build readable parametrize ids.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import genapi_spec

#: The OpenAPI document refers to schema files by this relative prefix.
SCHEMA_REF_PREFIX = "../schemas/"

#: Keywords that only annotate; ignored when comparing subschemas for duplicates.
ANNOTATIONS = frozenset(
    {"$schema", "$id", "title", "description", "examples", "$comment", "default"}
)


def openapi_path() -> Path:
    """The OpenAPI document as a real file path (openapi-spec-validator needs a URI)."""
    return Path(str(genapi_spec.data_root() / "openapi" / "generation-api.yaml"))


def examples_root() -> Path:
    return Path(str(genapi_spec.fixtures_dir() / "examples"))


def pointer(document: Any, fragment: str) -> Any:
    """Resolve a JSON pointer (``/a/b~1c``, or ``""`` for the whole document)."""
    node = document
    if not fragment:
        return node
    for token in fragment.lstrip("/").split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, list):
            node = node[int(token)]
        else:
            node = node[token]
    return node


def walk(node: Any, path: str = "#") -> Iterator[tuple[str, Any]]:
    """Every (json-path-like location, value) in a parsed JSON/YAML tree, depth first."""
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from walk(value, f"{path}/{index}")


def refs(node: Any) -> Iterator[tuple[str, str]]:
    """Every ``$ref`` value in a tree, with its location."""
    for location, value in walk(node):
        if isinstance(value, dict) and isinstance(value.get("$ref"), str):
            yield location, value["$ref"]


def deref(document: dict[str, Any], node: Any) -> Any:
    """Follow local (``#/...``) refs of the OpenAPI document until a non-ref object."""
    for _ in range(10):  # bounded: the document has no ref chains longer than two
        if not (isinstance(node, dict) and str(node.get("$ref", "")).startswith("#")):
            return node
        node = pointer(document, node["$ref"][1:])
    raise AssertionError(f"ref chain too long at {node!r}")


def schema_file_ref(ref: str) -> tuple[str, str]:
    """Split ``../schemas/<name>.json#<pointer>`` into (schema name, pointer)."""
    assert ref.startswith(SCHEMA_REF_PREFIX), ref
    file_part, _, fragment = ref[len(SCHEMA_REF_PREFIX) :].partition("#")
    assert file_part.endswith(".json"), ref
    return file_part.removesuffix(".json"), fragment


def registry_uri(ref: str) -> str:
    """The registry URI of an OpenAPI ``../schemas/...`` ref (same file, same pointer)."""
    name, fragment = schema_file_ref(ref)
    uri = f"{genapi_spec.SCHEMA_BASE_URI}{name}.json"
    return f"{uri}#{fragment}" if fragment else uri


def example_files() -> list[tuple[str, str, Path]]:
    """(schema name, "valid" | "invalid", path) of every example file."""
    found = []
    for schema_dir in sorted(path for path in examples_root().iterdir() if path.is_dir()):
        for kind in ("valid", "invalid"):
            for path in sorted((schema_dir / kind).glob("*.json")):
                found.append((schema_dir.name, kind, path))
    return found


def load_example(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def strip_annotations(node: Any) -> Any:
    """A subschema without its annotation keywords, for comparing two subschemas."""
    if isinstance(node, dict):
        return {k: strip_annotations(v) for k, v in node.items() if k not in ANNOTATIONS}
    if isinstance(node, list):
        return [strip_annotations(v) for v in node]
    return node
