"""The requirements catalog: every testable statement of the spec, under a stable id.

``requirements.yaml`` (next to this module, shipped inside the ``conformance`` package)
is the spine of the suite: checks cite its ids with ``@pytest.mark.requirement(...)``,
reports give one verdict per id, and each fault of the reference implementation names
the id it violates. This module loads the file, validates it against
``requirements.schema.json`` plus the rules a schema cannot state (unique ids, declared
areas, a reason only with ``observable: false``), and offers it as typed, immutable objects::

    from conformance.catalog import load_catalog, Level

    catalog = load_catalog()
    requirement = catalog["SIG-HMAC-01"]
    musts = catalog.by_level()[Level.MUST]

An entry's ``quote`` holds the spec text that states it, so that a reader (and a vendor)
can hold the check against the spec's own words; each quote must occur in the spec
(whitespace collapsed), or the catalog does not load.

A broken catalog raises :class:`CatalogError` whose message names the entry (its index
and id) and the problem, so a bad edit is found at once rather than as a confusing
failure in a check.

The catalog's ``choices`` (:class:`Choice`) list where the spec leaves room, with the
spec words that leave it, the requirements each bears on and the side the reference
implementation and its variant take; each requirement id must exist and the spec words
occur in the spec, or the catalog does not load.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from conformance.findings import Bands
from genapi_spec import error_where, load_yaml, schema_errors, spec_text

__all__ = [
    "ID_PATTERN",
    "Catalog",
    "CatalogError",
    "Choice",
    "Level",
    "Need",
    "Party",
    "Requirement",
    "Timing",
    "catalog_schema",
    "load_catalog",
    "normalise_space",
    "parse_catalog",
    "unknown_ids",
]

#: ``AREA-TOPIC-NN``; the same pattern the schema holds, with named groups.
ID_PATTERN = re.compile(r"^(?P<area>[A-Z]+)-(?P<topic>[A-Z0-9]+)-(?P<number>[0-9]{2})$")

_PACKAGE = "conformance"
_CATALOG_FILE = "requirements.yaml"
_SCHEMA_FILE = "requirements.schema.json"
# A catalog with many errors would bury the first one; the rest are counted.
_MAX_REPORTED_PROBLEMS = 20


class CatalogError(ValueError):
    """The catalog file is malformed; the message names each bad entry and its problem."""


class Level(StrEnum):
    """How binding a requirement is, which decides what a broken check means."""

    #: The spec states it: an implementation that breaks it fails.
    MUST = "MUST"
    #: The spec leaves it unshown or ambiguous and the check assumes something: a check of
    #: an interpretation can only warn, never fail an implementation.
    INTERPRETATION = "INTERPRETATION"


class Need(StrEnum):
    """What a check of a requirement needs beyond the public API; the plugin skips a
    check whose needs the target profile does not offer."""

    BLACK_BOX = "black-box"
    SANDBOX = "sandbox"
    DNS = "dns"
    CONSOLE = "console"
    DESTRUCTIVE = "destructive"
    SLOW = "slow"
    ADAPTER = "adapter"
    CLOCK = "clock"


class Party(StrEnum):
    """Whose duty a requirement is."""

    #: The implementation under test.
    SERVICE = "service"
    #: Receivers and client code (e.g. "verify in constant time"): the suite's own
    #: receiver cites these; they are never held against an implementation.
    CLIENT = "client"


@dataclass(frozen=True, slots=True)
class Timing:
    """The verdict bands of a timed rule (the 10 s timeout, the 1 s / 2 s backoff).

    ``expected`` is the range the spec's words allow for the measured quantity (10 s
    timeout then the 1 s backoff counted from its start or its end: 10 to 11 s). A value
    within it, widened on both sides by the profile's measurement tolerance, passes. Real
    HTTP clients and schedulers fire timers late (aiohttp rounds timeouts of 5 s or more
    up to the next whole second of its loop clock): up to ``slack`` seconds later still is
    a warning. Anything else is clearly another value (a 30 s timeout, a 2 s backoff where
    1 s is due, no backoff at all) and fails.
    """

    measures: str
    expected: tuple[float, float]
    slack: float
    rationale: str

    def bands(self, tolerance: float) -> Bands:
        low, high = self.expected
        passing = (max(0.0, low - tolerance), high + tolerance)
        return Bands(passing=passing, warning=(passing[0], passing[1] + self.slack))


@dataclass(frozen=True, slots=True)
class Requirement:
    """One checkable statement of the spec."""

    id: str
    area: str
    section: str
    heading: str
    statement: str
    level: Level
    needs: tuple[Need, ...]
    notes: str | None = None
    party: Party = Party.SERVICE
    timing: Timing | None = None
    #: The spec text that states the requirement, single-spaced (see :func:`normalise_space`).
    quotes: tuple[str, ...] = ()
    #: False when no black-box check can observe the rule (how a secret is stored): such a
    #: requirement is never passed, and reports list it apart with
    #: :attr:`unobservable_reason`, which says why.
    observable: bool = True
    unobservable_reason: str | None = None

    @property
    def topic(self) -> str:
        """The middle part of the id (``HMAC`` in ``SIG-HMAC-01``)."""
        return self.id.split("-")[1]

    @property
    def is_interpretation(self) -> bool:
        return self.level is Level.INTERPRETATION

    @property
    def location(self) -> str:
        """Where the statement is in the spec, for reports: ``§4 Callback URL requirements``."""
        return f"§{self.section} {self.heading}"


@dataclass(frozen=True, slots=True)
class Choice:
    """A place where the spec leaves room, so that implementations may differ.

    ``spec`` holds the spec words that leave it open; a warning of a check of one of its
    ``requirements`` against an implementation on the other side is expected, a MUST
    failure never is.
    """

    id: str
    name: str
    spec: tuple[str, ...]
    requirements: tuple[str, ...]
    reference: str
    variant: str
    notes: str | None = None


# eq=False: compared and hashed by identity (its mappings are unhashable, and there is
# one catalog per process anyway).
@dataclass(frozen=True, eq=False)
class Catalog:
    """The whole catalog: requirements in file order, looked up by id.

    Iterating yields :class:`Requirement` objects (not ids) in file order.
    """

    spec: Mapping[str, str]
    areas: Mapping[str, str]
    requirements: tuple[Requirement, ...]
    #: Where the spec leaves room (the catalog's ``choices``), in file order.
    choices: tuple[Choice, ...] = ()
    _by_id: Mapping[str, Requirement] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # The loader has already rejected duplicates; this mapping is the lookup index.
        object.__setattr__(self, "_by_id", MappingProxyType({r.id: r for r in self.requirements}))

    def __repr__(self) -> str:
        return (
            f"<Catalog {self.spec.get('edition', '?')}: {len(self.requirements)} "
            f"requirements in {len(self.areas)} areas>"
        )

    def __iter__(self) -> Iterator[Requirement]:
        return iter(self.requirements)

    def __len__(self) -> int:
        return len(self.requirements)

    def __contains__(self, requirement_id: object) -> bool:
        return requirement_id in self._by_id

    def __getitem__(self, requirement_id: str) -> Requirement:
        try:
            return self._by_id[requirement_id]
        except KeyError:
            raise KeyError(f"unknown requirement id {requirement_id!r}") from None

    def get(self, requirement_id: str, default: Requirement | None = None) -> Requirement | None:
        return self._by_id.get(requirement_id, default)

    @property
    def by_id(self) -> Mapping[str, Requirement]:
        """Read-only mapping from id to requirement."""
        return self._by_id

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(self._by_id)

    def by_area(self) -> dict[str, tuple[Requirement, ...]]:
        """Requirements grouped by area, areas in the order the catalog declares them."""
        grouped: dict[str, list[Requirement]] = {area: [] for area in self.areas}
        for requirement in self.requirements:
            grouped[requirement.area].append(requirement)
        return {area: tuple(members) for area, members in grouped.items()}

    def by_level(self) -> dict[Level, tuple[Requirement, ...]]:
        """Requirements grouped by level (every level present, possibly empty)."""
        return {level: tuple(r for r in self.requirements if r.level is level) for level in Level}

    def choices_of(self, requirement_id: str) -> tuple[Choice, ...]:
        """The open choices that bear on *requirement_id*."""
        return tuple(c for c in self.choices if requirement_id in c.requirements)

    def unquoted_musts(self) -> tuple[Requirement, ...]:
        """The MUST requirements that quote no spec text (a MUST is a rule the spec states,
        so each one should say where)."""
        return tuple(r for r in self.requirements if r.level is Level.MUST and not r.quotes)

    def unobservable(self) -> tuple[Requirement, ...]:
        """The requirements no black-box check can observe (``observable: false``)."""
        return tuple(r for r in self.requirements if not r.observable)

    def unknown(self, ids: Iterable[str]) -> list[str]:
        """The ids among ``ids`` that the catalog does not hold, once each, in order."""
        return list(dict.fromkeys(i for i in ids if i not in self._by_id))


@cache
def catalog_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of the catalog file."""
    text = resources.files(_PACKAGE).joinpath(_SCHEMA_FILE).read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


