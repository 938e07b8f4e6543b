"""Fault injection: one deliberate deviation from the spec (:class:`Fault`), and the set of
them a running service has switched on (:class:`Faults`).

A fault breaks exactly one catalogued requirement (``conformance/requirements.yaml``), so
the suite can prove it catches that deviation. Each is a constant in the module whose
behaviour it changes, next to the code that asks ``faults.on(THAT_FAULT)``;
``reference/faults.py`` collects them into the registry. With no fault switched on, every
question is a lookup in an empty frozenset.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["Fault", "Faults", "declared_in"]


@dataclass(frozen=True, slots=True)
class Fault:
    """One injectable deviation: its name, the requirement id it violates, what it does."""

    name: str
    requirement_id: str
    description: str


class Faults:
    """The faults a running service has switched on (by name, from ``--fault NAME``)."""

    def __init__(self, enabled: frozenset[str] = frozenset()) -> None:
        self.enabled = frozenset(enabled)

    def on(self, fault: Fault) -> bool:
        """Whether ``fault`` is switched on."""
        return fault.name in self.enabled

    def any_on(self, faults: Iterable[Fault]) -> bool:
        """Whether any of ``faults`` is switched on (with none on, no iteration at all)."""
        return bool(self.enabled) and any(fault.name in self.enabled for fault in faults)

    def __repr__(self) -> str:
        return f"Faults({sorted(self.enabled)!r})"


def declared_in(namespace: Mapping[str, object]) -> tuple[Fault, ...]:
    """The faults a module's namespace holds (``vars(module)``, ``globals()``), in order."""
    return tuple(value for value in namespace.values() if isinstance(value, Fault))
