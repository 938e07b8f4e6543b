"""``genapi-conformance load``: a key's per-minute limit verified under load, with Locust.

One process in Python cannot drive a tier of thousands of requests a minute against
several replicas; Locust can. This command starts Locust's master and ``--workers``
local worker processes (``locustfile.py`` of :mod:`conformance.load`), all of them
bounded in time (``--duration``, then a grace period, then killed), runs one key of the
profile past its ``requests_per_minute`` (read from GET /v1/account/tier, spec §8) while
another key sends a little, and judges the answers (:func:`conformance.load.judge_load`)
into the catalog's ids, written as a run's reports. With ``--daily-key ROLE`` a key whose
tier has a small requests_per_day is burst from every worker too (RATE-RPD-01).

Workers on other machines: the master waits (bounded) for ``--expect-workers`` remote
workers, each started with ``genapi-conformance load --master-host HOST``, which runs a
worker only, its keys read from its own ``--profile`` (no key travels over Locust's
channel). Every worker, local or remote, sends its records to the master over Locust's
messages (``locustfile.py``). Locust is the optional extra ``[load]``: ``pip install
'genapi-conformance[load]'``.

Exit codes as ``run``: 0 no MUST failed, 1 a MUST failed, 2 usage or profile error (the
expected workers never came included), 3 harness error (Locust missing or broken, the
target unreachable, a worker's records lost).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import socket
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

import conformance
import genapi_spec
from conformance.catalog import load_catalog
from conformance.load import (
    LoadJudgement,
    Record,
    judge_concurrency,
    judge_daily,
    judge_load,
)
from conformance.load.processes import (
    MAX_DURATION_S,
    MAX_WORKERS,
    Collected,
    Master,
    plan_digest,
    run_master,
    run_worker,
)
from conformance.provenance import catalog_sha256, distribution_sha256
from conformance.reports import (
    ReportWriteError,
    RunInfo,
    new_report_dir,
    prepare_report_dir,
    write_reports,
)
from conformance.run.commands import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from conformance.run.launcher import EmbeddedReference, LaunchError
from conformance.target.profile import Profile, ProfileError, load_profile
from conformance.target.setup import TIER_PATH, rate_request_of
from conformance.verdicts import CheckResult, Outcome, RunVerdicts, judge

__all__ = ["EXIT_HARNESS", "locust_request", "main", "register"]

EXIT_HARNESS = 3
HTTP_TIMEOUT_S = 10.0
#: Bound on ``--reference-workers`` (the reference's own bound on ``serve --workers``).
MAX_REFERENCE_WORKERS = 32
#: Bound on the users of the concurrency key (each holds one generation at a time).
MAX_CONCURRENCY_USERS = 1000
#: Locust's own default port, for a master that remote workers must find.
DEFAULT_MASTER_PORT = 5557


def register(commands: argparse._SubParsersAction[Any]) -> None:
    parser = commands.add_parser(
        "load",
        help="verify a key's per-minute limit under load (Locust; extra [load])",
        description="Drive one key of the profile past its requests_per_minute from Locust "
        "workers, another key beside it, and judge the limit, the 429 headers and the other "
        "key. Without --profile, against the embedded reference. With --master-host, run "
        "only a worker for a master started elsewhere.",
    )
    parser.add_argument("--profile", type=Path, metavar="FILE", help="target profile")
    parser.add_argument("--key", default="low-limit", metavar="ROLE", help="the key driven")
    parser.add_argument(
        "--other-key",
        metavar="ROLE",
        help="the key that must not be throttled (default: the role ROLE-second when the "
        "profile has it, else primary)",
    )
    parser.add_argument(
        "--daily-key",
        metavar="ROLE",
        help="also burst this key, whose tier has a small requests_per_day, from every worker "
        "and judge its daily limit (RATE-RPD-01; spends the key's day: the profile's "
        "[budgets] destructive must allow it)",
    )
    parser.add_argument(
        "--concurrency-key",
        metavar="ROLE",
        help="also submit generations with this key, whose tier has a small concurrent_limit, "
        "from more users than that limit, reading each to its end, and judge that no more "
        "than the limit ran at once (RATE-CONC-02, an interpretation: it can only warn)",
    )
    parser.add_argument(
        "--concurrency-users",
        type=int,
        metavar="N",
        help="users of --concurrency-key (default: twice its concurrent_limit, at least 4)",
    )
    parser.add_argument(
        "--workers", type=int, default=2, metavar="N", help="local Locust workers (0..64)"
    )
    parser.add_argument(
        "--expect-workers",
        type=int,
        default=0,
        metavar="N",
        help="remote workers to wait for besides the local ones (each started with "
        "--master-host); the master listens on --master-bind and --master-port",
    )
    parser.add_argument(
        "--master-bind",
        default="127.0.0.1",
        metavar="HOST",
        help="the address the master listens on (default loopback; remote workers need one "
        "they can reach)",
    )
    parser.add_argument(
        "--master-host",
        metavar="HOST",
        help="run only a Locust worker for the master on HOST (no judging; needs --profile "
        "and the master's --key, --other-key, --daily-key and --path)",
    )
    parser.add_argument(
        "--master-port",
        type=int,
        metavar="P",
        help=f"the master's port (a worker's to reach, a master's to listen on; default "
        f"{DEFAULT_MASTER_PORT} with remote workers, else a free one)",
    )
    parser.add_argument(
        "--connect-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="how long the master waits for its workers, and a worker for its master",
    )
    parser.add_argument(
        "--reference-workers",
        type=int,
        default=1,
        metavar="N",
        help="processes of the embedded reference (serve --workers N; without --profile)",
    )
    parser.add_argument("--users", type=int, default=20, metavar="N", help="concurrent users")
    parser.add_argument(
        "--duration", type=float, default=20.0, metavar="S", help="seconds of load (max 600)"
    )
    parser.add_argument(
        "--path",
        metavar="PATH",
        help="an authenticated GET path to drive (default: the profile's [rate] request, "
        "GET /v1/account/tier for reads, a refused image submit for submits)",
    )
    parser.add_argument("--fault", action="append", default=[], metavar="NAME")
    parser.add_argument("--report-dir", type=Path, metavar="DIR")
    parser.set_defaults(handler=main)


def _usage_error(options: argparse.Namespace) -> str | None:
    workers = options.workers + options.expect_workers
    if (
        not 0 <= options.workers <= MAX_WORKERS
        or not 0 <= options.expect_workers <= MAX_WORKERS
        or not 1 <= workers <= MAX_WORKERS
        or not 1 <= options.reference_workers <= MAX_REFERENCE_WORKERS
        or options.users < 1
        or not 1 <= options.duration <= MAX_DURATION_S
        or not 1 <= options.connect_timeout <= MAX_DURATION_S
        or (options.master_port is not None and not 1 <= options.master_port <= 65535)
        or (
            options.concurrency_users is not None
            and not 1 <= options.concurrency_users <= MAX_CONCURRENCY_USERS
        )
    ):
        return (
            f"--workers and --expect-workers 0..{MAX_WORKERS} (together at least 1), "
            f"--reference-workers 1..{MAX_REFERENCE_WORKERS}, --users >= 1, --duration and "
            f"--connect-timeout 1..{MAX_DURATION_S:g}, --master-port 1..65535, "
            f"--concurrency-users 1..{MAX_CONCURRENCY_USERS}"
        )
    if options.profile is not None and options.reference_workers != 1:
        return (
            "--reference-workers starts the embedded reference: leave out --profile, or start "
            "your deployment with its processes yourself"
        )
    if options.master_host is not None and options.profile is None:
        return "a worker (--master-host) reads its keys from its own --profile: give one"
    return None


def main(options: argparse.Namespace) -> int:
    problem = _usage_error(options)
    if problem is not None:
        print(f"genapi-conformance: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if importlib.util.find_spec("locust") is None:
        print(
            "genapi-conformance: load needs Locust: pip install 'genapi-conformance[load]'",
            file=sys.stderr,
        )
        return EXIT_HARNESS
    if options.master_host is not None:
        return _worker(options)
    options.report_dir = (options.report_dir or new_report_dir()).resolve()
    try:
        prepare_report_dir(options.report_dir)  # before any load is sent
    except ReportWriteError as error:
        print(f"genapi-conformance: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        with _target(options) as profile_path:
            profile = load_profile(profile_path)
            return _load(options, profile)
    except ProfileError as error:
        print(str(error), file=sys.stderr)
        return EXIT_USAGE
    except (LaunchError, ReportWriteError) as error:
        print(f"genapi-conformance: {error}", file=sys.stderr)
        return EXIT_HARNESS


def _worker(options: argparse.Namespace) -> int:
    """A worker only, for a master elsewhere: its keys from its own profile."""
    try:
        env = _locust_env(options, load_profile(options.profile))
    except ProfileError as error:
        print(str(error), file=sys.stderr)
        return EXIT_USAGE
    port = options.master_port or DEFAULT_MASTER_PORT
    print(f"worker for the master on {options.master_host}:{port}", flush=True)
    problem = run_worker(options.master_host, port, env, options.connect_timeout)
    if problem is not None:
        print(f"genapi-conformance: the Locust worker {problem}", file=sys.stderr)
        return EXIT_HARNESS
    return EXIT_OK


@contextlib.contextmanager
def _target(options: argparse.Namespace) -> Iterator[Path]:
    if options.profile is not None:
        yield options.profile
        return
    processes = options.reference_workers
    with EmbeddedReference(
        faults=options.fault,
        extra_args=["--workers", str(processes)] if processes > 1 else [],
        # The test clock lives in one process; the load needs no daily reset.
        test_clock=processes == 1,
    ) as embedded:
        yield embedded


def _tier(profile: Profile, role: str) -> dict[str, Any]:
    """The tier record of *role*'s key (GET /v1/account/tier)."""
    answer = httpx.get(
        profile.base_url + TIER_PATH,
        headers={"Authorization": f"Bearer {profile.key(role).key.reveal()}"},
        timeout=HTTP_TIMEOUT_S,
    )
    answer.raise_for_status()  # a 429 (a minute already spent) says so, not a missing field
    record: dict[str, Any] = answer.json()
    return record


