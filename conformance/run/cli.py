"""``genapi-conformance``: the command line of the suite.

Subcommands:

* ``run``: run the checks and write the reports. With no ``--profile`` it starts the
  bundled reference implementation on loopback (a fresh store, provisioned accounts and
  keys, callback hosts resolved through the run's DNS server, which this process serves
  for every worker: see :mod:`conformance.run.launcher`) and runs against it; ``--fault
  NAME`` starts it with a fault injected, ``--variant`` as the variant that takes the
  other legitimate side of every choice the spec leaves open.
* ``init-profile PATH``: write the commented profile template, to fill in for a target.
* ``serve-reference ...`` and ``faults ...``: pass through to ``python -m reference``.

Exit codes of ``run``: 0 no stated (MUST) requirement failed and the harness never broke
(warnings, skips and untested requirements do not count); 1 a MUST requirement failed;
2 usage or profile error; 3 harness error (the reference did not start, a check broke,
pytest was interrupted).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import pytest
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from conformance.observe.dns import DnsServer, run_zone_dir
from conformance.reports import (
    ALLURE_DIR,
    HTML_NAME,
    JSON_NAME,
    JUNIT_NAME,
    new_report_dir,
)
from conformance.run.launcher import EmbeddedReference, LaunchError
from conformance.run.plugin import RUN_KEY, is_warning
from conformance.run.plugin.state import Preloaded
from conformance.secrets import Redactor
from conformance.target.profile import Profile, ProfileError, load_profile, write_template
from conformance.verdicts import RunVerdicts, Verdict

__all__ = [
    "EXIT_FAILED",
    "EXIT_HARNESS",
    "EXIT_OK",
    "EXIT_USAGE",
    "exit_code",
    "main",
    "pytest_args",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_HARNESS = 3

#: How long the run's DNS server waits, once pytest returned, for a process still using
#: its zone (none should remain: the workers have ended).
DNS_LINGER_S = 5.0
#: pytest's own output of a run, kept next to the reports (redacted).
PYTEST_LOG = "pytest-output.txt"


def _reference(argv: list[str]) -> int:
    # The suite never imports the reference implementation: it runs it as a process.
    os.execv(sys.executable, [sys.executable, "-m", "reference", *argv])  # noqa: S606
    return 0  # pragma: no cover (execv does not return)


_EXIT_CODES = (
    "Exit codes of run: 0 conformant (no MUST requirement failed, no harness error), "
    "1 a MUST requirement failed, 2 usage or profile error, 3 harness error."
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="genapi-conformance",
        description="Conformance suite for the Generation API.",
        epilog=_EXIT_CODES,
    )
    commands = parser.add_subparsers(
        dest="command", metavar="{run,init-profile,serve-reference,faults}"
    )
    run = commands.add_parser(
        "run",
        help="run the checks and write the reports",
        description="Run the checks against a target profile, or against the embedded "
        "reference implementation when no profile is given.",
        epilog=_EXIT_CODES,
    )
    run.add_argument(
        "--profile",
        type=Path,
        metavar="FILE",
        help="target profile (default: $GENAPI_PROFILE, "
        "else the embedded reference implementation)",
    )
    run.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="ID",
        help="only the checks of this requirement id (repeatable)",
    )
    run.add_argument(
        "--area",
        action="append",
        default=[],
        metavar="AREA",
        help="only the checks of this area (repeatable)",
    )
    run.add_argument(
        "--report-dir",
        type=Path,
        metavar="DIR",
        help="where the reports go (default: reports/<UTC timestamp>/)",
    )
    run.add_argument(
        "--workers",
        type=int,
        default=2,
        metavar="N",
        help="parallel pytest-xdist workers (default 2; 0 runs in this process)",
    )
    run.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="NAME",
        help="inject this fault into the embedded reference (repeatable; "
        "see `genapi-conformance faults`)",
    )
    run.add_argument(
        "--variant",
        action="store_true",
        help="run against the embedded reference taking the other legitimate side of every "
        "choice the spec leaves open (its profile declares them)",
    )
    run.add_argument(
        "-k",
        dest="keyword",
        metavar="EXPR",
        help="only checks whose names match this pytest -k expression",
    )
    init = commands.add_parser("init-profile", help="write the commented profile template")
    init.add_argument("path", type=Path)
    init.add_argument("--force", action="store_true", help="replace an existing file")
    commands.add_parser(
        "serve-reference",
        help="run the reference implementation (python -m reference serve ...)",
        add_help=False,
    )
    commands.add_parser("faults", help="list the reference's injectable faults", add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "serve-reference":
        return _reference(["serve", *args[1:]])
    if args and args[0] == "faults":
        return _reference(["faults", *args[1:]])
    parser = _parser()
    try:
        options = parser.parse_args(args)
    except SystemExit as exit_:
        return EXIT_OK if exit_.code == 0 else EXIT_USAGE
    if options.command == "run":
        return run(options)
    if options.command == "init-profile":
        return init_profile(options.path, force=options.force)
    parser.print_help()
    return EXIT_USAGE


def init_profile(path: Path, *, force: bool = False) -> int:
    try:
        written = write_template(path, overwrite=force)
    except FileExistsError as error:
        print(f"genapi-conformance: {error} (or pass --force)", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {written}; fill it in, then: genapi-conformance run --profile {written}")
    return EXIT_OK


def run(options: argparse.Namespace) -> int:
    """``genapi-conformance run``: pick the target, run pytest in this process, summarise."""
    err = Console(stderr=True, highlight=False)
    if options.workers < 0:
        err.print("genapi-conformance: --workers must be 0 or more")
        return EXIT_USAGE
    profile_arg = options.profile or (
        Path(os.environ["GENAPI_PROFILE"]) if os.environ.get("GENAPI_PROFILE") else None
    )
    if profile_arg is not None and (options.fault or options.variant):
        flag = "--fault" if options.fault else "--variant"
        err.print(
            f"genapi-conformance: {flag} applies only to the embedded reference "
            "(run without --profile)"
        )
        return EXIT_USAGE
    report_dir = (options.report_dir or new_report_dir()).resolve()
    if profile_arg is not None:
        try:
            profile = load_profile(profile_arg)
        except ProfileError as error:
            err.print(str(error), markup=False)
            return EXIT_USAGE
        with _serve_dns(profile, profile_arg, err):
            return _run_pytest(options, Preloaded(profile_arg, profile), report_dir, err)
    err.print(
        "no --profile: starting the embedded reference implementation"
        + (" (variant)" if options.variant else "")
        + (f" with faults {', '.join(options.fault)}" if options.fault else "")
    )
    try:
        with EmbeddedReference(faults=options.fault, variant=options.variant) as embedded_profile:
            try:
                profile = load_profile(embedded_profile)
            except ProfileError as error:
                # The embedded reference wrote a profile we cannot read: our bug.
                err.print(str(error), markup=False)
                return EXIT_HARNESS
            return _run_pytest(options, Preloaded(embedded_profile, profile), report_dir, err)
    except LaunchError as error:
        err.print(f"genapi-conformance: {error}", markup=False)
        return EXIT_HARNESS


@contextlib.contextmanager
def _serve_dns(profile: Profile, profile_path: Path, err: Console) -> Iterator[DnsServer | None]:
    """Serve the profile's ``[dns]`` zone from this process for the whole run, if it has one.

    The workers' ``dns_server`` fixture would serve it too (the first to come), but one
    worker may finish long before another still resolving names: served from here, the
    zone outlives every worker without anyone waiting for the others. A server this
    process cannot start (the port taken) is left for the fixture to report per check.
    """
    dns = profile.dns
    zone_dir = None if dns is None else run_zone_dir(profile_path, dns.host, dns.port, dns.zone_dir)
    if dns is None or zone_dir is None:
        yield None
        return
    try:
        server = DnsServer.join(dns.domain, dns.host, dns.port, zone_dir=zone_dir)
    except OSError as error:
        err.print(f"genapi-conformance: not serving DNS at {dns.host}:{dns.port}: {error}")
        yield None
        return
    try:
        yield server
    finally:
        server.stop(linger=DNS_LINGER_S)


def pytest_args(options: argparse.Namespace, profile: Path, report_dir: Path) -> list[str]:
    """The pytest command line of a run (also what a user can run by hand)."""
    checks = Path(__file__).resolve().parent.parent / "checks"
    args = [
        "--pyargs",
        "conformance.checks",
        # The suite's own settings, whatever pytest configuration the current folder has.
        "-c",
        str(checks / "pytest.ini"),
        "--rootdir",
        str(checks.parent.parent),
        "-p",
        "no:cacheprovider",
        "--profile",
        str(profile),
        "--report-dir",
        str(report_dir),
        # With a report folder the plugin puts junit.xml and allure-results/ into it.
        "--alluredir",
        str(report_dir / ALLURE_DIR),
        "-rfEs",
    ]
    if options.workers > 0:
        args += ["-n", str(options.workers), "--dist", "loadfile"]
    else:
        args += ["-p", "no:xdist"]
    for requirement_id in options.only:
        args += ["--only", requirement_id]
    for area in options.area:
        args += ["--area", area]
    if options.keyword:
        args += ["-k", options.keyword]
    return args


class _Progress:
    """A pytest plugin that shows a live count of finished checks (controller side)."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            TextColumn("checks"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[tally]}"),
            TimeElapsedColumn(),
            console=console,
            auto_refresh=False,  # refreshed per report: no thread writing during a check
            transient=True,
        )
        self.task = self.progress.add_task("checks", total=None, tally="")
        self.tally: dict[str, int] = {}

    def pytest_sessionstart(self) -> None:
        self.progress.start()

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if session.items:  # under xdist the controller collects nothing: see below
            self.progress.update(self.task, total=len(session.items))
            self.progress.refresh()

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Sequence[str]) -> None:
        self.progress.update(self.task, total=len(ids))
        self.progress.refresh()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":
            self.progress.advance(self.task)
        if report.when == "call" or (report.when == "setup" and not report.passed):
            kind: str = report.outcome
            if report.when == "setup" and report.failed:
                kind = "error"
            elif is_warning(report):
                kind = "warn"
            self.tally[kind] = self.tally.get(kind, 0) + 1
            text = " ".join(f"{n} {k}" for k, n in sorted(self.tally.items()))
            self.progress.update(self.task, tally=text)
        self.progress.refresh()

    def pytest_sessionfinish(self) -> None:
        self.progress.stop()


