"""The suite against the reference's variant, which takes the other legitimate side of
every choice the spec leaves open (``serve --variant``; the catalog's ``choices``).

The whole run is driven through the profile the variant provisions, as a user would point
the suite at a deployment with other console paths, another header brand word and another
secret keying: no code change, only the profile. It must give no MUST failure, and every
warning must belong to a catalogued choice. Run through ``bash scripts/test``: it starts
the reference.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from suite_run import run_suite

from conformance.catalog import CatalogError, load_catalog, parse_catalog
from conformance.run.cli import EXIT_OK, EXIT_USAGE, main
from conformance.run.launcher import EmbeddedReference

# -- the catalog's choices ---------------------------------------------------------------------

_MINIMAL = """
spec: {title: t, edition: e/2026-08-01, source: s, api_version: "2026-08-01"}
areas: {AUTH: auth}
choices:
  - {id: bad-key-status, name: n, spec: s, requirements: [%s], reference: a, variant: b}
requirements:
  - id: AUTH-STATUS-01
    section: "7"
    heading: Errors
    statement: A missing key is answered 401.
    level: INTERPRETATION
    needs: [black-box]
    notes: Not shown.
"""


def test_every_choice_names_requirements_the_catalog_holds() -> None:
    catalog = load_catalog()
    assert catalog.choices
    for choice in catalog.choices:
        assert choice.requirements and not catalog.unknown(choice.requirements), choice.id


def test_a_choice_naming_an_unknown_requirement_does_not_load() -> None:
    assert parse_catalog(_MINIMAL % "AUTH-STATUS-01").choices[0].id == "bad-key-status"
    with pytest.raises(CatalogError, match="AUTH-STATUS-99"):
        parse_catalog(_MINIMAL % "AUTH-STATUS-99")


def test_a_choice_whose_spec_words_are_not_in_the_spec_does_not_load() -> None:
    assert parse_catalog(_MINIMAL % "AUTH-STATUS-01", spec="a s b").choices
    with pytest.raises(CatalogError, match="spec words not found"):
        parse_catalog(_MINIMAL % "AUTH-STATUS-01", spec="nothing here")


def test_choices_of_a_requirement() -> None:
    ids = {choice.id for choice in load_catalog().choices_of("AUTH-STATUS-01")}
    assert "bad-key-status" in ids


# -- the flag ---------------------------------------------------------------------------------


def test_launcher_starts_the_variant(tmp_path: Path) -> None:
    assert "--variant" in EmbeddedReference(variant=True).argv(tmp_path)
    assert "--variant" not in EmbeddedReference().argv(tmp_path)


def test_run_variant_with_a_profile_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = tmp_path / "p.toml"
    profile.write_text('base_url = "http://127.0.0.1:1"\n', encoding="utf-8")
    assert main(["run", "--variant", "--profile", str(profile)]) == EXIT_USAGE
    assert "--variant applies only to the embedded reference" in capsys.readouterr().err


# -- the whole run ------------------------------------------------------------------------------


def _differs_from_the_reference(profile: dict[str, Any]) -> None:
    """The variant's profile declares what a deployment unlike the reference declares."""
    assert profile["wire"]["header_brand"] != "Service"
    assert profile["wire"]["secret_keying"] != "utf8"
    assert profile["adapter"]["login"]["path"] != "/api/session"


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_run_against_the_variant_gives_no_must_failure(tmp_path: Path) -> None:
    """Every MUST passes (or is skipped or untested) against the variant, and every
    warning is a requirement one of the catalog's choices bears on."""
    with EmbeddedReference(variant=True) as profile:
        _differs_from_the_reference(tomllib.loads(profile.read_text(encoding="utf-8")))
        run = run_suite(tmp_path / "report", "--profile", str(profile), timeout=1100)
    verdicts = run.verdicts()
    assert run.returncode == EXIT_OK, (
        {i: v for i, v in verdicts.items() if v in ("fail", "error")},
        run.stdout[-3000:],
    )
    results: dict[str, Any] = run.results or {}
    catalog = load_catalog()
    unexplained = [i for i, v in verdicts.items() if v == "warn" and not catalog.choices_of(i)]
    assert unexplained == []
    assert results["counts"].get("warn", 0) >= 10, "the variant differs: its choices warn"