def _load(options: argparse.Namespace, profile: Profile) -> int:
    limited, other = profile.key(options.key), profile.key(_other_role(options, profile))
    if options.daily_key is not None and not profile.budgets.destructive:
        print(
            "genapi-conformance: --daily-key spends the key's day: the profile's [budgets] "
            "destructive = false forbids it",
            file=sys.stderr,
        )
        return EXIT_USAGE
    env = _locust_env(options, profile)  # every role resolved before any load is sent
    started = datetime.now(UTC)
    try:
        rpm = int(_tier(profile, options.key)["requests_per_minute"])
        daily = _tier(profile, options.daily_key) if options.daily_key else None
        day_limits = (
            (int(daily["requests_per_day"]), int(daily["requests_per_minute"]))
            if daily is not None
            else None
        )
        concurrent_limit = (
            int(_tier(profile, options.concurrency_key)["concurrent_limit"])
            if options.concurrency_key
            else None
        )
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as error:
        print(f"genapi-conformance: no tier record: {error}", file=sys.stderr)
        return EXIT_HARNESS
    if concurrent_limit is not None:
        env["GENAPI_LOAD_CONC_USERS"] = str(
            options.concurrency_users or max(4, 2 * concurrent_limit)
        )
    master = _master(options, int(env.get("GENAPI_LOAD_CONC_USERS", "0")))
    if master.remote_workers:
        print(
            f"master on {master.bind_host}:{master.port}: waiting up to "
            f"{master.connect_timeout:g} s for {master.remote_workers} remote workers",
            flush=True,
        )
    collected = run_master(master, env)
    if collected.workers_missing is not None:
        print(f"genapi-conformance: {collected.workers_missing}", file=sys.stderr)
        return EXIT_USAGE
    if collected.problem is not None:
        print(f"genapi-conformance: {collected.problem}", file=sys.stderr)
        return EXIT_HARNESS
    records = collected.records
    judgements = judge_load(records, rpm, same_account=limited.account == other.account)
    if day_limits is not None:
        judgements.append(judge_daily(records, *day_limits))
    if concurrent_limit is not None:
        judgements.append(judge_concurrency(records, concurrent_limit))
    verdicts = _report(options, profile, started, judgements)
    _summary(records, judgements, verdicts, rpm, collected)
    # An interpretation not met is a warning, as in `run`: only a MUST fails the command.
    return EXIT_OK if verdicts.ok else EXIT_FAILED


