"""The fault registry: every fault of the reference, collected from where it is declared.

A fault is a deliberate, named deviation from the spec that breaks exactly one
catalogued requirement (``conformance/requirements.yaml``), so the suite can prove it
catches that deviation. Start the service with ``--fault NAME`` (repeatable);
``python -m reference faults`` lists them.

Each fault is a :class:`~reference.fault.Fault` constant in the module whose behaviour it
changes, next to the code that asks ``faults.on(THAT_FAULT)``. To add one, declare it
there (name, requirement id, one-line description) and ask for it where it acts: the
registry finds every declaring module by walking the package. A test
(``tests/reference/test_faults.py``) checks that every declared fault is registered and
acted on, that names and ids are unique and that every id is in the catalog.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Mapping
from types import MappingProxyType, ModuleType

import reference
from reference.fault import Fault, declared_in

__all__ = ["DECLARING_MODULES", "FAULTS", "UnknownFault", "known"]


def _declaring_modules() -> tuple[ModuleType, ...]:
    """Every module of the package that declares a fault, found by walking it: a module
    that declares its first fault joins the registry with no entry to add here.
    (``__main__`` is not walked: importing it would run the service.)"""
    names = sorted(
        info.name
        for info in pkgutil.walk_packages(reference.__path__, "reference.")
        if info.name != "reference.__main__"
    )
    modules = (importlib.import_module(name) for name in names)
    return tuple(module for module in modules if declared_in(vars(module)))


#: Every module that declares faults, in name order.
DECLARING_MODULES: tuple[ModuleType, ...] = _declaring_modules()


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