#: The SHA-256 of the catalog text a process has validated, for the processes it starts
#: (a run's xdist workers, eight at once on two cores): they read the same file, and parse
#: it without validating it again (measured: 0.23 s of CPU each, at the run's start).
VALIDATED_ENV = "GENAPI_CATALOG_VALIDATED"


@cache
def load_catalog() -> Catalog:
    """The catalog shipped with the suite, validated against its schema and its quotes
    against the spec text (read once per process; validated once per run, see
    :data:`VALIDATED_ENV`)."""
    text = resources.files(_PACKAGE).joinpath(_CATALOG_FILE).read_text(encoding="utf-8")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    source = f"{_PACKAGE}/{_CATALOG_FILE}"
    if os.environ.get(VALIDATED_ENV) == digest:
        catalog = parse_catalog(text, source=source, validate=False)
    else:
        catalog = parse_catalog(text, source=source, spec=spec_text())
    os.environ[VALIDATED_ENV] = digest
    return catalog


def normalise_space(text: str) -> str:
    """*text* with every run of whitespace (line breaks included) collapsed to one space
    and the ends stripped: how a quote is compared with the spec, whose sentences wrap
    across lines."""
    return " ".join(text.split())


def unknown_ids(ids: Iterable[str]) -> list[str]:
    """The ids the shipped catalog does not hold; the plugin fails collection on any."""
    return load_catalog().unknown(ids)