def _master(options: argparse.Namespace, concurrency_users: int) -> Master:
    default_port = DEFAULT_MASTER_PORT if options.expect_workers else _free_port()
    return Master(
        bind_host=options.master_bind,
        port=options.master_port or default_port,
        local_workers=options.workers,
        remote_workers=options.expect_workers,
        users=options.users + concurrency_users,
        duration=options.duration,
        connect_timeout=options.connect_timeout,
    )


def _locust_env(options: argparse.Namespace, profile: Profile) -> dict[str, str]:
    """What the Locust users of this machine send, with which keys (from this machine's
    profile), and the plan's digest that the master compares across its workers."""
    request = locust_request(profile, options.path)
    roles = {
        "key": options.key,
        "other": _other_role(options, profile),
        "daily": options.daily_key or "",
        "concurrency": options.concurrency_key or "",
    }
    env = {
        **os.environ,
        "GENAPI_LOAD_BASE_URL": profile.base_url,
        **request,
        "GENAPI_LOAD_KEY": profile.key(roles["key"]).key.reveal(),
        "GENAPI_LOAD_OTHER_KEY": profile.key(roles["other"]).key.reveal(),
        "GENAPI_LOAD_PLAN": plan_digest(roles | request),
    }
    if options.daily_key:
        env["GENAPI_LOAD_DAILY_KEY"] = profile.key(options.daily_key).key.reveal()
    if options.concurrency_key:
        env["GENAPI_LOAD_CONC_KEY"] = profile.key(options.concurrency_key).key.reveal()
    return env


