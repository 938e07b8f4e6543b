"""Several processes over one store (``serve --workers N``): the limits hold across them.

The store-kept rate window is driven from two OS processes at once (the limit holds, not
one request more); then the service itself serves from two processes: the per-minute
limit of a key holds over many connections, generations queued before a restart are
finished (and refunded) once although every process reloads the queue, and a test clock,
which one process keeps in memory, is refused.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from running_reference import ReferenceFactory, bearer, start_reference, wait_for_status

from reference.errors import ApiError
from reference.fault import Faults
from reference.ratelimit import RateLimiter
from reference.store import Store
from reference.tiers import Tier, load_tiers

# Its tests wait on real deliveries and processes: CI starts them early (tests/conftest.py).
pytestmark = pytest.mark.slow

#: One process admitting ``attempts`` requests of one key; prints how many were admitted.
_ADMITTER = textwrap.dedent(
    """
    import sys
    from reference.errors import ApiError
    from reference.fault import Faults
    from reference.ratelimit import RateLimiter
    from reference.store import Store
    from reference.tiers import Tier, load_tiers

    path, rpm, rpd, attempts = sys.argv[1], *map(int, sys.argv[2:])
    limiter = RateLimiter(Store(path), Faults(), shared=True)
    tier = Tier("test", rpm, rpd, 1, 1, ("image",))
    admitted = 0
    for _ in range(attempts):
        try:
            limiter.admit("key_a", tier, "acct_1")
            admitted += 1
        except ApiError:
            pass
    print(admitted)
    """
)


def _admit_from_processes(path: Path, rpm: int, rpd: int, attempts: int) -> list[int]:
    Store(path).close()  # the schema exists before the processes race
    processes = [
        subprocess.Popen(  # noqa: S603 - our interpreter, fixed arguments
            [sys.executable, "-c", _ADMITTER, str(path), str(rpm), str(rpd), str(attempts)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    counts = []
    for process in processes:
        out, _ = process.communicate(timeout=60)
        assert process.returncode == 0
        counts.append(int(out))
    return counts


def test_two_processes_admit_no_more_than_the_minute_limit(tmp_path: Path) -> None:
    counts = _admit_from_processes(tmp_path / "s.sqlite3", rpm=150, rpd=10_000, attempts=200)
    assert sum(counts) == 150, counts


def test_two_processes_admit_no_more_than_the_day_limit(tmp_path: Path) -> None:
    counts = _admit_from_processes(tmp_path / "s.sqlite3", rpm=10_000, rpd=120, attempts=200)
    assert sum(counts) == 120, counts
    limiter = RateLimiter(Store(tmp_path / "s.sqlite3"), Faults(), shared=True)
    assert limiter.requests_today(["key_a"]) == 120
    # Refused for the day, the requests did not enter the minute window either.
    assert limiter.window_state("key_a", Tier("t", 10_000, 120, 1, 1, ())).remaining == 9_880


def test_the_stored_window_refuses_without_counting_and_tells_where_it_stands(
    tmp_path: Path,
) -> None:
    limiter = RateLimiter(Store(tmp_path / "s.sqlite3"), Faults(), shared=True)
    tier = Tier("test", 3, 100, 1, 1, ("image",))
    states = [limiter.admit("key_a", tier, "acct_1") for _ in range(3)]
    assert [s.remaining for s in states if s is not None] == [2, 1, 0]
    for _ in range(4):
        with pytest.raises(ApiError) as refused:
            limiter.admit("key_a", tier, "acct_1")
        assert refused.value.status == 429
        assert 1 <= int(refused.value.headers["Retry-After"]) <= 60
        assert refused.value.headers["X-RateLimit-Remaining"] == "0"
    assert limiter.requests_today(["key_a"]) == 3
    assert limiter.window_state("key_a", tier).remaining == 0
    assert limiter.admit("key_b", tier, "acct_1") is not None  # per key


def test_the_minute_limit_holds_across_serving_processes(
    reference_factory: ReferenceFactory,
) -> None:
    reference = reference_factory(args=["--workers", "2"])
    limit = load_tiers().get("low-limit").requests_per_minute
    key = reference.key("low-limit")

    def one() -> httpx.Response:
        # A fresh connection each: the kernel hands connections to either process.
        with httpx.Client(base_url=reference.base_url, timeout=10.0, trust_env=False) as c:
            return c.get("/v1/account/tier", headers=bearer(key))

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda _: one(), range(limit + 15)))
    statuses = [a.status_code for a in answers]
    assert statuses.count(200) == limit, statuses
    assert statuses.count(429) == 15, statuses
    for answer in answers:
        if answer.status_code == 429:
            assert answer.headers["X-RateLimit-Limit"] == str(limit)
            assert answer.headers["X-RateLimit-Remaining"] == "0"
            assert 1 <= int(answer.headers["Retry-After"]) <= 60
    with reference.client() as client:  # the account's other key has its own minute
        second = client.get("/v1/account/tier", headers=bearer(reference.key("low-limit-second")))
        assert second.status_code == 200, second.text
        other = client.get("/v1/account/tier", headers=bearer(reference.key("high-limit")))
        assert other.json()["requests_per_minute"] == 6000
    assert reference.stop() == 0


def _json_lines(text: str) -> list[str]:
    """The structured log lines of a service's stderr (warnings are plain text)."""
    return [line for line in text.splitlines() if line.startswith("{")]


