"""The requirements catalog is complete, well-formed and honest about interpretations.

These tests hold the catalog to the spec text itself: every section that states a rule
has entries, every entry points at a real heading, and nothing the spec leaves "not
shown" is catalogued as a MUST.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections import Counter
from dataclasses import dataclass
from importlib import resources
from typing import Any

import pytest
import yaml
from jsonschema import Draft202012Validator

import conformance.catalog as catalog_module
from conformance.catalog import (
    ID_PATTERN,
    Catalog,
    CatalogError,
    Level,
    Need,
    Party,
    catalog_schema,
    load_catalog,
    normalise_space,
    parse_catalog,
    unknown_ids,
)
from genapi_spec import API_VERSION, SPEC_VERSION, spec_text


def _raw_catalog() -> dict[str, Any]:
    """The shipped YAML, parsed but not through the loader (so the loader is not trusted)."""
    text = resources.files("conformance").joinpath("requirements.yaml").read_text("utf-8")
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def _spec_sections() -> dict[tuple[str, str], list[str]]:
    """(section number, heading text) -> the non-blank body lines under that heading.

    A ``## N. Title`` heading opens section N with heading ``Title``; a ``### Title``
    heading opens heading ``Title`` inside the current section.
    """
    sections: dict[tuple[str, str], list[str]] = {}
    current: tuple[str, str] | None = None
    number: str | None = None
    for line in spec_text().splitlines():
        top = re.match(r"^## (\d+)\. (.+?)\s*$", line)
        sub = re.match(r"^### (.+?)\s*$", line)
        if top:
            number = top[1]
            current = (number, top[2])
            sections[current] = []
        elif sub:
            assert number is not None, f"### heading before any numbered section: {line}"
            current = (number, sub[1])
            sections[current] = []
        elif line.startswith("# "):
            current = None
        elif current is not None and line.strip():
            sections[current].append(line)
    return sections


# ---------------------------------------------------- the shipped catalog


def test_catalog_schema_is_valid_json_schema_2020_12() -> None:
    Draft202012Validator.check_schema(catalog_schema())


def test_shipped_catalog_validates_against_schema() -> None:
    errors = list(Draft202012Validator(catalog_schema()).iter_errors(_raw_catalog()))
    assert not errors, [e.message for e in errors]


def test_shipped_catalog_loads_with_more_than_100_requirements() -> None:
    catalog = load_catalog()
    assert isinstance(catalog, Catalog)
    assert len(catalog) > 100


def test_catalog_has_both_levels() -> None:
    by_level = load_catalog().by_level()
    assert by_level[Level.MUST]
    assert by_level[Level.INTERPRETATION]


def test_catalog_spec_metadata_names_this_edition() -> None:
    spec = load_catalog().spec
    assert spec["edition"] == SPEC_VERSION
    assert spec["api_version"] == API_VERSION
    assert spec_text().startswith(f"# {spec['title']}\n")


def test_ids_are_unique_in_the_file() -> None:
    ids = [entry["id"] for entry in _raw_catalog()["requirements"]]
    duplicates = [i for i, count in Counter(ids).items() if count > 1]
    assert duplicates == []


def test_ids_are_well_formed() -> None:
    bad = [r.id for r in load_catalog() if not ID_PATTERN.fullmatch(r.id)]
    assert bad == []


def test_every_id_prefix_is_a_declared_area() -> None:
    catalog = load_catalog()
    undeclared = [r.id for r in catalog if r.id.split("-")[0] not in catalog.areas]
    assert undeclared == []
    assert all(r.area == r.id.split("-")[0] for r in catalog)


def test_every_declared_area_has_requirements() -> None:
    empty = [area for area, members in load_catalog().by_area().items() if not members]
    assert empty == []


def test_every_entry_cites_a_real_spec_heading() -> None:
    headings = set(_spec_sections())
    wrong = [
        f"{r.id}: §{r.section} {r.heading!r}"
        for r in load_catalog()
        if (r.section, r.heading) not in headings
    ]
    assert wrong == []


def _rule_stating_sections() -> list[tuple[str, str]]:
    """Every heading of §1-§9 with text of its own (a heading whose only content is
    subheadings, such as "Resources and their fields", states nothing itself)."""
    return [key for key, body in _spec_sections().items() if body]


@pytest.mark.parametrize(
    "section",
    _rule_stating_sections(),
    ids=lambda key: f"§{key[0]}-{key[1]}",
)
def test_every_rule_stating_section_has_entries(section: tuple[str, str]) -> None:
    covered = {(r.section, r.heading) for r in load_catalog()}
    assert section in covered, f"no requirement cites §{section[0]} {section[1]!r}"


def test_rule_stating_sections_include_every_numbered_section() -> None:
    # Guards the parser above: if it found fewer sections, the coverage test would pass
    # vacuously.
    numbers = {number for number, _ in _rule_stating_sections()}
    assert numbers == {str(n) for n in range(1, 10)}
    assert len(_rule_stating_sections()) >= 25


def test_statements_are_single_spaced_lines() -> None:
    for requirement in load_catalog():
        assert "\n" not in requirement.statement
        assert "  " not in requirement.statement
        assert requirement.statement.endswith((".", ")")), requirement.id


def test_ids_mentioned_in_statements_and_notes_exist() -> None:
    # Cross-references such as "its value: VER-ENV-02" or "(REDLV-REBIND-*)" must not
    # dangle after an entry is renamed.
    catalog = load_catalog()
    mention = re.compile(r"\b([A-Z]+-[A-Z0-9]+-(?:[0-9]{2}|\*))")
    dangling = []
    for requirement in catalog:
        for text in (requirement.statement, requirement.notes or ""):
            for cited in mention.findall(text):
                prefix = cited.removesuffix("*")
                found = (
                    any(i.startswith(prefix) for i in catalog.ids)
                    if cited.endswith("*")
                    else cited in catalog
                )
                if not found:
                    dangling.append(f"{requirement.id} -> {cited}")
    assert dangling == []


def test_interpretations_say_why() -> None:
    missing = [r.id for r in load_catalog() if r.is_interpretation and not r.notes]
    assert missing == []


def test_black_box_stands_alone_in_needs() -> None:
    mixed = [r.id for r in load_catalog() if Need.BLACK_BOX in r.needs and len(r.needs) > 1]
    assert mixed == []


def test_client_duties_are_marked_as_such() -> None:
    # Statements about receivers and client code are never held against an IUT.
    client = {r.id for r in load_catalog() if r.party is Party.CLIENT}
    assert {"SIG-RECV-01", "SIG-RECV-02", "DLV-DEDUPE-01", "RATE-CLIENT-01"} <= client


# ---------------------------------------------------- quotes


def test_every_quote_occurs_in_the_spec() -> None:
    # Read from the raw YAML, so that a loader that skipped the check would not hide a
    # misquote; whitespace is collapsed on both sides (spec sentences wrap across lines).
    spec = " ".join(spec_text().split())
    misquoted = []
    for entry in _raw_catalog()["requirements"]:
        quote = entry.get("quote", [])
        for text in [quote] if isinstance(quote, str) else quote:
            if " ".join(text.split()) not in spec:
                misquoted.append(f"{entry['id']}: {text!r}")
    assert misquoted == [], "quotes not found in spec/generation-api.md:\n" + "\n".join(misquoted)


def test_shipped_catalog_has_quotes() -> None:
    # Guards the test above against passing vacuously.
    assert sum(len(r.quotes) for r in load_catalog()) > 0


def test_unquoted_musts_of_the_shipped_catalog_are_musts_without_quotes() -> None:
    catalog = load_catalog()
    unquoted = catalog.unquoted_musts()
    assert all(r.level is Level.MUST and not r.quotes for r in unquoted)
    expected = [r.id for r in catalog if r.level is Level.MUST and not r.quotes]
    assert [r.id for r in unquoted] == expected


def test_normalise_space_collapses_every_run_of_whitespace() -> None:
    assert normalise_space("  a\n  b\t\tc \r\n") == "a b c"


# ---------------------------------------------------- "not shown" stays INTERPRETATION


@dataclass(frozen=True)
class NotShown:
    """One thing the spec leaves unshown.

    ``fragment`` identifies the spec line; ``ids`` are the entries that record what the
    suite assumes about it (each must be INTERPRETATION); a MUST statement matching
    ``forbidden`` would be a rule built on the unshown item, as ``example`` is.
    """

    fragment: str
    ids: tuple[str, ...]
    forbidden: str
    example: str


NOT_SHOWN: tuple[NotShown, ...] = (
    NotShown(
        "Credit prices per operation",
        ("CREDIT-PRICE-01",),
        r"\bprices?\b|\bcosts? (\d+|one|two) credits?\b",
        "An image generation costs 4 credits.",
    ),
    # Nothing is assumed about other fields of a key; a MUST must not name one.
    NotShown(
        "Other fields of the key record",
        (),
        r"\bkey(s'|'s)? (record|detail|list)[^.]*\b(created_at|last_used\w*|expires\w*)\b",
        "The key list shows each key's created_at.",
    ),
    NotShown(
        "Fields of the generation record beyond id",
        ("GEN-RECORD-01", "GEN-MISSED-02"),
        r"body of GET /v1/generations|\breads as\b",
        "The body of GET /v1/generations/{id} has status completed.",
    ),
    NotShown(
        "Fields of a registered webhook beyond its identifier",
        ("HOOK-CREATE-01",),
        r"`(url|events|secret|active|description)`",
        "A registered webhook has `events`.",
    ),
    NotShown(
        "Complete list of generation states",
        ("GEN-STATE-02",),
        r"\bterminal\b|\bqueued\b|\bprocessing\b|\bin_progress\b",
        "A generation moves from queued to processing.",
    ),
    NotShown(
        "the exact moves into them are not further stated",
        ("REC-OUTCOME-01",),
        r"\b(while|after|once|when)\b[^.]*\boutcome is (failed|pending_retry)\b",
        "After the first failed attempt the record's outcome is pending_retry.",
    ),
    NotShown(
        "Other body fields of this request",
        ("GEN-IMAGE-09",),
        r"\bother (body )?fields?\b|\bonly the (shown )?fields\b",
        "The 202 response carries no other fields than id.",
    ),
    NotShown(
        "The rest of the request body",
        ("GEN-EDIT-02",),
        r"edit submit whose body|\bimage to edit\b|\bimage_url\b",
        "An edit names the image to edit in image_url.",
    ),
    NotShown(
        "Allowed values: not shown in detail",
        ("GEN-VIDEO-03",),
        r"integer duration|duration (of )?\d",
        "A duration of 5 is accepted.",
    ),
    NotShown(
        "Text-or-image input fields for video",
        ("GEN-VIDEO-08",),
        r"\bimage input\b|\bfrom text alone\b|\binput_image\b",
        "A video submit with an image input is accepted.",
    ),
    NotShown(
        "Response body: not shown",
        ("GEN-RECORD-01",),
        r"body of GET /v1/generations",
        "The body of GET /v1/generations/{id} carries output_url.",
    ),
    NotShown(
        "(other fields: not shown)",
        ("REDLV-RESP-02",),
        r"redeliver response (also )?(has|holds|carries)[^.]*\b(attempt|delivery_id|n)\b",
        "The redeliver response also carries the attempt number.",
    ),
    NotShown(
        "Payloads of the console endpoints",
        ("CONSOLE-PAYLOAD-01", "CONSOLE-HOOK-04", "HOOK-CREATE-01"),
        r"`(url|events|secret)`|\{\"url\"",
        'POST /api/webhooks takes {"url": ...}.',
    ),
    NotShown(
        "method, path and payloads are not shown",
        ("GEN-OTHER-01", "SCOPE-AUDIO-01", "SCOPE-AGENT-01"),
        r"/v1/audio|/v1/agents|/v1/account/usage|audio generation endpoint|agent run endpoint",
        "POST /v1/audio/generate answers 202.",
    ),
    NotShown(
        "Derivation of the per-key secret",
        ("SIG-KEY-06",),
        r"\bderiv",
        "The per-key secret is derived from the key by HKDF.",
    ),
    NotShown(
        "Session login flow",
        ("CONSOLE-LOGIN-01",),
        r"\blog ?in\b|/api/session",
        "POST /api/session logs in.",
    ),
    NotShown(
        "Signature timestamp tolerance window",
        ("SIG-TS-01", "SIG-TS-02", "SIG-TS-03"),
        r"within \d+ ?s of|\bsigned afresh\b|\btolerance window\b|\bstale\b",
        "The signature's t is within 300 s of the receiver's clock.",
    ),
    NotShown(
        "Payload of generation.cancelled beyond its name",
        ("EVT-CANCEL-03",),
        r"generation\.cancelled event (is|has|carries)|data\.status (is )?\"cancelled\"",
        'In generation.cancelled, data.status is "cancelled".',
    ),
    NotShown(
        "Status and body for a missing or invalid API key",
        ("AUTH-STATUS-01", "KEY-REVOKE-03"),
        r"\b401\b",
        "A request without a key is answered 401.",
    ),
    NotShown(
        "Body shape of errors other than 429",
        ("ERR-BODY-01",),
        r"^(?!.*\b429\b).*\bdetail\b(?! view)",
        "A 400 response has a detail string.",
    ),
    NotShown(
        "Maximum prompt length, allowed sizes and request body size",
        ("GEN-SIZE-01", "GEN-IMAGE-04"),
        r"over-long|over-large|prompt length|body size|size \"\d",
        "A prompt length of 4001 characters is refused.",
    ),
    NotShown(
        "How a request selects an API version",
        ("VER-SELECT-01",),
        r"version selector|selects (an|no) API version|api-version header",
        "A request selects an API version with the Api-Version header.",
    ),
)


def _not_shown_lines() -> list[str]:
    return [
        line
        for line in spec_text().splitlines()
        if "not shown" in line or "not further stated" in line
    ]


def test_every_not_shown_line_of_the_spec_is_listed() -> None:
    unlisted = [
        line for line in _not_shown_lines() if not any(n.fragment in line for n in NOT_SHOWN)
    ]
    assert unlisted == []
    # And the list holds nothing stale.
    stale = [n.fragment for n in NOT_SHOWN if n.fragment not in spec_text()]
    assert stale == []


@pytest.mark.parametrize("item", NOT_SHOWN, ids=lambda item: item.fragment[:40])
def test_entries_recording_a_not_shown_item_are_interpretations(item: NotShown) -> None:
    catalog = load_catalog()
    for requirement_id in item.ids:
        assert catalog[requirement_id].level is Level.INTERPRETATION, requirement_id


@pytest.mark.parametrize("item", NOT_SHOWN, ids=lambda item: item.fragment[:40])
def test_no_must_is_built_on_a_not_shown_item(item: NotShown) -> None:
    pattern = re.compile(item.forbidden, re.IGNORECASE)
    offending = [r.id for r in load_catalog().by_level()[Level.MUST] if pattern.search(r.statement)]
    assert offending == [], f"MUST entries built on {item.fragment!r}"


@pytest.mark.parametrize("item", NOT_SHOWN, ids=lambda item: item.fragment[:40])
def test_not_shown_patterns_catch_their_example(item: NotShown) -> None:
    # A pattern that recognises no would-be MUST would be checking nothing.
    assert re.search(item.forbidden, item.example, re.IGNORECASE), item.example


# ---------------------------------------------------- lookup API


def test_iteration_follows_file_order() -> None:
    file_order = [entry["id"] for entry in _raw_catalog()["requirements"]]
    assert [r.id for r in load_catalog()] == file_order
    assert list(load_catalog().ids) == file_order


def test_lookup_by_id() -> None:
    catalog = load_catalog()
    requirement = catalog["SIG-HMAC-01"]
    assert requirement.area == "SIG"
    assert requirement.topic == "HMAC"
    assert requirement.section == "6"
    assert requirement.heading == "Signature"
    assert requirement.location == "§6 Signature"
    assert requirement.level is Level.MUST
    assert "SIG-HMAC-01" in catalog
    assert catalog.get("SIG-HMAC-01") is requirement
    assert catalog.by_id["SIG-HMAC-01"] is requirement


def test_lookup_of_unknown_id() -> None:
    catalog = load_catalog()
    assert "NOPE-NOPE-01" not in catalog
    assert catalog.get("NOPE-NOPE-01") is None
    with pytest.raises(KeyError, match="unknown requirement id 'NOPE-NOPE-01'"):
        catalog["NOPE-NOPE-01"]


def test_by_area_follows_declared_order_and_partitions_the_catalog() -> None:
    catalog = load_catalog()
    grouped = catalog.by_area()
    assert list(grouped) == list(catalog.areas)
    assert sum(len(members) for members in grouped.values()) == len(catalog)
    assert all(r.area == area for area, members in grouped.items() for r in members)


def test_catalog_repr_is_a_summary() -> None:
    catalog = load_catalog()
    assert repr(catalog) == (
        f"<Catalog {SPEC_VERSION}: {len(catalog)} requirements in {len(catalog.areas)} areas>"
    )


def test_load_catalog_is_cached() -> None:
    assert load_catalog() is load_catalog()


def test_unknown_ids_lists_each_unknown_once_in_order() -> None:
    assert unknown_ids(["SIG-HMAC-01", "URL-LOOP-01"]) == []
    assert unknown_ids(["ZZZ-B-01", "SIG-HMAC-01", "ZZZ-A-01", "ZZZ-B-01"]) == [
        "ZZZ-B-01",
        "ZZZ-A-01",
    ]


def test_requirement_objects_are_immutable() -> None:
    requirement = load_catalog()["SIG-HMAC-01"]
    with pytest.raises(AttributeError):
        requirement.level = Level.INTERPRETATION  # type: ignore[misc]


# ---------------------------------------------------- the loader rejects broken catalogs


def _entry(requirement_id: str, **overrides: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": requirement_id,
        "section": "6",
        "heading": "Signature",
        "statement": "The signed string is the timestamp, a dot and the raw body.",
        "level": "MUST",
        "needs": ["black-box"],
    }
    entry.update(overrides)
    return entry


_MINIMAL: dict[str, Any] = {
    "spec": {
        "title": "Generation API",
        "edition": "generation-api/2026-08-01",
        "source": "spec/generation-api.md",
        "api_version": "2026-08-01",
    },
    "areas": {"SIG": "signatures"},
    "requirements": [_entry("SIG-HMAC-01"), _entry("SIG-HMAC-02")],
}


def _dump(document: dict[str, Any]) -> str:
    return yaml.safe_dump(document, sort_keys=False)


def test_unobservable_entry_carries_its_reason() -> None:
    document = copy.deepcopy(_MINIMAL)
    document["requirements"][1].update(
        observable=False, unobservable_reason="How a secret is stored\n is not visible."
    )
    catalog = parse_catalog(_dump(document))
    assert catalog["SIG-HMAC-01"].observable
    assert not catalog["SIG-HMAC-02"].observable
    assert catalog["SIG-HMAC-02"].unobservable_reason == "How a secret is stored is not visible."
    assert [r.id for r in catalog.unobservable()] == ["SIG-HMAC-02"]


def test_shipped_key_stored_hashed_is_unobservable_with_a_reason() -> None:
    hashed = load_catalog()["KEY-HASH-01"]
    assert not hashed.observable
    assert hashed.unobservable_reason


def test_minimal_catalog_parses() -> None:
    catalog = parse_catalog(_dump(_MINIMAL))
    assert catalog.ids == ("SIG-HMAC-01", "SIG-HMAC-02")
    assert catalog["SIG-HMAC-02"].needs == (Need.BLACK_BOX,)
    assert catalog["SIG-HMAC-02"].party is Party.SERVICE
    assert catalog["SIG-HMAC-02"].notes is None


_SPEC = """## 6. Events

