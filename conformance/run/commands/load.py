"""``genapi-conformance load``: a key's per-minute limit verified under load, with Locust.

One process in Python cannot drive a tier of thousands of requests a minute against
several replicas; Locust can. This command starts Locust's master and ``--workers``
local worker processes (``locustfile.py`` of :mod:`conformance.load`), all of them
bounded in time (``--duration``, then a grace period, then killed), runs one key of the
profile past its ``requests_per_minute`` (read from GET /v1/account/tier, spec §8) while
another key sends a little, and judges the answers (:func:`conformance.load.judge_load`)
into the catalog's ids, written as a run's reports. Locust is the optional extra
``[load]``: ``pip install 'genapi-conformance[load]'``.

Exit codes as ``run``: 0 no MUST failed, 1 a MUST failed, 2 usage or profile error,
3 harness error (Locust missing or broken, the target unreachable).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

import conformance
import conformance.load
import genapi_spec
from conformance.catalog import load_catalog
from conformance.load import LoadJudgement, Record, judge_load
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
from conformance.verdicts import CheckResult, Outcome, judge

__all__ = ["EXIT_HARNESS", "main", "register"]

EXIT_HARNESS = 3
#: How long Locust's processes get past ``--duration`` to stop and write their records.
GRACE_S = 30.0
HTTP_TIMEOUT_S = 10.0
#: Bound on ``--reference-workers`` (the reference's own bound on ``serve --workers``).
MAX_REFERENCE_WORKERS = 32


def register(commands: argparse._SubParsersAction[Any]) -> None:
    parser = commands.add_parser(
        "load",
        help="verify a key's per-minute limit under load (Locust; extra [load])",
        description="Drive one key of the profile past its requests_per_minute from Locust "
        "workers, another key beside it, and judge the limit, the 429 headers and the other "
        "key. Without --profile, against the embedded reference.",
    )
    parser.add_argument("--profile", type=Path, metavar="FILE", help="target profile")
    parser.add_argument("--key", default="low-limit", metavar="ROLE", help="the key driven")
    parser.add_argument(
        "--other-key",
        metavar="ROLE",
        help="the key that must not be throttled (default: the role ROLE-second when the "
        "profile has it, else primary)",
    )
    parser.add_argument("--workers", type=int, default=2, metavar="N", help="Locust workers")
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


def main(options: argparse.Namespace) -> int:
    if (
        not 1 <= options.workers <= 64
        or not 1 <= options.reference_workers <= MAX_REFERENCE_WORKERS
        or options.users < 1
        or not 1 <= options.duration <= 600
    ):
        print(
            f"genapi-conformance: --workers 1..64, --reference-workers "
            f"1..{MAX_REFERENCE_WORKERS}, --users >= 1, --duration 1..600",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if options.profile is not None and options.reference_workers != 1:
        print(
            "genapi-conformance: --reference-workers starts the embedded reference: "
            "leave out --profile, or start your deployment with its processes yourself",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if importlib.util.find_spec("locust") is None:
        print(
            "genapi-conformance: load needs Locust: pip install 'genapi-conformance[load]'",
            file=sys.stderr,
        )
        return EXIT_HARNESS
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


def _load(options: argparse.Namespace, profile: Profile) -> int:
    limited, other = profile.key(options.key), profile.key(_other_role(options, profile))
    started = datetime.now(UTC)
    try:
        tier = httpx.get(
            profile.base_url + TIER_PATH,
            headers={"Authorization": f"Bearer {limited.key.reveal()}"},
            timeout=HTTP_TIMEOUT_S,
        ).json()
        rpm = int(tier["requests_per_minute"])
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as error:
        print(f"genapi-conformance: no tier record for {options.key}: {error}", file=sys.stderr)
        return EXIT_HARNESS
    with tempfile.TemporaryDirectory(prefix="genapi-load-") as scratch:
        env = {
            **os.environ,
            "GENAPI_LOAD_BASE_URL": profile.base_url,
            **_request_env(profile, options.path),
            "GENAPI_LOAD_KEY": limited.key.reveal(),
            "GENAPI_LOAD_OTHER_KEY": other.key.reveal(),
            "GENAPI_LOAD_OUT": scratch,
        }
        code = _run_locust(options, env)
        records = _records(Path(scratch))
    if code is not None:
        print(f"genapi-conformance: Locust failed: {code}", file=sys.stderr)
        return EXIT_HARNESS
    judgements = judge_load(records, rpm, same_account=limited.account == other.account)
    _report(options, profile, started, judgements)
    _summary(records, judgements, rpm)
    failed = any(j.outcome == "failed" for j in judgements)
    return EXIT_FAILED if failed else EXIT_OK


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


def _run_locust(options: argparse.Namespace, env: dict[str, str]) -> str | None:
    """Run the master and the workers to the end; what went wrong, or None."""
    locustfile = str(Path(conformance.load.__file__).resolve().parent / "locustfile.py")
    port = str(_free_port())
    base = [sys.executable, "-m", "locust", "-f", locustfile, "--loglevel", "WARNING"]
    master_args = [
        *base,
        "--master",
        "--headless",
        "--master-bind-host=127.0.0.1",
        f"--master-bind-port={port}",
        f"--expect-workers={options.workers}",
        "--expect-workers-max-wait=30",
        f"--users={options.users}",
        f"--spawn-rate={options.users}",
        f"--run-time={int(options.duration)}s",
        "--stop-timeout=5",
        "--only-summary",
    ]
    worker_args = [*base, "--worker", "--master-host=127.0.0.1", f"--master-port={port}"]
    deadline = time.monotonic() + options.duration + GRACE_S + 30
    processes = [subprocess.Popen(master_args, env=env, stdout=subprocess.DEVNULL)]  # noqa: S603
    processes += [
        subprocess.Popen(worker_args, env=env, stdout=subprocess.DEVNULL)  # noqa: S603
        for _ in range(options.workers)
    ]
    problem = None
    try:
        for process in processes:
            try:
                process.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                problem = "did not finish in time"
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
    return problem


def _request_env(profile: Profile, path: str | None) -> dict[str, str]:
    """The request the Locust users send: GET *path* when given, else the profile's rate
    request (a deployment that counts only submits is driven with submits)."""
    if path is not None:
        return {"GENAPI_LOAD_METHOD": "GET", "GENAPI_LOAD_PATH": path}
    rate = rate_request_of(profile)
    env = {"GENAPI_LOAD_METHOD": rate.method, "GENAPI_LOAD_PATH": rate.path}
    if rate.body is not None:
        env["GENAPI_LOAD_BODY"] = json.dumps(dict(rate.body))
    return env


def _records(directory: Path) -> list[Record]:
    records: list[Record] = []
    for path in sorted(directory.glob("worker-*.json")):
        records += [Record(*row) for row in json.loads(path.read_text(encoding="utf-8"))]
    return records


def _report(
    options: argparse.Namespace,
    profile: Profile,
    started: datetime,
    judgements: Sequence[LoadJudgement],
) -> None:
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


def _summary(records: Sequence[Record], judgements: Sequence[LoadJudgement], rpm: int) -> None:
    if records:
        span = max(r.received for r in records) - min(r.sent for r in records)
        rate = len(records) / span if span > 0 else 0.0
        limited = [r for r in records if r.role == "limited"]
        print(
            f"{len(records)} requests in {span:.1f} s: {rate:.0f} requests/s "
            f"({rate * 60:.0f} a minute; the key's limit {rpm} a minute); "
            f"{sum(r.status == 429 for r in limited)} of the key's {len(limited)} answered 429"
        )
    for j in judgements:
        print(f"{j.outcome.upper():7} {j.requirement_id}: {j.message}")