def _other_role(options: argparse.Namespace, profile: Profile) -> str:
    """``--other-key``, else a second key of the driven key's account (``ROLE-second``,
    which RATE-RPM-03 needs), else ``primary``."""
    if options.other_key:
        role: str = options.other_key
        return role
    second = f"{options.key}-second"
    return second if second in profile.keys else "primary"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def locust_request(profile: Profile, path: str | None) -> dict[str, str]:
    """The request the Locust users send, as their environment: GET *path* when given,
    else the profile's rate request (a deployment that counts only submits is driven with
    submits)."""
    if path is not None:
        return {"GENAPI_LOAD_METHOD": "GET", "GENAPI_LOAD_PATH": path}
    rate = rate_request_of(profile)
    env = {"GENAPI_LOAD_METHOD": rate.method, "GENAPI_LOAD_PATH": rate.path}
    if rate.body is not None:
        env["GENAPI_LOAD_BODY"] = json.dumps(dict(rate.body))
    return env


def _report(
    options: argparse.Namespace,
    profile: Profile,
    started: datetime,
    judgements: Sequence[LoadJudgement],
) -> RunVerdicts:
    catalog = load_catalog()
    checks = [
        CheckResult(
            nodeid=f"genapi-conformance load::{j.requirement_id}",
            requirement_ids=(j.requirement_id,),
            outcome=Outcome(j.outcome),
            duration=options.duration,
            message=j.message,
        )
        for j in judgements
    ]
    verdicts = judge([catalog[j.requirement_id] for j in judgements], checks)
    info = RunInfo(
        suite_version=conformance.__version__,
        spec_version=genapi_spec.SPEC_VERSION,
        api_version=profile.api_version,
        profile_name=profile.name,
        profile_sha256=None,
        base_url=profile.base_url,
        started_at=started,
        finished_at=datetime.now(UTC),
        suite_sha256=distribution_sha256(),
        catalog_sha256=catalog_sha256(),
    )
    write_reports(options.report_dir, info, verdicts)
    print(f"reports: {options.report_dir}")
    return verdicts


def _summary(
    records: Sequence[Record],
    judgements: Sequence[LoadJudgement],
    verdicts: RunVerdicts,
    rpm: int,
    collected: Collected,
) -> None:
    if records:
        span = max(r.received for r in records) - min(r.sent for r in records)
        rate = len(records) / span if span > 0 else 0.0
        limited = [r for r in records if r.role == "limited"]
        print(
            f"{len(records)} requests from {collected.workers} workers in {span:.1f} s: "
            f"{rate:.0f} requests/s "
            f"({rate * 60:.0f} a minute; the key's limit {rpm} a minute); "
            f"{sum(r.status == 429 for r in limited)} of the key's {len(limited)} answered 429"
        )
        daily = [r for r in records if r.role == "daily"]
        if daily:
            served = sum(r.status not in (0, 429) for r in daily)
            print(
                f"the daily key: {len(daily)} requests from "
                f"{collected.workers_by_role.get('daily', 0)} workers, {served} answered "
                "other than 429"
            )
    verdict = {rv.requirement.id: rv.verdict for rv in verdicts.requirements}
    for j in judgements:
        # The verdict's word: a failed interpretation is a warning.
        print(f"{verdict[j.requirement_id].upper():7} {j.requirement_id}: {j.message}")