@contextlib.contextmanager
def _pytest_output(path: Path) -> Iterator[IO[str]]:
    with path.open("w", encoding="utf-8") as sink, contextlib.redirect_stdout(sink):
        yield sink


class _Verdicts:
    """A pytest plugin that keeps the run's verdicts once the plugin has judged them."""

    def __init__(self, redactor: Redactor) -> None:
        self.verdicts: RunVerdicts | None = None
        self.redactor = redactor

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        state = config.stash.get(RUN_KEY, None)  # None: the plugin refused the options
        if state is not None:
            self.verdicts, self.redactor = state.verdicts, state.redactor


def _run_pytest(
    options: argparse.Namespace, target: Preloaded, report_dir: Path, err: Console
) -> int:
    report_dir.mkdir(parents=True, exist_ok=True)
    progress, kept = _Progress(err), _Verdicts(target.profile.redactor())
    with tempfile.TemporaryDirectory(prefix="genapi-run-") as scratch:
        # pytest's terminal output goes to a file (the live count is on stderr); it is
        # redacted before it joins the reports.
        log = Path(scratch) / PYTEST_LOG
        with _pytest_output(log):
            code = pytest.main(
                pytest_args(options, target.path, report_dir), plugins=[progress, kept, target]
            )
        # The run's redactor: it also knows the secrets created during the run.
        (report_dir / PYTEST_LOG).write_bytes(kept.redactor.bytes(log.read_bytes()))
    # Every other artifact was redacted by the plugin as pytest finished.
    counts = None if kept.verdicts is None else _counts(kept.verdicts)
    _summarise(Console(highlight=False), target.profile, kept.verdicts, report_dir, int(code))
    return exit_code(int(code), counts)