def parse_catalog(
    text: str, *, source: str = "<catalog>", spec: str | None = None, validate: bool = True
) -> Catalog:
    """Parse and validate catalog YAML text; raise :class:`CatalogError` if it is broken.

    With *spec* (the spec's Markdown text), every quote must also occur in it, compared
    single-spaced (:func:`normalise_space`). ``validate=False`` only for text known valid
    (:func:`load_catalog`).
    """
    try:
        document = load_yaml(text)
    except yaml.YAMLError as exc:
        raise CatalogError(f"{source}: not valid YAML: {exc}") from exc

    problems = _problems(document, spec) if validate else []
    if problems:
        shown = problems[:_MAX_REPORTED_PROBLEMS]
        more = len(problems) - len(shown)
        lines = [f"{source}: {len(problems)} problem(s):", *(f"  - {p}" for p in shown)]
        if more:
            lines.append(f"  ... and {more} more")
        raise CatalogError("\n".join(lines))

    areas: dict[str, str] = dict(document["areas"])
    requirements = tuple(_requirement(entry) for entry in document["requirements"])
    return Catalog(
        spec=MappingProxyType(dict(document["spec"])),
        areas=MappingProxyType(areas),
        requirements=requirements,
        choices=tuple(_choice(entry) for entry in document.get("choices", ())),
    )


def _problems(document: Any, spec: str | None) -> list[str]:
    """What is wrong with a parsed catalog: its schema first, then (only a schema-valid
    document has the shape they assume) its semantic rules and its choices."""
    problems = _schema_problems(document)
    spaced = None if spec is None else normalise_space(spec)
    if not problems:
        problems = _semantic_problems(document, spaced)
    if not problems:
        problems = _choice_problems(document, spaced)
    return problems


def _single_spaced(value: str | Iterable[str]) -> tuple[str, ...]:
    """One string or a list of them (a ``quote``, a choice's ``spec``), single-spaced."""
    return tuple(normalise_space(v) for v in ([value] if isinstance(value, str) else value))


def _not_in_spec(label: str, what: str, texts: Iterable[str], spec: str | None) -> list[str]:
    """A problem per text (*what* it is: "quote") not found in the *spec* text (whitespace
    collapsed); none without the spec to look in."""
    if spec is None:
        return []
    return [
        f"{label}: {what} not found in the spec (whitespace collapsed): {text!r}"
        for text in texts
        if text not in spec
    ]


def _choice_words(entry: Mapping[str, Any]) -> tuple[str, ...]:
    """A choice's ``spec`` (one string or a list of them), single-spaced."""
    return _single_spaced(entry["spec"])


