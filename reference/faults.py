"""The fault registry: every fault of the reference, collected from where it is declared.

A fault is a deliberate, named deviation from the spec that breaks exactly one
catalogued requirement (``conformance/requirements.yaml``), so the suite can prove it
catches that deviation. Start the service with ``--fault NAME`` (repeatable);
``python -m reference faults`` lists them.

Each fault is a :class:`~reference.fault.Fault` constant in the module whose behaviour it
changes, next to the code that asks ``faults.on(THAT_FAULT)``. To add one, declare it
there (name, requirement id, one-line description) and ask for it where it acts; a
module that declares its first fault joins ``DECLARING_MODULES`` below. A test
(``tests/reference/test_faults.py``) checks that every declared fault is registered and
acted on, that names and ids are unique and that every id is in the catalog.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType, ModuleType

from reference import accounts, app, auth, console, generations, ratelimit, worker
from reference.fault import Fault, declared_in
from reference.webhooks import (
    attempts,
    delivery_faults,
    dispatcher,
    event_faults,
    events,
    lists,
    redeliver,
    registered,
    targets,
    url_faults,
)

__all__ = ["DECLARING_MODULES", "FAULTS", "UnknownFault", "known"]

#: Every module that declares faults.
DECLARING_MODULES: tuple[ModuleType, ...] = (
    accounts,
    app,
    auth,
    console,
    generations,
    ratelimit,
    worker,
    attempts,
    delivery_faults,
    dispatcher,
    event_faults,
    events,
    lists,
    redeliver,
    registered,
    targets,
    url_faults,
)


def _collect(modules: Iterable[ModuleType]) -> Mapping[str, Fault]:
    found: dict[str, Fault] = {}
    for module in modules:
        for fault in declared_in(vars(module)):
            if found.setdefault(fault.name, fault) is not fault:
                raise ValueError(f"two faults are named {fault.name!r}")
    return MappingProxyType(dict(sorted(found.items())))


#: Every known fault by name, in name order.
FAULTS: Mapping[str, Fault] = _collect(DECLARING_MODULES)


class UnknownFault(ValueError):
    """A fault name that is not in the registry (refused at start-up)."""


def known(names: Iterable[str]) -> frozenset[str]:
    """``names`` as a set, once each is found in the registry (else :class:`UnknownFault`)."""
    wanted = frozenset(names)
    unknown = sorted(wanted - FAULTS.keys())
    if unknown:
        raise UnknownFault(
            f"unknown fault(s): {', '.join(unknown)}; "
            "`python -m reference faults` lists the known ones"
        )
    return wanted
