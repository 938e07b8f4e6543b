"""The plugin's command-line options, ini option and markers."""

from __future__ import annotations

from typing import Final

import pytest

__all__ = ["NEEDS_MARKERS", "add_options", "register_markers"]

#: Capabilities a check may need; a profile that lacks one makes the check skip.
NEEDS_MARKERS: Final[dict[str, str]] = {
    "sandbox": "needs the sandbox contract ([sandbox]: prompts that make a generation fail "
    "or be cancelled)",
    "dns": "needs controllable DNS ([dns] in the profile); skipped without it",
    "console": "needs console sessions ([sessions.*] in the profile)",
    "destructive": "spends limited resources (the daily credit cap, keys up to the limit); "
    "runs only with [budgets] destructive = true",
    "slow": "takes more than a few seconds (timing-bound delivery chains)",
    "clock": "needs to get past 00:00 UTC on the target ([clock] in the profile: a request "
    "that moves its calendar clock, or wait_for_midnight = true)",
}


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("genapi-conformance", "Generation API conformance suite")
    group.addoption(
        "--profile",
        dest="genapi_profile",
        metavar="PATH",
        default=None,
        help="target profile (TOML) of the implementation under test; default: $GENAPI_PROFILE",
    )
    group.addoption(
        "--report-dir",
        dest="genapi_report_dir",
        metavar="DIR",
        default=None,
        help="where the reports go; default: reports/<UTC timestamp>/",
    )
    # The two selection filters, both repeatable (the CLI passes its own --only, --area on).
    for flag, dest, metavar, which in (
        ("--only", "genapi_only", "ID", "of this requirement id"),
        ("--area", "genapi_area", "AREA", "of requirements in this area"),
    ):
        group.addoption(
            flag,
            dest=dest,
            metavar=metavar,
            action="append",
            default=[],
            help=f"run only the checks {which} (repeatable)",
        )
    group.addoption(
        "--budget-requests",
        dest="genapi_budget_requests",
        metavar="N",
        type=int,
        default=None,
        help="send the target at most N requests in the whole run: the checks run cheapest "
        "first, and those the budget does not reach are reported as not run",
    )
    group.addoption(
        "--budget-credits",
        dest="genapi_budget_credits",
        metavar="M",
        type=int,
        default=None,
        help="spend at most M credits in the whole run, each submit counted at the profile's "
        "[budgets] credits_per_submit (given back when it is refused)",
    )
    parser.addini(
        "genapi_checks",
        type="paths",
        default=[],
        help="further folders whose tests are conformance checks (must cite a requirement)",
    )


def register_markers(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "requirement(*ids): the catalog requirement ids this check verifies "
        "(conformance/requirements.yaml); unknown ids fail collection",
    )
    config.addinivalue_line(
        "markers", "area(name): the spec area of a check (added from its requirements)"
    )
    for name, description in NEEDS_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {description}")