### Signature
1. Signed string is the timestamp, a dot, then the exact raw request body.
4. Signature timestamp tolerance window: not shown.

| Property | Value |
| --- | --- |
| Per-attempt timeout | 10 s |
"""


def _quoted(*quotes: Any, level: str = "MUST") -> dict[str, Any]:
    """The minimal catalog whose second entry has ``quote`` set to *quotes* (one string
    when one is given) and level *level*."""
    document = copy.deepcopy(_MINIMAL)
    second = document["requirements"][1]
    second["quote"] = quotes[0] if len(quotes) == 1 else list(quotes)
    second["level"] = level
    if level == "INTERPRETATION":
        second["notes"] = "The tolerance window is not shown."
    return document


def test_quote_of_one_string_becomes_a_tuple_of_one() -> None:
    catalog = parse_catalog(_dump(_quoted("Signed string is the timestamp")), spec=_SPEC)
    assert catalog["SIG-HMAC-02"].quotes == ("Signed string is the timestamp",)
    assert catalog["SIG-HMAC-01"].quotes == ()


def test_quote_list_keeps_its_order_single_spaced() -> None:
    catalog = parse_catalog(
        _dump(_quoted("| Per-attempt timeout | 10 s |", "a dot,\n   then the exact raw")),
        spec=_SPEC,
    )
    assert catalog["SIG-HMAC-02"].quotes == (
        "| Per-attempt timeout | 10 s |",
        "a dot, then the exact raw",
    )


#: Quotes the loader finds in ``_SPEC`` once white space is collapsed, by test id.
_FOUND = {
    "sentence": "Signed string is the timestamp, a dot, then the exact raw",
    "across-a-line-break": "request body.  4. Signature",
    "table-row": "| Per-attempt timeout | 10 s |",
    "table-cells": "Per-attempt timeout | 10 s",
}


@pytest.mark.parametrize("quote", list(_FOUND.values()), ids=list(_FOUND))
def test_quote_found_in_the_spec_with_whitespace_collapsed(quote: str) -> None:
    parse_catalog(_dump(_quoted(quote)), spec=_SPEC)


def test_interpretation_may_quote_what_the_spec_leaves_open() -> None:
    catalog = parse_catalog(
        _dump(_quoted("tolerance window: not shown.", level="INTERPRETATION")), spec=_SPEC
    )
    assert catalog["SIG-HMAC-02"].quotes == ("tolerance window: not shown.",)
    assert catalog.unquoted_musts() == (catalog["SIG-HMAC-01"],)


@pytest.mark.parametrize(
    "quote",
    [
        pytest.param("Signed string is the timestamp and the body", id="reworded"),
        pytest.param("| Per-attempt timeout | 10 s | Backoff", id="beyond-the-spec"),
        pytest.param("signed string is the timestamp", id="case-differs"),
    ],
)
def test_loader_rejects_a_quote_not_in_the_spec_naming_the_entry(quote: str) -> None:
    document = _quoted("Signed string is the timestamp", quote)
    with pytest.raises(CatalogError) as raised:
        parse_catalog(_dump(document), source="broken.yaml", spec=_SPEC)
    lines = str(raised.value).splitlines()
    assert lines[0] == "broken.yaml: 1 problem(s):"
    assert "requirements[1] (SIG-HMAC-02)" in lines[1]
    assert "quote not found in the spec" in lines[1]
    assert repr(quote) in lines[1]


def test_quotes_are_checked_only_against_a_given_spec() -> None:
    # parse_catalog without a spec validates the shape only; load_catalog always passes
    # the spec (test_every_quote_occurs_in_the_spec holds the shipped quotes to it).
    catalog = parse_catalog(_dump(_quoted("words the spec never says")))
    assert catalog["SIG-HMAC-02"].quotes == ("words the spec never says",)


def test_unquoted_musts_lists_musts_without_a_quote_in_file_order() -> None:
    document = copy.deepcopy(_MINIMAL)
    document["areas"]["KEY"] = "keys"
    document["requirements"].append(_entry("KEY-NAME-01"))
    document["requirements"][1]["quote"] = "Signed string is the timestamp"
    catalog = parse_catalog(_dump(document), spec=_SPEC)
    assert [r.id for r in catalog.unquoted_musts()] == ["SIG-HMAC-01", "KEY-NAME-01"]


#: Each way to break the minimal catalog's second entry: the fields changed in it (None
#: drops the field) and what the loader's message says about the entry, by test id.
_BROKEN: dict[str, tuple[dict[str, Any], str]] = {
    "duplicate-id": ({"id": "SIG-HMAC-01"}, "duplicate id, first used by requirements[0]"),
    "bad-level": ({"level": "SHOULD"}, "'SHOULD'"),
    "missing-statement": ({"statement": None}, "'statement' is a required property"),
    "bad-id": ({"id": "sig-hmac-2"}, "does not match"),
    "undeclared-area": ({"id": "WH-SIG-02"}, "area 'WH' is not declared"),
    "need": ({"needs": ["network"]}, "'network'"),
    "black-box-with-others": ({"needs": ["black-box", "slow"]}, "is too long"),
    "interpretation-without-notes": ({"level": "INTERPRETATION"}, "'notes' is a required property"),
    "unobservable-without-reason": (
        {"observable": False},
        "'unobservable_reason' is a required property",
    ),
    "reason-without-unobservable": (
        {"unobservable_reason": "storage is not visible over HTTP"},
        "unobservable_reason given, but the entry is observable",
    ),
    "unknown-field": ({"tests": ["test_x"]}, "'tests' was unexpected"),
    "bad-section": ({"section": "§6"}, "'§6'"),
    "empty-quote-list": ({"quote": []}, "quote"),
    "blank-quote": ({"quote": ["Signed string", "  "]}, "quote"),
    "quote-not-text": ({"quote": {"text": "Signed string"}}, "quote"),
}


@pytest.mark.parametrize(("fields", "problem"), list(_BROKEN.values()), ids=list(_BROKEN))
def test_loader_rejects_broken_entry_naming_it(fields: dict[str, Any], problem: str) -> None:
    document = copy.deepcopy(_MINIMAL)
    second = document["requirements"][1]
    for name, value in fields.items():
        if value is None:
            del second[name]
        else:
            second[name] = value
    label = f"requirements[1] ({second['id']})"
    with pytest.raises(CatalogError) as raised:
        parse_catalog(_dump(document), source="broken.yaml")
    message = str(raised.value)
    assert message.startswith("broken.yaml: ")
    problem_lines = [line for line in message.splitlines() if label in line]
    assert problem_lines, message
    assert any(problem in line for line in problem_lines), message


def test_loader_rejects_missing_top_level_key() -> None:
    document = copy.deepcopy(_MINIMAL)
    del document["areas"]
    with pytest.raises(CatalogError, match="'areas' is a required property"):
        parse_catalog(_dump(document))


def test_loader_rejects_invalid_yaml() -> None:
    with pytest.raises(CatalogError, match="not valid YAML"):
        parse_catalog("requirements: [unclosed", source="bad.yaml")


def test_loader_reports_every_problem_not_only_the_first() -> None:
    document = copy.deepcopy(_MINIMAL)
    document["requirements"][0]["level"] = "SHOULD"
    document["requirements"][1]["needs"] = []
    with pytest.raises(CatalogError) as raised:
        parse_catalog(_dump(document))
    message = str(raised.value)
    assert "2 problem(s)" in message
    assert "requirements[0] (SIG-HMAC-01)" in message
    assert "requirements[1] (SIG-HMAC-02)" in message


def test_schema_file_is_plain_json() -> None:
    # The schema ships as data; tools other than ours read it.
    text = resources.files("conformance").joinpath("requirements.schema.json").read_text("utf-8")
    assert json.loads(text)["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_catalog_timed_rules_have_nested_bands() -> None:
    """Every timing entry gives pass and warn bands that nest, for any sane tolerance."""
    timed = [r for r in load_catalog() if r.timing is not None]
    assert {r.id for r in timed} >= {
        "DLV-TIMEOUT-01",
        "DLV-BACKOFF-01",
        "DLV-BACKOFF-02",
        "DLV-BACKOFF-03",
    }
    for requirement in timed:
        assert requirement.timing is not None
        for tolerance in (0.0, 0.6, 2.0):
            bands = requirement.timing.bands(tolerance)
            assert bands.warning[0] == bands.passing[0]
            assert bands.warning[1] == bands.passing[1] + requirement.timing.slack


def test_catalog_timeout_bands_settle_the_aiohttp_dispute() -> None:
    """A 3rd attempt 12.82 s after the 2nd (an aiohttp timer 0.82 s late, then the 2 s
    backoff) warns; a 30 s or 5 s timeout, a 2 s first backoff and no backoff fail
    (tolerance 0.6 s)."""
    catalog = load_catalog()

    def band(rule: str, value: float) -> str:
        timing = catalog[rule].timing
        assert timing is not None
        return timing.bands(0.6).band(value)

    assert band("DLV-TIMEOUT-01", 10.9) == "pass"  # backoff from the attempt's start
    assert band("DLV-TIMEOUT-01", 12.1) == "pass"  # from its end
    assert band("DLV-TIMEOUT-01", 12.82) == "warn"
    assert band("DLV-TIMEOUT-01", 32.0) == "fail"
    assert band("DLV-TIMEOUT-01", 7.0) == "fail"
    assert band("DLV-BACKOFF-01", 1.2) == "pass"
    assert band("DLV-BACKOFF-01", 2.0) == "fail"
    assert band("DLV-BACKOFF-01", 0.05) == "fail"
    assert band("DLV-BACKOFF-02", 4.0) == "fail"
    assert band("DLV-BACKOFF-02", 1.0) == "fail"


def test_catalog_every_must_quotes_the_spec() -> None:
    """A MUST is a rule the spec states: each quotes the sentence or table row that states
    it (each quote is checked against the spec text when the catalog loads)."""
    unquoted = [r.id for r in load_catalog().unquoted_musts()]
    assert not unquoted, f"MUST entries without a quote from the spec: {unquoted}"


def test_a_catalog_its_parent_process_validated_is_parsed_without_validating_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run's workers read the catalog their controller validated (its digest in
    VALIDATED_ENV) without validating it again; any other digest, and they validate."""

    def not_again(document: Any) -> list[str]:
        raise AssertionError("validated again")

    load_catalog.cache_clear()
    try:
        monkeypatch.delenv(catalog_module.VALIDATED_ENV, raising=False)
        load_catalog()
        digest = os.environ[catalog_module.VALIDATED_ENV]
        monkeypatch.setattr(catalog_module, "_schema_problems", not_again)
        load_catalog.cache_clear()
        assert load_catalog().ids
        load_catalog.cache_clear()
        monkeypatch.setenv(catalog_module.VALIDATED_ENV, digest.replace(digest[0], "x"))
        with pytest.raises(AssertionError, match="validated again"):
            load_catalog()
    finally:
        load_catalog.cache_clear()
