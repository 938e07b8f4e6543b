"""The OpenAPI document as a document: valid OpenAPI 3.1, every ``$ref`` resolvable, no
schema inlined that exists as a file, and every example valid against its schema."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker
from openapi_spec_validator import validate
from spec_artifacts import (
    SCHEMA_REF_PREFIX,
    deref,
    openapi_path,
    pointer,
    refs,
    registry_uri,
    schema_file_ref,
    walk,
)

import genapi_spec

DOCUMENT = genapi_spec.openapi_document()


def test_document_is_valid_openapi_3_1(no_network: None) -> None:
    """openapi-spec-validator (3.1) accepts it, following the file refs from its path."""
    assert DOCUMENT["openapi"] == "3.1.0"
    validate(DOCUMENT, base_uri=openapi_path().resolve().as_uri())


def _all_refs() -> list[Any]:
    return [pytest.param(ref, id=f"{location}:{ref}") for location, ref in refs(DOCUMENT)]


@pytest.mark.parametrize("ref", _all_refs())
def test_ref_resolves(ref: str) -> None:
    """A local ref points into the document; a file ref names a schema file that exists
    and, with a fragment, a node inside it."""
    if ref.startswith("#"):
        assert pointer(DOCUMENT, ref[1:]) is not None
        return
    assert ref.startswith(SCHEMA_REF_PREFIX), f"refs leave the document only to ../schemas/: {ref}"
    name, fragment = schema_file_ref(ref)
    assert name in genapi_spec.schema_names(), ref
    assert pointer(genapi_spec.schema(name), fragment) is not None


def _inline_schemas() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for location, node in walk(DOCUMENT):
        if location.endswith("/schema") and isinstance(node, dict) and "$ref" not in node:
            found.append((location, node))
    return found


def test_no_inline_object_schema() -> None:
    """Bodies are schema files, referred to by ``$ref``; only scalar parameter and header
    schemas (a path id, the limit) are written inline."""
    inline = _inline_schemas()
    assert inline, "the walk found no inline schema at all: the test would prove nothing"
    for location, node in inline:
        assert node.get("type") in {"string", "integer"}, location
        assert not {"properties", "items", "allOf", "anyOf", "oneOf"} & set(node), location


def test_every_body_schema_is_a_schema_file() -> None:
    """Every media type's schema is a ``../schemas/`` ref (never a local components copy)."""
    media_schemas = [
        (location, node)
        for location, node in walk(DOCUMENT)
        if "/content/" in location and location.endswith("/schema")
    ]
    assert len(media_schemas) > 20
    for location, node in media_schemas:
        assert str(node.get("$ref", "")).startswith(SCHEMA_REF_PREFIX), location


def _media_examples() -> list[Any]:
    """(schema ref, example value) for every example of every media type object."""
    params = []
    for location, node in walk(DOCUMENT):
        if not (isinstance(node, dict) and "/content/" in location and "schema" in node):
            continue
        ref = node["schema"]["$ref"]
        if "example" in node:
            params.append(pytest.param(ref, node["example"], id=f"{location}/example"))
        for key, example in node.get("examples", {}).items():
            example = deref(DOCUMENT, example)
            params.append(pytest.param(ref, example["value"], id=f"{location}/examples/{key}"))
    return params


MEDIA_EXAMPLES = _media_examples()


def test_requests_and_responses_carry_examples() -> None:
    """Examples exist on request bodies, responses and deliveries alike."""
    ids = [p.id or "" for p in MEDIA_EXAMPLES]
    assert any("/requestBody/" in i and i.startswith("#/paths") for i in ids)
    assert any("/responses/" in i for i in ids)
    assert any(i.startswith("#/webhooks") for i in ids)
    assert len(ids) >= 30


@pytest.mark.parametrize(("ref", "value"), MEDIA_EXAMPLES)
def test_media_example_matches_its_schema(ref: str, value: Any) -> None:
    """Each example validates against its media type's schema (2020-12, cross-file refs,
    format checking). Redocly cannot check these (see redocly.yaml); this test does."""
    validator = Draft202012Validator(
        {"$ref": registry_uri(ref)},
        registry=genapi_spec.schema_registry(),
        format_checker=FormatChecker(),
    )
    errors = list(validator.iter_errors(value))
    assert not errors, [f"{e.json_path}: {e.message}" for e in errors]


def test_servers_use_the_base_url_variable() -> None:
    """Spec: "Base address: {base_url}"; the server URL is that variable alone."""
    (server,) = DOCUMENT["servers"]
    assert server["url"] == "{base_url}"
    assert server["variables"]["base_url"]["default"].startswith("http")


def test_security_schemes_are_key_bearer_and_session_jwt() -> None:
    """Spec §5: API keys are bearer tokens on /v1; the console takes a session JWT."""
    schemes = DOCUMENT["components"]["securitySchemes"]
    assert schemes["apiKey"] == schemes["apiKey"] | {"type": "http", "scheme": "bearer"}
    assert schemes["consoleSession"]["type"] == "http"
    assert schemes["consoleSession"]["scheme"] == "bearer"
    assert schemes["consoleSession"]["bearerFormat"] == "JWT"
    assert DOCUMENT["security"] == [{"apiKey": []}]


def test_operation_ids_are_unique() -> None:
    ids = [
        operation["operationId"]
        for section in ("paths", "webhooks")
        for item in DOCUMENT[section].values()
        for method, operation in item.items()
        if method in {"get", "post", "put", "patch", "delete"}
    ]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


def test_every_tag_used_is_declared_and_described() -> None:
    declared = {tag["name"]: tag.get("description", "") for tag in DOCUMENT["tags"]}
    assert all(description.strip() for description in declared.values())
    used = {
        tag
        for section in ("paths", "webhooks")
        for item in DOCUMENT[section].values()
        for method, operation in item.items()
        if method in {"get", "post", "delete"}
        for tag in operation["tags"]
    }
    assert used == set(declared)
