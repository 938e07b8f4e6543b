"""The run's state, resolved once per process when pytest is configured.

The profile is read here and nowhere else in a pytest process: the fixtures, the
capability skips and the reports take it from :class:`RunState`, and so does the one
:class:`~conformance.secrets.Redactor` that masks every secret of the run (it learns the
keys and tokens a check creates, so later evidence is masked too). The report folder is
decided here too, once: ``--report-dir``, else the controller's folder for an xdist
worker, else a fresh ``reports/<UTC timestamp>/``.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from conformance.catalog import Catalog, load_catalog
from conformance.reports import new_report_dir
from conformance.secrets import Redactor
from conformance.target.budget import RunBudget
from conformance.target.leases import Leases
from conformance.target.profile import Profile, ProfileError, load_profile
from conformance.verdicts import CheckResult, RunVerdicts

__all__ = [
    "LEASES_DIR",
    "RUN_KEY",
    "WORKER_DEADLINE",
    "WORKER_REPORT_DIR",
    "Preloaded",
    "RunState",
    "profile_path",
    "resolve",
    "run_state",
    "scratch_folder",
    "worker_name",
]

#: The xdist worker input that carries the controller's report folder.
WORKER_REPORT_DIR = "genapi_report_dir"
#: The file of the run's budget in its report folder (see :mod:`.budget`).
BUDGET_FILE = ".budget"
#: The xdist worker input that carries the run's deadline (see :mod:`.ceiling`).
WORKER_DEADLINE = "genapi_deadline"
#: The folder of the run's leases in its report folder (:mod:`conformance.target.leases`).
LEASES_DIR = ".leases"


@dataclass
class RunState:
    """Everything the plugin keeps for one pytest session (``config.stash[RUN_KEY]``)."""

    report_dir: Path
    explicit: bool
    profile_path: Path | None
    profile: Profile | None
    redactor: Redactor
    is_worker: bool
    only: tuple[str, ...]
    areas: tuple[str, ...]
    #: The arguments of ``genapi-conformance run`` that name this run's target, for rerun
    #: lines (see :class:`Preloaded`).
    target_args: tuple[str, ...] = ()
    #: The run's budget (``--budget-requests``, ``--budget-credits``), shared by its
    #: processes.
    budget: RunBudget | None = None
    #: When the run's ceiling passes (epoch seconds; None without a profile): fixed by
    #: the controller when the run starts, handed to the workers (:mod:`.ceiling`).
    deadline: float | None = None
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    results: dict[str, CheckResult] = field(default_factory=dict)
    requirements_by_nodeid: dict[str, tuple[str, ...]] = field(default_factory=dict)
    deselected: set[str] = field(default_factory=set)
    crashed: dict[str, str] = field(default_factory=dict)
    other_failures: int = 0
    verdicts: RunVerdicts | None = None
    written: list[Path] = field(default_factory=list)
    #: Report files that could not be written, each with its path and why (a full disk):
    #: the CLI names them and ends the run as a harness error.
    write_problems: list[str] = field(default_factory=list)

    @property
    def leases(self) -> Leases:
        """The run's leases, shared by its processes through the report folder."""
        return Leases(self.report_dir / LEASES_DIR)

    @property
    def catalog(self) -> Catalog:
        """The requirements catalog (loaded on first use: ordinary tests never need it)."""
        return load_catalog()


RUN_KEY = pytest.StashKey[RunState]()


# eq=False: a plugin object is hashed by identity (the profile holds mappings).
@dataclass(frozen=True, eq=False)
class Preloaded:
    """A profile already read by whoever starts pytest in this process (the CLI), handed
    over as a plugin object so that the file is not read a second time.

    *target_args* name the target as the user did (``--profile FILE`` as typed, or the
    embedded reference's ``--fault``/``--variant``): *path* may be a temporary profile
    that a rerun line must not name.
    """

    path: Path
    profile: Profile
    target_args: tuple[str, ...] = ()


