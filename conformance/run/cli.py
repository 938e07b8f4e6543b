"""``genapi-conformance``: the command line of the suite.

Subcommands:

* ``run``: run the checks and write the reports. With no ``--profile`` it starts the
  bundled reference implementation on loopback (a fresh store, provisioned accounts and
  keys, callback hosts resolved through the run's DNS server, which this process serves
  for every worker: see :mod:`conformance.run.launcher`) and runs against it; ``--fault
  NAME`` starts it with a fault injected, ``--variant`` as the variant that takes the
  other legitimate side of every choice the spec leaves open.
  Its progress (:mod:`conformance.run.progress`) goes to stderr, its summary
  (:mod:`conformance.run.summary`) to stdout, pytest's own output to a file.
* ``init-profile PATH``: write the commented profile template, to fill in for a target.
* ``report allure RUN_DIR``: the Allure HTML report of a run (:mod:`.allure_report`).
* ``serve-reference ...`` and ``faults ...``: pass through to ``python -m reference``.
* ``requirements``, ``verify-signature``, ``listen``, ``diff``, ``keygen``, ``attest``,
  ``verify-attestation``, ``load``: one module each in :mod:`conformance.run.commands`.

Exit codes of ``run``: 0 no stated (MUST) requirement failed and the harness never broke
(warnings, skips and untested requirements do not count, unless ``--strict``: then a
warning is 1 too; with ``--baseline``, failures it lists do not count, and an entry that
now passes is 1: :mod:`conformance.run.baseline`); 1 a MUST requirement failed; 2 usage
or profile error (a report folder that cannot be written included: found before any
check runs); 3 harness error (the reference did not start, a check broke, pytest was
interrupted, a report file could not be written: each named with why), or a check the
target left without an answer (a request with none: nothing was judged).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import pytest
from rich.console import Console

from conformance.catalog import load_catalog
from conformance.observe.dns import DnsServer, run_zone_dir
from conformance.reports import (
    ALLURE_DIR,
    JSON_NAME,
    ReportWriteError,
    Reproduction,
    new_report_dir,
    prepare_report_dir,
)
from conformance.run import allure_report
from conformance.run.baseline import (
    BaselineError,
    BaselineOutcome,
    judge_run,
    load_baseline,
    record_baseline,
)
from conformance.run.check_index import checks_pytest_args
from conformance.run.commands import (
    attest,
    diff,
    keygen,
    listen,
    load,
    requirements,
    verify_attestation,
    verify_signature,
)
from conformance.run.launcher import EmbeddedReference, LaunchError
from conformance.run.plugin import RUN_KEY
from conformance.run.plugin.citations import collected_modules
from conformance.run.plugin.run import reproduction
from conformance.run.plugin.state import Preloaded
from conformance.run.progress import RunProgress
from conformance.run.summary import RunEnd, summarise
from conformance.run.timings import TimingsError, load_timings, table
from conformance.secrets import Redactor
from conformance.target.profile import Profile, ProfileError, load_profile, write_template
from conformance.verdicts import RunVerdicts

__all__ = [
    "DEFAULT_WORKERS",
    "EXIT_FAILED",
    "EXIT_HARNESS",
    "EXIT_OK",
    "EXIT_USAGE",
    "exit_code",
    "main",
    "pytest_args",
    "workers_of",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_HARNESS = 3

#: pytest-xdist workers of a run: most checks wait on the target, not on the CPU, and each
#: long chain of checks (``conformance/run/plugin/schedule.py``) holds a worker while the
#: others run the rest, so a run has more workers than a machine has cores (measured on 2
#: cores: 2 workers 5m25s, 8 workers 2m05s for the full run against the reference).
DEFAULT_WORKERS = 8


def workers_of(options: argparse.Namespace) -> int:
    """The run's workers: as given, else :data:`DEFAULT_WORKERS`; a budgeted run, else
    none (one process): its checks then run exactly cheapest first, where parallel
    workers would each spend the budget on whatever check they had started.

    A run restricted by --only/--area has no more workers than check modules it collects
    (a worker runs a module at a time): one more would only start, import the suite and
    stop, about two seconds of CPU each.
    """
    if options.workers is not None:
        workers = int(options.workers)
    else:
        budgeted = options.budget_requests is not None or options.budget_credits is not None
        workers = 0 if budgeted else DEFAULT_WORKERS
    if workers > 0 and (options.only or options.area):
        modules = collected_modules(load_catalog(), options.only, options.area)
        workers = min(workers, len(modules))
    return workers


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
    "Exit codes of run: 0 no MUST requirement failed and no harness error (whether every "
    "MUST was checked is the verdict line's to say), "
    "1 a MUST requirement failed (or, with --strict, a warning; with --baseline, one it "
    "does not list, or one it lists now passes), 2 usage or profile error, "
    "3 harness error."
)


def _parser() -> argparse.ArgumentParser:
    """The command line. Each subcommand sets ``handler`` (options → exit code); a new
    command is one ``add_parser`` and one ``set_defaults(handler=...)``."""
    parser = argparse.ArgumentParser(
        prog="genapi-conformance",
        description="Conformance suite for the Generation API.",
        epilog=_EXIT_CODES,
    )
    commands = parser.add_subparsers(dest="command")
    _add_run(commands)
    init = commands.add_parser("init-profile", help="write the commented profile template")
    init.add_argument("path", type=Path)
    init.add_argument("--force", action="store_true", help="replace an existing file")
    init.set_defaults(handler=lambda options: init_profile(options.path, force=options.force))
    allure_report.register(commands)
    # Passed through to the reference (see main); listed here for --help.
    commands.add_parser(
        "serve-reference",
        help="run the reference implementation (python -m reference serve ...)",
        add_help=False,
    )
    commands.add_parser("faults", help="list the reference's injectable faults", add_help=False)
    for command in (
        keygen,
        attest,
        verify_attestation,
        verify_signature,
        load,
        requirements,
        diff,
        listen,
    ):
        command.register(commands)
    return parser


def _add_run(commands: Any) -> None:
    run_parser = commands.add_parser(
        "run",
        help="run the checks and write the reports",
        description="Run the checks against a target profile, or against the embedded "
        "reference implementation when no profile is given.",
        epilog=_EXIT_CODES,
    )
    run_parser.set_defaults(handler=run)
    add = run_parser.add_argument
    add(
        "--profile",
        type=Path,
        metavar="FILE",
        help="target profile (default: $GENAPI_PROFILE, "
        "else the embedded reference implementation)",
    )
    add(
        "--only",
        action="append",
        default=[],
        metavar="ID",
        help="only the checks of this requirement id (repeatable)",
    )
    add(
        "--area",
        action="append",
        default=[],
        metavar="AREA",
        help="only the checks of this area (repeatable)",
    )
    add(
        "--report-dir",
        type=Path,
        metavar="DIR",
        help="where the reports go (default: reports/<UTC timestamp>/)",
    )
    add(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help=f"parallel pytest-xdist workers (default {DEFAULT_WORKERS}, or 0 with a budget; "
        "0 runs in this process)",
    )
    add(
        "--fault",
        action="append",
        default=[],
        metavar="NAME",
        help="inject this fault into the embedded reference (repeatable; "
        "see `genapi-conformance faults`)",
    )
    add(
        "--variant",
        action="store_true",
        help="run against the embedded reference taking the other legitimate side of every "
        "choice the spec leaves open (its profile declares them)",
    )
    add(
        "-k",
        dest="keyword",
        metavar="EXPR",
        help="only checks whose names match this pytest -k expression",
    )
    add(
        "--strict",
        action="store_true",
        help="warnings (interpretations not met) fail the run too: exit 1",
    )
    add(
        "--baseline",
        type=Path,
        metavar="FILE",
        help="known failures by requirement id with a reason (TOML or YAML): the run passes "
        "when only these fail, and fails when one of them now passes (stale)",
    )
    add(
        "--budget-requests",
        type=int,
        metavar="N",
        help="send the target at most N requests in the whole run (for deployments where "
        "requests cost money): the checks run cheapest first, and those the budget does not "
        "reach are reported as not run, never as passed",
    )
    add(
        "--budget-credits",
        type=int,
        metavar="M",
        help="spend at most M credits in the whole run: each submit counts the profile's "
        "[budgets] credits_per_submit (the spec shows no price) and gets it back when refused; "
        "what the budget does not reach is reported as not run",
    )
    add(
        "--timings",
        action="store_true",
        help="after the summary, where the run's time went: its chains of checks, the "
        "longest, wall time over it and the critical path (conformance.run.timings)",
    )
    loudness = run_parser.add_mutually_exclusive_group()
    loudness.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress; the summary is the verdict, the counts and the report's path",
    )
    loudness.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="a line per check that does not pass as it finishes; "
        "the summary lists skipped and untested requirements too",
    )


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
    handler = getattr(options, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_USAGE
    code: int = handler(options)
    return code


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
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    for name in ("budget_requests", "budget_credits"):
        if getattr(options, name) is not None and getattr(options, name) < 1:
            err.print(f"genapi-conformance: --{name.replace('_', '-')} must be 1 or more")
            return EXIT_USAGE
    if options.workers is not None and options.workers < 0:
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
    if options.baseline is not None:
        try:
            options.baseline = load_baseline(options.baseline, load_catalog())
        except BaselineError as error:
            err.print(f"genapi-conformance: {error}", markup=False)
            return EXIT_USAGE
    report_dir = (options.report_dir or new_report_dir()).resolve()
    try:
        prepare_report_dir(report_dir)
    except ReportWriteError as error:
        err.print(f"genapi-conformance: {error}", markup=False)
        return EXIT_USAGE
    if profile_arg is not None:
        try:
            profile = load_profile(profile_arg)
        except ProfileError as error:
            err.print(str(error), markup=False)
            return EXIT_USAGE
        target = Preloaded(profile_arg, profile, ("--profile", str(profile_arg)))
        with _serve_dns(profile, profile_arg, err):
            return _run_pytest(options, target, report_dir)
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
            rerun_target = tuple(word for name in options.fault for word in ("--fault", name)) + (
                ("--variant",) if options.variant else ()
            )
            target = Preloaded(embedded_profile, profile, rerun_target)
            return _run_pytest(options, target, report_dir)
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
    args = [
        *checks_pytest_args(),
        "--profile",
        str(profile),
        "--report-dir",
        str(report_dir),
        # With a report folder the plugin puts junit.xml and allure-results/ into it.
        "--alluredir",
        str(report_dir / ALLURE_DIR),
        "-rfEs",
    ]
    workers = workers_of(options)
    if workers > 0:
        args += ["-n", str(workers), "--dist", "loadfile"]
    else:
        args += ["-p", "no:xdist"]
    for requirement_id in options.only:
        args += ["--only", requirement_id]
    for area in options.area:
        args += ["--area", area]
    if options.keyword:
        args += ["-k", options.keyword]
    if options.budget_requests is not None:
        args += ["--budget-requests", str(options.budget_requests)]
    if options.budget_credits is not None:
        args += ["--budget-credits", str(options.budget_credits)]
    return args


@contextlib.contextmanager
def _pytest_output(path: Path) -> Iterator[IO[str]]:
    with path.open("w", encoding="utf-8") as sink, contextlib.redirect_stdout(sink):
        yield sink


class _Verdicts:
    """A pytest plugin that keeps the run's verdicts once the plugin has judged them."""

    def __init__(self, redactor: Redactor) -> None:
        self.verdicts: RunVerdicts | None = None
        self.redactor = redactor
        self.reproduction = Reproduction()
        self.write_problems: list[str] = []
        self.budget: str | None = None

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        state = config.stash.get(RUN_KEY, None)  # None: the plugin refused the options
        if state is not None:
            self.verdicts, self.redactor = state.verdicts, state.redactor
            self.reproduction = reproduction(config, state)
            # The same list: the plugin's clean-up, after this hook, may still add to it.
            self.write_problems = state.write_problems
            if state.budget is not None:
                self.budget = state.budget.spent_words()


