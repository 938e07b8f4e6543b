"""``genapi-conformance``: arguments, exit codes, init-profile, and a run against a profile."""

from __future__ import annotations

import argparse
import io
import socket
from pathlib import Path
from typing import Any

import dns.message
import dns.query
import pytest
from pytest_httpserver import HTTPServer
from rich.console import Console
from suite_run import SuiteRun, run_suite

from conformance.catalog import Level, load_catalog
from conformance.observe.dns import DnsServer, shared_zone_dir
from conformance.run import cli
from conformance.run.cli import (
    DEFAULT_WORKERS,
    EXIT_FAILED,
    EXIT_HARNESS,
    EXIT_OK,
    EXIT_USAGE,
    exit_code,
    main,
    pytest_args,
    workers_of,
)
from conformance.run.plugin.citations import OWN_CHECKS, collected_modules
from conformance.target.profile import load_profile, template_text

TIER = {
    "plan_code": "pro",
    "requests_per_minute": 60,
    "requests_per_day": 10000,
    "concurrent_limit": 4,
    "max_credits_per_day": 1000,
    "allowed_model_types": ["image", "video"],
}


#: The requirements test_tier.py checks (other check modules are not this test's business).
OWN_IDS = (
    "TIER-READ-01",
    *(f"TIER-FIELD-0{n}" for n in range(1, 9)),
    "CONSOLE-TIER-01",
    "CONSOLE-TIER-02",
)


def _counts(**nonzero: int) -> dict[str, Any]:
    counts = dict.fromkeys(("fail", "error", "warn", "pass", "skip", "untested"), 0)
    counts.update(nonzero)
    return {"counts": counts}


@pytest.mark.parametrize(
    ("pytest_code", "results", "expected"),
    [
        pytest.param(0, _counts(**{"pass": 3, "untested": 9}), EXIT_OK, id="all-pass-0"),
        pytest.param(0, _counts(warn=2, skip=1), EXIT_OK, id="warn-and-skip-0"),
        pytest.param(1, _counts(fail=1, error=1), EXIT_FAILED, id="must-failed-1"),
        pytest.param(1, _counts(error=1), EXIT_HARNESS, id="harness-error-3"),
        pytest.param(4, None, EXIT_USAGE, id="pytest-usage-2"),
        pytest.param(2, _counts(), EXIT_HARNESS, id="interrupted-3"),
        pytest.param(0, None, EXIT_HARNESS, id="no-results-3"),
        pytest.param(5, _counts(untested=9), EXIT_OK, id="nothing-selected-0"),
        pytest.param(1, _counts(**{"pass": 1}), EXIT_HARNESS, id="unexplained-failure-3"),
    ],
)
def test_exit_code_from_pytest_and_verdicts(
    pytest_code: int, results: dict[str, Any] | None, expected: int
) -> None:
    assert exit_code(pytest_code, None if results is None else results["counts"]) == expected


def test_strict_makes_warnings_fail_the_run() -> None:
    warned = _counts(warn=2, **{"pass": 3})["counts"]
    assert exit_code(0, warned) == EXIT_OK
    assert exit_code(0, warned, strict=True) == EXIT_FAILED
    assert exit_code(0, _counts(**{"pass": 3})["counts"], strict=True) == EXIT_OK


def _options(**overrides: Any) -> argparse.Namespace:
    values: dict[str, Any] = {
        "only": [],
        "area": [],
        "workers": 2,
        "keyword": None,
        "budget_requests": None,
        "budget_credits": None,
    }
    values.update(overrides)
    return argparse.Namespace(**values)


def test_pytest_args_pass_selection_and_workers(tmp_path: Path) -> None:
    args = pytest_args(
        _options(only=["TIER-READ-01"], area=["SIG"], keyword="tier"),
        tmp_path / "p.toml",
        tmp_path / "out",
    )
    joined = " ".join(args)
    assert "--pyargs conformance.checks" in joined
    assert "-n 2 --dist loadfile" in joined
    assert f"--profile {tmp_path / 'p.toml'}" in joined
    assert "--junitxml" not in joined, "the plugin puts junit.xml into the report folder"
    assert f"--alluredir {tmp_path / 'out' / 'allure-results'}" in joined
    assert "--only TIER-READ-01" in joined and "--area SIG" in joined and "-k tier" in joined
    in_process = pytest_args(_options(workers=0), tmp_path / "p.toml", tmp_path / "out")
    assert "-n" not in in_process and "no:xdist" in in_process
    assert "--budget-requests" not in joined
    budgeted = pytest_args(
        _options(budget_requests=40, budget_credits=9, workers=None),
        tmp_path / "p.toml",
        tmp_path / "out",
    )
    assert "--budget-requests 40 --budget-credits 9" in " ".join(budgeted)
    assert "no:xdist" in budgeted, "a budgeted run goes cheapest first, in one process"
    default = pytest_args(_options(workers=None), tmp_path / "p.toml", tmp_path / "out")
    assert f"-n {DEFAULT_WORKERS} --dist loadfile" in " ".join(default)