def _submit(client: httpx.Client, key: str, prompt: str) -> str:
    answer = client.post(
        "/v1/images/generate",
        headers=bearer(key),
        json={"prompt": prompt},
    )
    assert answer.status_code == 202, answer.text
    generation_id: str = answer.json()["id"]
    return generation_id


def test_queued_generations_are_finished_once_after_a_restart(tmp_path: Path) -> None:
    # Queued with a latency longer than the stop takes, then every process of the next
    # start reloads them: each is finished once, the failed one refunded once.
    first = start_reference(tmp_path, args=["--workers", "2", "--latency-ms", "8000"])
    key = first.key("primary")
    with first.client() as client:
        ids = [_submit(client, key, p) for p in ("a cat", "a dog", "[sandbox:fail] no")]
        used = client.get("/v1/account/usage", headers=bearer(key)).json()
    assert first.stop() == 0
    started = time.monotonic()
    second = start_reference(tmp_path, args=["--workers", "2"], provision=False)
    try:
        # Not provisioned again (that would revoke the keys): the first start's key holds.
        key_client = second.client()
        finals = [wait_for_status(key_client, key, i)["status"] for i in ids]
        assert time.monotonic() - started < 30
        assert finals == ["completed", "completed", "failed"]
        after = key_client.get("/v1/account/usage", headers=bearer(key)).json()
        assert after["credits_used_today"] == used["credits_used_today"] - 1
        finished = [
            line["generation_id"]
            for line in map(json.loads, _json_lines(second.stderr_text()))
            if line.get("event") == "generation"
        ]
        assert sorted(finished) == sorted(ids)
    finally:
        second.stop()


def test_the_test_clock_is_refused_with_several_processes(tmp_path: Path) -> None:
    done = subprocess.run(  # noqa: S603 - our interpreter, fixed arguments
        [sys.executable, "-m", "reference", "serve", "--port", "0", "--db",
         str(tmp_path / "s.sqlite3"), "--workers", "2", "--test-clock"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--workers 1" in done.stderr


def _gone(pid: int) -> bool:
    """Whether a process has ended (gone, or a zombie its new parent has yet to reap)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


def test_serving_processes_end_with_their_parent_even_on_sigkill(
    reference_factory: ReferenceFactory,
) -> None:
    reference = reference_factory(args=["--workers", "2"])
    (serving,) = [
        line
        for line in map(json.loads, _json_lines(reference.stderr_text()))
        if line.get("event") == "serving"
    ]
    assert len(serving["pids"]) == 2
    reference.stop(signal.SIGKILL)
    deadline = time.monotonic() + 20
    while not all(_gone(pid) for pid in serving["pids"]) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling interval; the deadline bounds the wait
    assert all(_gone(pid) for pid in serving["pids"])
