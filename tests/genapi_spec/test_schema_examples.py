"""The schema examples: every schema has several valid and invalid instances; valid ones
pass, and each invalid one fails on exactly the rule it names (its declared keyword)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from spec_artifacts import example_files, examples_root, load_example

import genapi_spec

EXAMPLES = example_files()
VALID = [pytest.param(s, p, id=f"{s}/{p.stem}") for s, kind, p in EXAMPLES if kind == "valid"]
INVALID = [pytest.param(s, p, id=f"{s}/{p.stem}") for s, kind, p in EXAMPLES if kind == "invalid"]
ALL = [pytest.param(s, k, p, id=f"{s}/{k}/{p.stem}") for s, k, p in EXAMPLES]
KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@pytest.mark.parametrize("name", genapi_spec.schema_names())
def test_every_schema_has_several_valid_and_invalid_examples(name: str) -> None:
    """At least two valid and two invalid instances per schema."""
    directory = examples_root() / name
    assert len(list((directory / "valid").glob("*.json"))) >= 2, name
    assert len(list((directory / "invalid").glob("*.json"))) >= 2, name


def test_every_example_folder_names_a_schema() -> None:
    """No examples for a schema that does not exist (a renamed or deleted file)."""
    folders = {path.name for path in examples_root().iterdir() if path.is_dir()}
    assert folders == set(genapi_spec.schema_names())


@pytest.mark.parametrize(("schema", "kind", "path"), ALL)
def test_example_file_shape(schema: str, kind: str, path: Path) -> None:
    """Valid files hold ``{"instance"}``; invalid ones also name the broken rule in words
    (``breaks``) and the keyword expected to fail; file names are kebab-case."""
    content = load_example(path)
    assert KEBAB.match(path.stem), path.name
    if kind == "valid":
        assert set(content) == {"instance"}, path
        return
    assert set(content) == {"breaks", "keyword", "instance"}, path
    assert isinstance(content["breaks"], str) and len(content["breaks"]) > 5
    assert content["keyword"] in Draft202012Validator.VALIDATORS or content["keyword"] == "format"


@pytest.mark.parametrize(("schema", "path"), VALID)
def test_valid_example_passes(schema: str, path: Path) -> None:
    """The instance satisfies the schema (with cross-file refs and format checking)."""
    errors = list(genapi_spec.validator(schema).iter_errors(load_example(path)["instance"]))
    assert not errors, [f"{e.json_path}: {e.message}" for e in errors]


@pytest.mark.parametrize(("schema", "path"), INVALID)
def test_invalid_example_fails_on_its_named_rule(schema: str, path: Path) -> None:
    """The instance fails; the declared keyword is among the failing keywords, and every
    failure sits at one location (one rule broken, e.g. ``pattern`` and ``format`` of
    the same timestamp)."""
    content = load_example(path)
    errors = list(genapi_spec.validator(schema).iter_errors(content["instance"]))
    assert errors, f"{path.name} passes, but should break: {content['breaks']}"
    keywords = {str(error.validator) for error in errors}
    locations = {error.json_path for error in errors}
    assert content["keyword"] in keywords, (content["keyword"], keywords)
    assert len(locations) == 1, f"more than one rule broken: {sorted(locations)}"