def test_a_restricted_run_has_no_more_workers_than_modules_it_collects() -> None:
    """A worker runs a module at a time: a run of one requirement's checks starts as many
    workers as modules cite it, however many are asked for."""
    catalog = load_catalog()
    citing = collected_modules(catalog, ["TIER-READ-01"], [])
    assert 0 < len(citing) < DEFAULT_WORKERS
    for asked in (None, DEFAULT_WORKERS):
        assert workers_of(_options(only=["TIER-READ-01"], workers=asked)) == len(citing)
    assert workers_of(_options(only=["TIER-READ-01"], workers=1)) == 1
    assert workers_of(_options(only=["TIER-READ-01"], workers=0)) == 0
    areas = collected_modules(catalog, [], ["SIG", "KEY"])
    assert workers_of(_options(area=["SIG", "KEY"], workers=None)) == min(
        DEFAULT_WORKERS, len(areas)
    )
    assert collected_modules(catalog, [], []) == sorted(OWN_CHECKS.glob("test_*.py"))


def test_run_missing_profile_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--profile", str(tmp_path / "nope.toml")]) == EXIT_USAGE
    assert "init-profile" in capsys.readouterr().err


def test_run_fault_with_profile_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--profile", str(tmp_path / "p.toml"), "--fault", "x"]) == EXIT_USAGE
    assert "--fault applies only to the embedded reference" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["run", "--workers", "-1"], id="negative-workers"),
        pytest.param(["run", "--bogus"], id="unknown-option"),
        pytest.param(["nonsense"], id="unknown-command"),
        pytest.param([], id="no-command"),
    ],
)
def test_cli_bad_arguments_exit_2(argv: list[str]) -> None:
    assert main(argv) == EXIT_USAGE


def test_init_profile_writes_template_once(tmp_path: Path) -> None:
    target = tmp_path / "profiles" / "mine.toml"
    assert main(["init-profile", str(target)]) == EXIT_OK
    assert target.read_text(encoding="utf-8") == template_text()
    target.write_text("edited", encoding="utf-8")
    assert main(["init-profile", str(target)]) == EXIT_USAGE
    assert target.read_text(encoding="utf-8") == "edited", "never overwrites silently"
    assert main(["init-profile", str(target), "--force"]) == EXIT_OK
    assert target.read_text(encoding="utf-8") == template_text()


def _profile(tmp_path: Path, server: HTTPServer) -> Path:
    path = tmp_path / "profile.toml"
    path.write_text(
        f'''name = "fake tier target"
base_url = "{server.url_for("/").rstrip("/")}"
key_prefix = "gk"
adapter = "none"
[keys.primary]
key = "gk_cliTESTkey0123456789abcdef"
account = "primary"
scopes = ["images:generate"]
[sessions.primary]
token = "cliTESTsessiontoken0123456789"
''',
        encoding="utf-8",
    )
    return path


def _run_against(
    tmp_path: Path, server: HTTPServer, *only: str, extra: tuple[str, ...] = ()
) -> SuiteRun:
    """``genapi-conformance run`` of the checks of *only* against *server*, without workers,
    its reports in *tmp_path*; *extra*: more options of ``run``."""
    return run_suite(
        tmp_path / "out",
        *("--profile", str(_profile(tmp_path, server)), *extra),
        only=only,
        workers=0,
        timeout=180,
    )