def _run_pytest(options: argparse.Namespace, target: Preloaded, report_dir: Path) -> int:
    kept = _Verdicts(target.profile.redactor())
    started = time.monotonic()
    # The progress writes to its own copy of stderr: pytest captures file descriptor 2
    # while a check runs, and progress lines come from a timer while checks run.
    with (
        os.fdopen(os.dup(sys.stderr.fileno()), "w", encoding="utf-8") as stderr,
        tempfile.TemporaryDirectory(prefix="genapi-run-") as scratch,
    ):
        progress = RunProgress(
            stderr, live=stderr.isatty(), quiet=options.quiet, verbose=options.verbose
        )
        # pytest's terminal output goes to a file (the progress is on stderr); it is
        # redacted before it joins the reports.
        log = Path(scratch) / PYTEST_LOG
        try:
            with _pytest_output(log):
                code = pytest.main(
                    pytest_args(options, target.path, report_dir), plugins=[progress, kept, target]
                )
        except OSError as error:
            # What the plugin did not catch itself: still a message, never a traceback.
            stderr.write(f"genapi-conformance: the run broke: {error}\n")
            return EXIT_HARNESS
        try:
            # The run's redactor: it also knows the secrets created during the run.
            (report_dir / PYTEST_LOG).write_bytes(kept.redactor.bytes(log.read_bytes()))
        except OSError as error:
            (report_dir / PYTEST_LOG).unlink(missing_ok=True)
            kept.write_problems.append(f"could not write {report_dir / PYTEST_LOG}: {error}")
    # Every other artifact was redacted by the plugin as pytest finished.
    baseline = None
    if options.baseline is not None and kept.verdicts is not None:
        baseline = judge_run(options.baseline, kept.verdicts, strict=options.strict)
        if (report_dir / JSON_NAME).is_file():
            try:
                record_baseline(report_dir / JSON_NAME, baseline)
            except OSError as error:
                kept.write_problems.append(f"could not add the baseline to results.json: {error}")
    end = RunEnd(
        target=target.profile.name,
        verdicts=kept.verdicts,
        report_dir=report_dir,
        duration_s=time.monotonic() - started,
        pytest_code=int(code),
        reproduction=kept.reproduction,
        strict=options.strict,
        baseline=baseline,
        budget=kept.budget,
    )
    console = Console(highlight=False, soft_wrap=True)
    summarise(console, end, load_catalog(), quiet=options.quiet, verbose=options.verbose)
    if options.timings:
        with contextlib.suppress(TimingsError):  # no check ran: nothing to show
            console.print("\n".join(table(load_timings(report_dir))), markup=False)
    counts = None if kept.verdicts is None else _counts(kept.verdicts)
    if kept.write_problems:
        # The verdicts stand, but the reports that carry them are not all there.
        err = Console(stderr=True, highlight=False, soft_wrap=True)
        for problem in kept.write_problems:
            err.print(f"genapi-conformance: {problem}", markup=False)
        err.print(
            f"genapi-conformance: the reports in {report_dir} are incomplete (harness error)",
            markup=False,
        )
        return EXIT_HARNESS
    return exit_code(int(code), counts, strict=options.strict, baseline=baseline)