def profile_path(config: pytest.Config) -> Path | None:
    """The profile this run targets: ``--profile``, else ``GENAPI_PROFILE``, else none."""
    value = config.getoption("genapi_profile") or os.environ.get("GENAPI_PROFILE")
    return Path(value) if value else None


def run_state(config: pytest.Config) -> RunState:
    """The run's state (the plugin sets it before any fixture or collection runs)."""
    return config.stash[RUN_KEY]


def worker_name(config: pytest.Config) -> str:
    """This process's name in the run: its pytest-xdist worker id (``gw0`` …), or
    ``main`` without xdist. Read from the session's own configuration, not the
    environment, which a pytest run started inside an xdist worker inherits."""
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    return str(workerinput["workerid"]) if workerinput else "main"


def scratch_folder(config: pytest.Config, name: str) -> Path:
    """The report folder's *name*: a folder the run's processes share while it runs and
    that no report needs. The controller (or the one process) empties it as the run
    starts (a reused report folder keeps an earlier run's) and removes it at the end."""
    folder = run_state(config).report_dir / name
    if not run_state(config).is_worker:
        shutil.rmtree(folder, ignore_errors=True)
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
    return folder


def resolve(config: pytest.Config) -> RunState:
    """Read the options, the profile (once) and decide the report folder."""
    path = profile_path(config)
    profile: Profile | None = None
    handed = [p for p in config.pluginmanager.get_plugins() if isinstance(p, Preloaded)]
    target_args: tuple[str, ...] = () if path is None else ("--profile", str(path))
    if path is not None and handed and handed[0].path == path:
        profile, target_args = handed[0].profile, handed[0].target_args
    elif path is not None:
        try:
            profile = load_profile(path)
        except ProfileError as error:
            raise pytest.UsageError(str(error)) from None
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    explicit_dir = config.getoption("genapi_report_dir")
    deadline: float | None = None
    if workerinput is not None:
        deadline = workerinput.get(WORKER_DEADLINE)
    elif profile is not None:
        deadline = time.time() + profile.timing.run_ceiling_seconds
    if workerinput is not None and workerinput.get(WORKER_REPORT_DIR):
        report_dir = Path(workerinput[WORKER_REPORT_DIR])
    elif explicit_dir:
        report_dir = Path(explicit_dir).resolve()
    else:
        report_dir = new_report_dir()
    return RunState(
        report_dir=report_dir,
        explicit=bool(explicit_dir) or profile is not None,
        profile_path=path,
        profile=profile,
        redactor=profile.redactor() if profile is not None else Redactor(),
        is_worker=workerinput is not None,
        only=tuple(config.getoption("genapi_only")),
        areas=tuple(config.getoption("genapi_area")),
        target_args=target_args,
        deadline=deadline,
        budget=_budget(config, report_dir, profile, is_worker=workerinput is not None),
    )


def _budget(
    config: pytest.Config, report_dir: Path, profile: Profile | None, *, is_worker: bool
) -> RunBudget | None:
    """The run's budget: made by the controller in the report folder, opened there by the
    workers (``--budget-requests`` and ``--budget-credits`` reach them with the other
    options). A budget of credits needs the profile's price of a submit."""
    requests: int | None = config.getoption("genapi_budget_requests")
    credits: int | None = config.getoption("genapi_budget_credits")
    if requests is None and credits is None:
        return None
    price = 0
    if credits is not None:
        price_given = None if profile is None else profile.budgets.credits_per_submit
        if price_given is None:
            raise pytest.UsageError(
                "--budget-credits needs the most credits one submit may cost (the spec shows "
                "no price): set [budgets] credits_per_submit in the profile"
            )
        price = price_given
    path = report_dir / BUDGET_FILE
    if is_worker:
        return RunBudget(path, requests, credits, price)
    budget = RunBudget.create(path, requests, credits, price)
    config.add_cleanup(lambda: path.unlink(missing_ok=True))
    return budget