def test_run_against_profile_conformant_target_exits_0(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    httpserver.expect_request("/v1/account/tier").respond_with_json(TIER)
    httpserver.expect_request("/api/tier").respond_with_json(TIER)
    done = _run_against(tmp_path, httpserver, *OWN_IDS, extra=("--timings",))
    report_dir = done.report_dir
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    assert done.results is not None
    line = done.results["coverage"]["line"]
    # A run of a selection checks only it: never "conformant", whatever it found.
    musts = sum(load_catalog()[i].level is Level.MUST for i in OWN_IDS)
    assert line.startswith(f"no failures among the {musts} MUST requirements checked; "), line
    assert line in " ".join(done.stdout.split())
    assert str(report_dir) in done.stdout.replace("\n", "")
    # --timings: where the run's time went, after the summary.
    assert "ratio wall / longest chain: " in done.stdout
    assert "critical path (the 3 chains that ended last" in done.stdout
    assert done.verdicts() == dict.fromkeys(OWN_IDS, "pass")
    assert {"report.html", "junit.xml", "pytest-output.txt"} <= {
        p.name for p in report_dir.iterdir()
    }
    for path in report_dir.rglob("*"):
        if path.is_file():
            assert b"cliTEST" not in path.read_bytes(), f"a secret leaked into {path.name}"


def test_run_against_profile_broken_target_exits_1_and_names_failures(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    broken = {**TIER, "requests_per_minute": "sixty"}
    httpserver.expect_request("/v1/account/tier").respond_with_json(broken)
    done = _run_against(tmp_path, httpserver, "TIER-FIELD-02", "TIER-READ-01")
    assert done.returncode == EXIT_FAILED, done.stdout + done.stderr
    assert "FAIL  TIER-FIELD-02" in done.stdout
    assert "not conformant" in done.stdout
    assert done.verdicts() == {"TIER-READ-01": "pass", "TIER-FIELD-02": "fail"}


def _report(when: Any, outcome: Any, **extra: object) -> pytest.TestReport:
    report = pytest.TestReport(
        nodeid="c.py::t",
        location=("c.py", 0, "t"),
        keywords={},
        outcome=outcome,
        longrepr=None,
        when=when,
    )
    report.__dict__.update(extra)
    return report


def test_progress_lines_count_checks_by_verdict_and_name_long_running_ones() -> None:
    from conformance.run.progress import RunProgress

    now = [100.0]
    stream = io.StringIO()
    progress = RunProgress(stream, live=False, verbose=True, clock=lambda: now[0])
    progress.started = 100.0
    progress.pytest_xdist_node_collection_finished(node=None, ids=["a", "b", "c", "d"])
    for nodeid, verdict in [("a", "warn"), ("b", "fail")]:
        progress.pytest_runtest_logstart(nodeid)
        progress.pytest_runtest_logreport(
            _report("teardown", "passed", nodeid=nodeid, user_properties=[("verdict", verdict)])
        )
    progress.pytest_runtest_logstart("c::timing_chain")
    now[0] = 160.0
    line = progress.line()
    assert line.startswith("[ 1m00s] checks 2/4; 1 failed, 1 warned")
    assert "running long: c::timing_chain (1m00s)" in line
    assert line.endswith("ETA 1m00s")
    assert stream.getvalue().splitlines() == ["WARN  a", "FAIL  b"], "-v: one line per check"


def test_progress_prints_plain_lines_on_a_timer_off_a_terminal() -> None:
    """Off a TTY a line comes every interval, also while no check finishes."""
    import threading

    from conformance.run.progress import RunProgress

    written = threading.Event()

    class Sink(io.StringIO):
        def flush(self) -> None:
            written.set()

    sink = Sink()
    progress = RunProgress(sink, live=False, interval=0.05)
    progress.pytest_sessionstart()
    try:
        assert written.wait(timeout=10), "no progress line within 10 s"
    finally:
        progress.pytest_sessionfinish()
    assert sink.getvalue().splitlines()[0].endswith("checks 0/?")
    quiet = RunProgress(io.StringIO(), live=False, quiet=True, interval=0.01)
    quiet.pytest_sessionstart()
    quiet.pytest_sessionfinish()
    assert quiet._ticker is None, "--quiet: no progress at all"


def _dns_profile(tmp_path: Path, port: int) -> Path:
    path = tmp_path / "dns-profile.toml"
    path.write_text(
        f"""base_url = "http://127.0.0.1:9"
[keys.primary]
key = "gk_cliTESTkey0123456789abcdef"
scopes = ["images:generate"]
[dns]
server = "127.0.0.1:{port}"
domain = "rebind.genapi.test"
""",
        encoding="utf-8",
    )
    return path


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_run_against_a_profile_serves_its_dns_zone_for_the_whole_run(tmp_path: Path) -> None:
    """`run --profile` serves the [dns] zone from the controller: the workers attach to it
    (the zone they derive alike) and it outlives them all."""
    port = _free_udp_port()
    path = _dns_profile(tmp_path, port)
    messages = io.StringIO()
    with cli._serve_dns(load_profile(path), path, Console(file=messages)) as server:
        assert server is not None and server.serving and server.address == ("127.0.0.1", port)
        worker = DnsServer.join(
            "rebind.genapi.test",
            "127.0.0.1",
            port,
            zone_dir=shared_zone_dir(path, "127.0.0.1", port),
        )
        try:
            assert not worker.serving
            name = worker.set("from-a-worker", ["127.0.0.5"])
            query = dns.message.make_query(name, "A")
            response = dns.query.udp(query, "127.0.0.1", port=port, timeout=2)
            assert [r.to_text() for rrset in response.answer for r in rrset] == ["127.0.0.5"]
        finally:
            worker.stop()
    assert not server.serving
    assert messages.getvalue() == ""


def test_run_against_a_profile_whose_dns_port_is_taken_leaves_it_to_the_checks(
    tmp_path: Path,
) -> None:
    """The port held outside the run: the run goes on, the dns_server fixture reports it."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        path = _dns_profile(tmp_path, taken.getsockname()[1])
        messages = io.StringIO()
        with cli._serve_dns(load_profile(path), path, Console(file=messages)) as server:
            assert server is None
    assert "not serving DNS at 127.0.0.1:" in messages.getvalue()