def _choice(entry: Mapping[str, Any]) -> Choice:
    return Choice(
        id=entry["id"],
        name=entry["name"],
        spec=_choice_words(entry),
        requirements=tuple(entry["requirements"]),
        reference=normalise_space(entry["reference"]),
        variant=normalise_space(entry["variant"]),
        notes=normalise_space(entry["notes"]) if "notes" in entry else None,
    )


def _choice_problems(document: Mapping[str, Any], spec: str | None) -> list[str]:
    """Unique choice ids, requirement ids the catalog holds and, given the single-spaced
    *spec*, spec words found in it."""
    problems: list[str] = []
    known = {entry["id"] for entry in document["requirements"]}
    seen: set[str] = set()
    for index, entry in enumerate(document.get("choices", ())):
        label = f"choices[{index}] ({entry['id']})"
        if entry["id"] in seen:
            problems.append(f"{label}: duplicate choice id")
        seen.add(entry["id"])
        problems.extend(
            f"{label}: requirement {requirement_id!r} is not in the catalog"
            for requirement_id in entry["requirements"]
            if requirement_id not in known
        )
        problems.extend(_not_in_spec(label, "spec words", _choice_words(entry), spec))
    return problems


def _requirement(entry: Mapping[str, Any]) -> Requirement:
    match = ID_PATTERN.match(entry["id"])
    # The schema has checked the pattern already.
    assert match is not None
    return Requirement(
        id=entry["id"],
        area=match["area"],
        section=entry["section"],
        heading=entry["heading"],
        statement=normalise_space(entry["statement"]),
        level=Level(entry["level"]),
        needs=tuple(Need(n) for n in entry["needs"]),
        notes=normalise_space(entry["notes"]) if "notes" in entry else None,
        party=Party(entry.get("party", Party.SERVICE)),
        timing=_timing(entry["timing"]) if "timing" in entry else None,
        quotes=_quotes(entry),
        observable=entry.get("observable", True),
        unobservable_reason=(
            normalise_space(entry["unobservable_reason"])
            if "unobservable_reason" in entry
            else None
        ),
    )


def _timing(entry: Mapping[str, Any]) -> Timing:
    low, high = entry["expected"]
    return Timing(
        measures=normalise_space(entry["measures"]),
        expected=(float(low), float(high)),
        slack=float(entry["slack"]),
        rationale=normalise_space(entry["rationale"]),
    )


def _quotes(entry: Mapping[str, Any]) -> tuple[str, ...]:
    """An entry's ``quote`` (one string or a list of them) as single-spaced strings."""
    return _single_spaced(entry.get("quote", ()))


def _entry_label(document: Any, path: Iterable[Any]) -> str:
    """``requirements[12] (SIG-HMAC-01)`` for an error inside an entry, else the path."""
    parts = list(path)
    if len(parts) >= 2 and parts[0] == "requirements" and isinstance(parts[1], int):
        index = parts[1]
        entry = document["requirements"][index]
        entry_id = entry.get("id") if isinstance(entry, dict) else None
        label = f"requirements[{index}]"
        if isinstance(entry_id, str):
            label += f" ({entry_id})"
        rest = ".".join(str(p) for p in parts[2:])
        return f"{label}{': ' + rest if rest else ''}"
    return error_where(parts)


def _schema_problems(document: Any) -> list[str]:
    validator = Draft202012Validator(catalog_schema())
    return [
        f"{_entry_label(document, error.absolute_path)}: {error.message}"
        for error in schema_errors(validator, document)
    ]


def _semantic_problems(document: Mapping[str, Any], spec: str | None) -> list[str]:
    """Unique ids, declared areas and, given the single-spaced *spec*, quotes found in it."""
    problems: list[str] = []
    areas = document["areas"]
    first_index: dict[str, int] = {}
    for index, entry in enumerate(document["requirements"]):
        requirement_id = entry["id"]
        label = f"requirements[{index}] ({requirement_id})"
        if requirement_id in first_index:
            problems.append(
                f"{label}: duplicate id, first used by requirements[{first_index[requirement_id]}]"
            )
        else:
            first_index[requirement_id] = index
        match = ID_PATTERN.match(requirement_id)
        if match is not None and match["area"] not in areas:
            problems.append(
                f"{label}: area {match['area']!r} is not declared under `areas` "
                f"(declared: {', '.join(areas)})"
            )
        if "unobservable_reason" in entry and entry.get("observable", True):
            problems.append(
                f"{label}: unobservable_reason given, but the entry is observable "
                "(add observable: false, or drop the reason)"
            )
        problems.extend(_not_in_spec(label, "quote", _quotes(entry), spec))
    return problems