def _counts(verdicts: RunVerdicts) -> dict[str, int]:
    return {verdict.value: count for verdict, count in verdicts.counts().items()}


def exit_code(
    pytest_code: int,
    counts: Mapping[str, int] | None,
    *,
    strict: bool = False,
    baseline: BaselineOutcome | None = None,
) -> int:
    """The run's exit code from pytest's and the verdict counts (see the module docstring);
    *counts* is None when pytest stopped before judging anything. *strict*: a warning
    fails the run too. *baseline*: failures it knows do not fail the run, a stale entry
    does (:mod:`conformance.run.baseline`)."""
    if pytest_code == pytest.ExitCode.USAGE_ERROR:
        return EXIT_USAGE
    if counts is None or pytest_code in (
        pytest.ExitCode.INTERRUPTED,
        pytest.ExitCode.INTERNAL_ERROR,
    ):
        return EXIT_HARNESS
    known = baseline is not None and baseline.excuses_failures
    if counts.get("fail", 0) and not known:
        return EXIT_FAILED
    if counts.get("error", 0):
        return EXIT_HARNESS
    failed_checks_known = known and pytest_code == pytest.ExitCode.TESTS_FAILED
    if (
        pytest_code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
        and not failed_checks_known
    ):
        return EXIT_HARNESS
    if strict and counts.get("warn", 0) and not known:
        return EXIT_FAILED
    if baseline is not None and baseline.stale:
        return EXIT_FAILED
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
