"""``genapi-conformance load``: the judgement of a load run's records, and real runs.

The judgement is pure (records in, verdicts out) and tested on made-up records; real runs
with Locust's master and local workers against the embedded reference (one process, and
two processes over one store with four Locust workers) show the minute's and the day's
limits verified and the faults that ignore them caught. Workers started on their own
(``--master-host``) are in ``test_load_remote.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.load import (
    Record,
    judge_concurrency,
    judge_daily,
    judge_load,
    max_overlap,
    max_served_in_window,
)
from conformance.run.commands.load import locust_request
from conformance.target.profile import parse_profile

RPM = 5


def _record(sent: float, status: int = 200, role: str = "limited", **headers: str) -> Record:
    return Record(
        role,
        sent,
        sent + 0.5,
        status,
        headers.get("retry_after"),
        headers.get("limit"),
        headers.get("remaining"),
        headers.get("reset"),
    )


def _refusal(sent: float, **overrides: str) -> Record:
    headers = {"retry_after": "30", "limit": str(RPM), "remaining": "0", "reset": "1"}
    return _record(sent, 429, **(headers | overrides))


def _by_id(records: list[Record], *, same_account: bool = True) -> dict[str, tuple[str, str]]:
    return {
        j.requirement_id: (j.outcome, j.message)
        for j in judge_load(records, RPM, same_account=same_account)
    }


def test_a_window_counts_only_requests_certainly_inside_it() -> None:
    # Sent at 0..4 and answered half a second later: all inside [0, 60).
    assert max_served_in_window([_record(t) for t in range(5)]) == 5
    # One sent at 59.8 is answered at 60.3: its admission may lie past the window.
    assert max_served_in_window([_record(0), _record(59.8)]) == 1
    assert max_served_in_window([_record(0), _record(59.0)]) == 2


def test_the_limit_holds_when_no_more_than_rpm_are_served_per_minute() -> None:
    records = [_record(t) for t in range(RPM)] + [_refusal(10 + t) for t in range(3)]
    records += [_record(61 + t) for t in range(RPM)]  # the next minute is served again
    verdicts = _by_id([*records, _record(11, role="other")])
    assert verdicts["RATE-RPM-02"][0] == "passed"
    assert {verdicts[i][0] for i in ("RATE-HDR-01", "RATE-HDR-03", "RATE-HDR-04")} == {"passed"}
    assert verdicts["RATE-RPM-03"][0] == "passed"


def test_more_served_than_the_limit_in_a_minute_fails() -> None:
    verdicts = _by_id([_record(t) for t in range(RPM + 1)] + [_refusal(30)])
    outcome, message = verdicts["RATE-RPM-02"]
    assert outcome == "failed"
    assert f"{RPM + 1} requests of the key were answered other than 429 within one" in message


def test_any_answer_but_429_counts_as_admitted() -> None:
    # "The request after requests_per_minute requests ... is answered 429": a 403 or a
    # 500 past the limit is not that answer; a request never answered (0) proves nothing.
    records = [_record(t) for t in range(RPM)] + [_record(10, 403), _refusal(20)]
    assert _by_id(records)["RATE-RPM-02"][0] == "failed"
    records = [_record(t) for t in range(RPM)] + [_record(10, 0), _refusal(20)]
    assert _by_id(records)["RATE-RPM-02"][0] == "passed"


def test_a_load_that_never_reaches_the_limit_judges_nothing() -> None:
    verdicts = _by_id([_record(t) for t in range(RPM - 1)])
    assert verdicts["RATE-RPM-02"][0] == "skipped"
    assert verdicts["RATE-HDR-01"] == ("skipped", "no 429 was answered to inspect")


def test_inconsistent_429_headers_fail_each_their_own_requirement() -> None:
    records = [_record(0), _refusal(1), _refusal(2, limit="7"), _refusal(3, remaining="4")]
    records.append(Record("limited", 4, 4.1, 429, None, str(RPM), "0", "1"))
    verdicts = _by_id(records)
    assert verdicts["RATE-HDR-01"] == ("failed", "1 of 4 429 answers had no Retry-After")
    assert verdicts["RATE-HDR-03"][0] == "failed" and "'7'" in verdicts["RATE-HDR-03"][1]
    assert verdicts["RATE-HDR-04"][0] == "failed" and "'4'" in verdicts["RATE-HDR-04"][1]


def test_another_key_throttled_while_the_first_is_refused_fails() -> None:
    records = [_refusal(1), _refusal(5), _record(3, 429, role="other")]
    assert _by_id(records)["RATE-RPM-03"][0] == "failed"
    assert _by_id(records, same_account=False)["RATE-RPM-03"][0] == "skipped"


#: A moment of a UTC day, and the first of the next (unix seconds).
NOON = 1_790_000_000.0 - 1_790_000_000.0 % 86_400 + 43_200
MIDNIGHT = NOON + 43_200
PER_DAY, PER_MINUTE = 3, 600


def _daily(sent: float, status: int = 200, latency: float = 0.5) -> Record:
    return Record("daily", sent, sent + latency, status, None, None, None, None)


def test_the_day_holds_when_no_more_than_requests_per_day_are_served() -> None:
    records = [_daily(NOON + t) for t in range(PER_DAY)] + [_daily(NOON + 5, 429)]
    verdict = judge_daily(records, PER_DAY, PER_MINUTE)
    assert verdict.outcome == "passed", verdict.message
    # The next UTC day is counted on its own.
    records += [_daily(MIDNIGHT + 1 + t) for t in range(PER_DAY)]
    assert judge_daily(records, PER_DAY, PER_MINUTE).outcome == "passed"


def test_more_served_than_requests_per_day_in_a_utc_day_fails() -> None:
    records = [_daily(NOON + t) for t in range(PER_DAY + 1)] + [_daily(NOON + 9, 429)]
    verdict = judge_daily(records, PER_DAY, PER_MINUTE)
    assert verdict.outcome == "failed"
    assert f"{PER_DAY + 1} requests of the daily key were answered other than 429" in (
        verdict.message
    )


def test_a_request_across_midnight_counts_in_neither_day() -> None:
    records = [_daily(NOON + t) for t in range(PER_DAY)] + [_daily(MIDNIGHT - 0.2)]
    records.append(_daily(MIDNIGHT + 5, 429))
    assert judge_daily(records, PER_DAY, PER_MINUTE).outcome == "passed"


def test_the_day_is_not_judged_where_the_minute_refuses_first_or_nothing_was_refused() -> None:
    assert judge_daily([_daily(NOON), _daily(NOON + 1, 429)], 30, 20).outcome == "skipped"
    # More served than the day allows fails, whatever the minute.
    records = [_daily(NOON + 60 * t) for t in range(PER_DAY + 1)]
    assert judge_daily(records, PER_DAY, 1).outcome == "failed"
    assert judge_daily([_daily(NOON)], PER_DAY, PER_MINUTE).outcome == "skipped"
    # Other roles' records are not the daily key's.
    assert judge_daily([_record(NOON + t) for t in range(9)], PER_DAY, PER_MINUTE).outcome == (
        "skipped"
    )


def _load(report_dir: Path, *extra: str) -> tuple[int, str, dict[str, str]]:
    done = subprocess.run(  # noqa: S603 (our own interpreter and arguments)
        [
            sys.executable,
            "-m",
            "conformance.run.cli",
            "load",
            "--users",
            "8",
            "--duration",
            "6",
            "--report-dir",
            str(report_dir),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    results = json.loads((report_dir / "results.json").read_text())
    verdicts = {r["id"]: r["verdict"] for r in results["requirements"]}
    return done.returncode, done.stdout, verdicts


@pytest.mark.timeout(200)
def test_load_verifies_the_reference_limit_with_locust_workers(tmp_path: Path) -> None:
    code, out, verdicts = _load(tmp_path / "ok", "--workers", "2")
    assert code == 0, out
    assert verdicts["RATE-RPM-02"] == "pass", out
    assert verdicts["RATE-HDR-01"] == verdicts["RATE-HDR-03"] == "pass", out
    assert "requests/s" in out


#: Four Locust workers against the reference serving from two processes over one store.
SCALED = ("--workers", "4", "--reference-workers", "2")
#: The provisioned key of 30 requests a day under 600 a minute, burst from every worker.
DAILY = ("--daily-key", "low-daily")
#: The provisioned key of 3 generations at once under large rate limits.
CONCURRENCY = ("--concurrency-key", "low-concurrency")


@pytest.mark.timeout(200)
def test_the_limits_hold_across_reference_processes(tmp_path: Path) -> None:
    code, out, verdicts = _load(tmp_path / "ok", *SCALED, *DAILY, *CONCURRENCY)
    assert code == 0, out
    # No more than concurrent_limit generations ran at once, across both processes.
    assert verdicts["RATE-CONC-02"] == "pass", out
    assert {verdicts[i] for i in ("RATE-RPM-02", "RATE-HDR-01", "RATE-HDR-03")} == {"pass"}, out
    assert verdicts["RATE-HDR-04"] == "pass", out
    # The default other key is the low-limit account's second key: never throttled.
    assert verdicts["RATE-RPM-03"] == "pass", out
    # The day's count is kept in the store both processes share.
    assert verdicts["RATE-RPD-01"] == "pass", out
    assert "requests from 4 workers" in out
    assert "the daily key: " in out and " requests from 4 workers, " in out, out


@pytest.mark.timeout(200)
def test_load_catches_a_limit_that_is_not_enforced(tmp_path: Path) -> None:
    code, out, verdicts = _load(tmp_path / "fault", *SCALED, "--fault", "rate-limit-never-enforced")
    assert code == 1, out
    assert verdicts["RATE-RPM-02"] == "fail", out


@pytest.mark.timeout(200)
def test_load_catches_a_daily_limit_that_is_not_enforced(tmp_path: Path) -> None:
    fault = ("--fault", "daily-request-limit-not-enforced")
    code, out, verdicts = _load(tmp_path / "fault", *SCALED, *DAILY, *fault)
    assert code == 1, out
    assert verdicts["RATE-RPD-01"] == "fail", out
    assert verdicts["RATE-RPM-02"] == "pass", out


@pytest.mark.timeout(200)
def test_load_warns_of_generations_beyond_the_concurrency_limit(tmp_path: Path) -> None:
    fault = ("--fault", "concurrency-not-enforced")
    code, out, verdicts = _load(tmp_path / "fault", *CONCURRENCY, *fault)
    assert code == 0, "an interpretation not met is a warning, never exit 1: " + out
    assert verdicts["RATE-CONC-02"] == "warn", out
    assert "WARN    RATE-CONC-02: " in out, out


def _in_flight(*spans: tuple[float, float]) -> list[Record]:
    return [Record("in-flight", a, b, 200, None, None, None, None) for a, b in spans]


def _submits(*statuses: int) -> list[Record]:
    return [Record("conc-submit", 0.0, 0.1, s, None, None, None, None) for s in statuses]


def test_overlap_counts_the_spans_that_hold_one_moment() -> None:
    assert max_overlap([]) == 0
    assert max_overlap([(0, 2), (1, 3), (2, 4)]) == 2, "touching ends do not overlap"
    assert max_overlap([(0, 10), (1, 2), (1.5, 3), (1.8, 1.9)]) == 4
    assert max_overlap([(5, 5), (6, 4)]) == 0, "empty spans hold nothing"


def test_concurrency_judged_from_the_spans_certainly_running() -> None:
    within = judge_concurrency([*_submits(202, 202, 429), *_in_flight((0, 2), (1, 3))], 2)
    assert within.outcome == "passed", within.message
    over = judge_concurrency([*_submits(202, 202, 202), *_in_flight((0, 2), (1, 3), (1.5, 4))], 2)
    assert over.outcome == "failed" and "3 generations" in over.message
    never = judge_concurrency([*_submits(202, 202), *_in_flight((0, 1), (2, 3))], 2)
    assert never.outcome == "skipped", never.message


def test_reference_processes_are_only_for_the_embedded_reference(tmp_path: Path) -> None:
    done = subprocess.run(  # noqa: S603 (our own interpreter and arguments)
        [sys.executable, "-m", "conformance.run.cli", "load", "--profile",
         str(tmp_path / "target.toml"), "--reference-workers", "2"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--reference-workers starts the embedded reference" in done.stderr


def test_the_load_sends_the_profiles_rate_request() -> None:
    """A deployment that counts only submits toward its minute ([rate] request =
    "submits") is driven with submits refused for their callback URL, not with reads it
    never limits; a --path asks for GETs of that path."""
    text = 'base_url = "http://127.0.0.1:9"\n[keys.primary]\nkey = "gk_load_canary_0123456789"\n'
    reads = locust_request(parse_profile(text, env={}), None)
    assert reads == {"GENAPI_LOAD_METHOD": "GET", "GENAPI_LOAD_PATH": "/v1/account/tier"}
    submits = locust_request(parse_profile(text + '[rate]\nrequest = "submits"\n', env={}), None)
    assert submits["GENAPI_LOAD_METHOD"] == "POST"
    assert submits["GENAPI_LOAD_PATH"] == "/v1/images/generate"
    assert json.loads(submits["GENAPI_LOAD_BODY"])["callback_url"].startswith("ftp://")
    assert locust_request(parse_profile(text, env={}), "/v1/webhooks")["GENAPI_LOAD_PATH"] == (
        "/v1/webhooks"
    )