def _counts(verdicts: RunVerdicts) -> dict[str, int]:
    return {verdict.value: count for verdict, count in verdicts.counts().items()}


def exit_code(pytest_code: int, counts: Mapping[str, int] | None) -> int:
    """The run's exit code from pytest's and the verdict counts (see the module docstring);
    *counts* is None when pytest stopped before judging anything."""
    if pytest_code == pytest.ExitCode.USAGE_ERROR:
        return EXIT_USAGE
    if counts is None or pytest_code in (
        pytest.ExitCode.INTERRUPTED,
        pytest.ExitCode.INTERNAL_ERROR,
    ):
        return EXIT_HARNESS
    if counts.get("fail", 0):
        return EXIT_FAILED
    if counts.get("error", 0):
        return EXIT_HARNESS
    if pytest_code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        return EXIT_HARNESS
    return EXIT_OK


_STYLES = {
    "fail": "bold red",
    "error": "bold magenta",
    "warn": "yellow",
    "pass": "green",
    "skip": "dim",
    "untested": "dim",
    "unobservable": "dim",
}


def _summarise(
    console: Console,
    profile: Profile,
    verdicts: RunVerdicts | None,
    report_dir: Path,
    pytest_code: int,
) -> None:
    """One screen: counts by verdict, what failed (ids with titles), where the reports are."""
    if verdicts is None:
        console.print(
            f"[bold red]no results: pytest stopped (exit {pytest_code}); "
            f"see {report_dir / PYTEST_LOG}[/]"
        )
        return
    table = Table(title=Text(f"Conformance of {profile.name}"))
    table.add_column("verdict")
    table.add_column("requirements", justify="right")
    for verdict, count in verdicts.counts().items():
        table.add_row(f"[{_STYLES.get(verdict.value, '')}]{verdict.value}[/]", str(count))
    console.print(table)
    for verdict in (Verdict.FAIL, Verdict.ERROR, Verdict.WARN):
        listed = verdicts.with_verdict(verdict)
        shown = listed[:15]
        for rv in shown:
            line = Text(f"{verdict.value.upper():5} ", style=_STYLES[verdict.value])
            # Ids and titles are plain text, never markup; the reasons are in the reports.
            line.append(f"{rv.requirement.id:<20} {rv.requirement.heading}")
            console.print(line, no_wrap=True, overflow="ellipsis")
        if len(listed) > len(shown):
            console.print(f"      … and {len(listed) - len(shown)} more {verdict.value}")
    coverage = verdicts.coverage()
    style = "bold red" if coverage.failed else "bold green" if coverage.conformant else "bold"
    console.print(Text(coverage.line(), style=style))
    for detail in coverage.details():
        console.print(Text(f"  {detail}", style="dim"))
    console.print(
        f"reports: {report_dir} ({HTML_NAME}, {JSON_NAME}, {JUNIT_NAME}, "
        f"{ALLURE_DIR}/, {PYTEST_LOG})"
    )


if __name__ == "__main__":
    raise SystemExit(main())
