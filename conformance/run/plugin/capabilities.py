"""Capabilities: a check that needs what the profile does not offer is skipped, with the fix.

Before a check runs: its findings are opened (:mod:`conformance.findings`), Allure gets its
labels, and the capabilities it needs (its ``needs`` markers, and what every requirement it
cites needs) are compared with the profile. A missing one is a skip whose reason says what
to add to the profile, never a failure.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from conformance import findings
from conformance.catalog import Catalog
from conformance.run.plugin.allure import allure_labels
from conformance.run.plugin.citations import REQUIREMENTS_KEY
from conformance.run.plugin.options import NEEDS_MARKERS
from conformance.run.plugin.state import run_state
from conformance.target.adapter_declaration import UNDECLARED_FIX
from conformance.target.profile import CapabilityMissing, Profile

__all__ = ["missing_capability"]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    ids = item.stash.get(REQUIREMENTS_KEY, ())
    if not ids:
        return
    findings.begin(ids)
    state = run_state(item.config)
    if item.config.pluginmanager.has_plugin("allure_listener"):
        allure_labels(state.catalog, ids, item.nodeid)
    if state.profile is not None:
        missing = missing_capability(_needs(item, state.catalog, ids), state.profile)
        if missing:
            pytest.skip(missing)


def _needs(item: pytest.Item, catalog: Catalog, ids: Sequence[str]) -> set[str]:
    """The capabilities a check needs: its needs markers, and what every requirement it
    cites needs (the catalog's ``needs``; a need of only some of them may be met another
    way by this check)."""
    marked = {name for name in NEEDS_MARKERS if item.get_closest_marker(name)}
    common = set.intersection(*({need.value for need in catalog[i].needs} for i in ids))
    return marked | common


def missing_capability(needs: set[str], profile: Profile) -> str | None:
    """A skip reason ``needs <capability>: <what to add to the profile>``, or None."""
    if "destructive" in needs and not profile.budgets.destructive:
        return "needs destructive: set [budgets] destructive = true in the profile"
    if "dns" in needs and profile.dns is None:
        return "needs dns: add a [dns] table (server, domain) to the profile"
    if "console" in needs and not profile.sessions:
        return "needs console: add [sessions.primary] with token (or token_env) to the profile"
    if "adapter" in needs and not profile.adapter.declared:
        return str(CapabilityMissing("adapter", UNDECLARED_FIX))
    if "clock" in needs:
        reason = profile.clock.missing()
        if reason is not None:
            return str(CapabilityMissing("clock", reason))
    return None
