"""Tiers as configuration: the numbers behind the tier record of spec §2.

Loaded from ``reference/tiers.toml`` (shipped in the package). A tier fixes the per-key
rolling-minute and per-day request limits, the per-account concurrency limit and daily
credit cap, and the model categories it may use; ``[prices]`` gives the credits one
submit of each category costs.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
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
        """The tier record exactly as spec §2 lists it (GET /v1/account/tier, /api/tier)."""
        return {
            "plan_code": self.plan_code,
            "requests_per_minute": self.requests_per_minute,
            "requests_per_day": self.requests_per_day,
            "concurrent_limit": self.concurrent_limit,
            "max_credits_per_day": self.max_credits_per_day,
            "allowed_model_types": list(self.allowed_model_types),
        }


@dataclass(frozen=True)
class Tiers:
    """All tiers by name, and the price of each model category."""

    tiers: Mapping[str, Tier]
    prices: Mapping[str, int]

    def get(self, name: str) -> Tier:
        return self.tiers[name]


def _positive_int(table: Mapping[str, Any], field: str, where: str) -> int:
    value = table.get(field)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"tiers.toml: {where}.{field} must be a non-negative integer")
    return value


def parse_tiers(document: Mapping[str, Any], prices_table_name: str = "prices") -> Tiers:
    """Validate a parsed tiers document (a typo must stop the service, not skew limits).

    ``prices_table_name`` picks the price table (the choice ``prices``: ``[prices]`` or
    ``[variant-prices]``).
    """
    prices_table = document.get(prices_table_name, {})
    prices = {kind: _positive_int(prices_table, kind, prices_table_name) for kind in MODEL_TYPES}
    tiers: dict[str, Tier] = {}
    for name, table in document.get("tiers", {}).items():
        types = table.get("allowed_model_types")
        if not isinstance(types, list) or not all(t in MODEL_TYPES for t in types):
            raise ValueError(f"tiers.toml: tiers.{name}.allowed_model_types: use {MODEL_TYPES}")
        tiers[name] = Tier(
            plan_code=name,
            requests_per_minute=_positive_int(table, "requests_per_minute", f"tiers.{name}"),
            requests_per_day=_positive_int(table, "requests_per_day", f"tiers.{name}"),
            concurrent_limit=_positive_int(table, "concurrent_limit", f"tiers.{name}"),
            max_credits_per_day=_positive_int(table, "max_credits_per_day", f"tiers.{name}"),
            allowed_model_types=tuple(types),
        )
    if not tiers:
        raise ValueError("tiers.toml defines no tier")
    return Tiers(tiers=tiers, prices=prices)


@cache
def load_tiers(prices_table_name: str = "prices") -> Tiers:
    """The tiers shipped with the package, with the named price table."""
    text = (resources.files("reference") / "tiers.toml").read_text(encoding="utf-8")
    return parse_tiers(tomllib.loads(text), prices_table_name)
