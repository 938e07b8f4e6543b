"""Tiers as configuration: the numbers behind the tier record of spec §2.

Loaded from ``reference/tiers.toml`` (shipped in the package), or from a file of the
same shape that replaces it (``serve --tiers FILE``: e.g. a lower ``low-limit`` tier, to
see how the suite fares against tighter limits). A tier fixes the per-key rolling-minute
and per-day request limits, the per-account concurrency limit and daily credit cap, and
the model categories it may use; ``[prices]`` gives the credits one submit of each
category costs. A file that breaks this shape is refused naming the field.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

__all__ = ["MODEL_TYPES", "Tier", "Tiers", "load_tiers"]

#: The model categories the spec names (§2, allowed_model_types).
MODEL_TYPES = ("image", "video", "audio", "agent")


@dataclass(frozen=True)
class Tier:
    """One tier: its name (``plan_code``) and limits."""

    plan_code: str
    requests_per_minute: int
    requests_per_day: int
    concurrent_limit: int
    max_credits_per_day: int
    allowed_model_types: tuple[str, ...]

    def record(self) -> dict[str, Any]:
        """The tier record exactly as spec §2 lists it (GET /v1/account/tier, /api/tier):
        the fields above, in their order, the model categories as a JSON list."""
        return {**asdict(self), "allowed_model_types": list(self.allowed_model_types)}


@dataclass(frozen=True)
class Tiers:
    """All tiers by name, and the price of each model category."""

    tiers: Mapping[str, Tier]
    prices: Mapping[str, int]

    def get(self, name: str) -> Tier:
        return self.tiers[name]


#: The fields of a tier's table (its name is the table's).
_TIER_FIELDS = tuple(f.name for f in fields(Tier) if f.name != "plan_code")


def _table(document: Mapping[str, Any], name: str, source: str) -> Mapping[str, Any]:
    table = document.get(name, {})
    if not isinstance(table, dict):
        raise ValueError(f"{source}: {name} must be a table")
    return table


def _positive_int(table: Mapping[str, Any], field: str, where: str, source: str) -> int:
    value = table.get(field)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{source}: {where}.{field} must be a non-negative integer")
    return value


def _tier(name: str, table: Any, source: str) -> Tier:
    where = f"tiers.{name}"
    if not isinstance(table, dict):
        raise ValueError(f"{source}: {where} must be a table")
    unknown = sorted(set(table) - set(_TIER_FIELDS))
    if unknown:
        raise ValueError(f"{source}: {where}.{unknown[0]} is not a tier field: use {_TIER_FIELDS}")
    types = table.get("allowed_model_types")
    if not isinstance(types, list) or not all(t in MODEL_TYPES for t in types):
        raise ValueError(f"{source}: {where}.allowed_model_types: use {MODEL_TYPES}")
    return Tier(
        plan_code=name,
        requests_per_minute=_positive_int(table, "requests_per_minute", where, source),
        requests_per_day=_positive_int(table, "requests_per_day", where, source),
        concurrent_limit=_positive_int(table, "concurrent_limit", where, source),
        max_credits_per_day=_positive_int(table, "max_credits_per_day", where, source),
        allowed_model_types=tuple(types),
    )


def parse_tiers(
    document: Mapping[str, Any], prices_table_name: str = "prices", source: str = "tiers.toml"
) -> Tiers:
    """Validate a parsed tiers document (a typo must stop the service, not skew limits).

    ``prices_table_name`` picks the price table (the choice ``prices``: ``[prices]`` or
    ``[variant-prices]``); ``source`` names the file in the errors, which name the field.
    """
    prices_table = _table(document, prices_table_name, source)
    prices = {
        kind: _positive_int(prices_table, kind, prices_table_name, source) for kind in MODEL_TYPES
    }
    tables = _table(document, "tiers", source)
    tiers = {name: _tier(name, table, source) for name, table in tables.items()}
    if not tiers:
        raise ValueError(f"{source} defines no tier ([tiers.NAME] tables)")
    return Tiers(tiers=tiers, prices=prices)


@cache
def load_tiers(prices_table_name: str = "prices", path: Path | None = None) -> Tiers:
    """The tiers shipped with the package, or those of the file at ``path`` (``serve
    --tiers``), with the named price table. Raises ``ValueError`` naming the file and the
    field (a file that is not TOML included) and ``OSError`` for one that cannot be read."""
    if path is None:
        text = (resources.files("reference") / "tiers.toml").read_text(encoding="utf-8")
        return parse_tiers(tomllib.loads(text), prices_table_name)
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{path} is not TOML: {error}") from None
    return parse_tiers(document, prices_table_name, str(path))
