"""genapi_spec.schema_registry() and genapi_spec.validator(): what the suite and the
reference use to validate payloads against the schemas."""

from __future__ import annotations

import pytest
from referencing.exceptions import NoSuchResource

import genapi_spec

DATA: dict[str, object] = {
    "generation_id": "gen_1",
    "status": "completed",
    "type": "image",
    "model": "image-standard",
    "output_url": "https://cdn.example.com/o.png",
    "error_message": None,
    "credits_used": 4,
}
COMPLETED: dict[str, object] = {
    "id": "evt_5f0c2a9d",
    "event": "generation.completed",
    "created_at": "2026-08-01T12:00:04Z",
    "api_version": "2026-08-01",
    "webhook_id": None,
    "data": DATA,
}


def test_public_surface_is_sorted_and_exports_the_validation_helpers() -> None:
    assert genapi_spec.__all__ == sorted(genapi_spec.__all__)
    assert {"SCHEMA_BASE_URI", "schema_registry", "validator"} <= set(genapi_spec.__all__)


def test_registry_holds_every_schema_by_its_id() -> None:
    registry = genapi_spec.schema_registry()
    for name in genapi_spec.schema_names():
        uri = f"{genapi_spec.SCHEMA_BASE_URI}{name}.json"
        assert registry[uri].contents == genapi_spec.schema(name)


def test_registry_never_retrieves(no_network: None) -> None:
    """An unknown schema URI is an error, not a download."""
    with pytest.raises(NoSuchResource):
        genapi_spec.schema_registry().get_or_retrieve(
            f"{genapi_spec.SCHEMA_BASE_URI}not-a-schema.json"
        )


def test_validator_follows_cross_file_refs(no_network: None) -> None:
    """event-envelope checks `data` through event-data.json and created_at through
    timestamp.json."""
    validator = genapi_spec.validator("event-envelope")
    assert not list(validator.iter_errors(COMPLETED))
    broken = COMPLETED | {"data": DATA | {"output_url": None}}
    assert [e.json_path for e in validator.iter_errors(broken)] == ["$.data.output_url"]


def test_validator_checks_formats() -> None:
    """``format`` is asserted, not only annotated: an impossible date is rejected even
    though it matches the timestamp pattern."""
    errors = list(genapi_spec.validator("timestamp").iter_errors("2026-02-30T12:00:00Z"))
    assert [e.validator for e in errors] == ["format"]


def test_validator_is_cached_per_schema() -> None:
    assert genapi_spec.validator("usage") is genapi_spec.validator("usage")
    assert genapi_spec.validator("usage") is not genapi_spec.validator("error")


def test_schema_errors_come_ordered_by_where_they_sit() -> None:
    """The suite's messages (catalog, profile) list a document's errors in one stable order,
    whatever order the validator found them in."""
    broken = COMPLETED | {"id": 5, "data": DATA | {"output_url": None, "credits_used": "x"}}
    errors = genapi_spec.schema_errors(genapi_spec.validator("event-envelope"), broken)
    where = [genapi_spec.error_where(error.absolute_path) for error in errors]
    assert where == ["data.credits_used", "data.output_url", "id"]


def test_error_where_names_the_whole_instance_at_the_top() -> None:
    assert genapi_spec.error_where(["data", "attempts", 0]) == "data.attempts.0"
    assert genapi_spec.error_where([]) == "(top level)"
    assert genapi_spec.error_where([], top="(body)") == "(body)"
