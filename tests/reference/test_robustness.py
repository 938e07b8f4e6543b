"""Robustness: bad input never gets a 5xx (malformed bodies, wrong types, huge bodies and
headers), and the reference keeps its word under faults: a store that cannot be written
(a 503 with a body, nothing accepted lost), a delivery target that resets the connection
mid-body (a failed attempt, retried on the spec's schedule), a calendar that jumps across
00:00 UTC (the daily limits reset exactly then, nothing lost or doubled).

The store faults mount a tmpfs for the store inside ``unshare -m`` (the tests run as root
in a namespace) and fill it from inside that namespace (``nsenter``); where that is not
permitted they skip, saying so.
"""

from __future__ import annotations

import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from running_reference import (
    ReferenceFactory,
    RunningReference,
    bearer,
    generation_deliveries,
    start_reference,
    wait_for_delivery,
    wait_for_status,
)
from scripted_target import Receiver
from tmpfs_mount import tmpfs_prefix

from reference.clock import next_midnight
from reference.tiers import load_tiers

# Its tests wait on real deliveries and processes: CI starts them early (tests/conftest.py).
pytestmark = pytest.mark.slow

JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("content", "headers", "status"),
    [
        pytest.param(b"{not json", JSON, 400, id="malformed-json"),
        pytest.param(b"", JSON, 400, id="empty-body"),
        pytest.param(b"[1, 2]", JSON, 400, id="array-body"),
        pytest.param(b'"prompt"', JSON, 400, id="string-body"),
        pytest.param(b"null", JSON, 400, id="null-body"),
        pytest.param(b"\xff\xfe{}", JSON, 400, id="not-utf8"),
        pytest.param(b"[" * 100_000, JSON, 400, id="deeply-nested"),
        pytest.param(b'{"prompt": "x", "size": 1e999}', JSON, 400, id="infinite-number"),
        pytest.param(b'{"prompt": "x"}', {"Content-Type": "text/plain"}, 415, id="text-plain"),
        pytest.param(b'{"prompt": "x"}', {}, 415, id="no-content-type"),
        pytest.param(b'{"prompt": "x"', JSON, 400, id="truncated"),
        pytest.param(b'{"prompt": NaN}', JSON, 400, id="nan-prompt"),
        pytest.param(b'{"prompt": "x", "n": ' + b"9" * 5000 + b"}", JSON, 400, id="huge-int"),
    ],
)
def test_bad_bodies_get_4xx_with_detail(
    reference_server: RunningReference, content: bytes, headers: dict[str, str], status: int
) -> None:
    client = reference_server.client()
    response = client.post(
        "/v1/images/generate",
        content=content,
        headers={**headers, **bearer(reference_server.key("primary"))},
    )
    assert response.status_code == status, response.text
    assert response.json()["detail"]


@pytest.mark.parametrize(
    ("path", "body", "needle"),
    [
        pytest.param("/v1/images/generate", {}, "prompt", id="prompt-missing"),
        pytest.param("/v1/images/generate", {"prompt": ""}, "prompt", id="prompt-empty"),
        pytest.param("/v1/images/generate", {"prompt": "  "}, "prompt", id="prompt-blank"),
        pytest.param("/v1/images/generate", {"prompt": 5}, "prompt", id="prompt-number"),
        pytest.param("/v1/images/generate", {"prompt": ["a"]}, "prompt", id="prompt-array"),
        pytest.param("/v1/images/generate", {"prompt": "x" * 40_000}, "prompt", id="prompt-long"),
        pytest.param("/v1/images/generate", {"prompt": "x", "size": 2}, "size", id="size-number"),
        pytest.param("/v1/images/generate", {"prompt": "x", "model": {}}, "model", id="model-obj"),
        pytest.param("/v1/images/generate", {"prompt": "x", "webhook": "u"}, "webhook",
                     id="webhook-string"),
        pytest.param("/v1/images/generate", {"prompt": "x", "callback_url": 7}, "callback_url",
                     id="callback-number"),
        pytest.param("/v1/videos/generate", {"prompt": "x", "duration": "5"}, "duration",
                     id="duration-string"),
        pytest.param("/v1/videos/generate", {"prompt": "x", "duration": True}, "duration",
                     id="duration-bool"),
        pytest.param("/v1/videos/generate", {"prompt": "x", "duration": -1}, "duration",
                     id="duration-negative"),
        pytest.param("/v1/videos/generate", {"prompt": "x", "resolution": 720}, "resolution",
                     id="resolution-number"),
        pytest.param("/v1/images/edit", {"instruction": "x"}, "prompt", id="edit-no-prompt"),
    ],
)  # fmt: skip
def test_wrong_fields_get_400_naming_the_field(
    reference_server: RunningReference, path: str, body: dict[str, object], needle: str
) -> None:
    client = reference_server.client()
    response = client.post(path, json=body, headers=bearer(reference_server.key("primary")))
    assert response.status_code == 400, response.text
    assert needle in response.json()["detail"]


def test_unknown_fields_are_tolerated(reference_server: RunningReference) -> None:
    client = reference_server.client()
    response = client.post(
        "/v1/images/generate",
        json={"prompt": "x", "style": "vivid", "n": 3, "extra": {"nested": [1, None]}},
        headers=bearer(reference_server.key("primary")),
    )
    assert response.status_code == 202


def test_body_over_the_limit_is_413(reference_server: RunningReference) -> None:
    client = reference_server.client()
    response = client.post(
        "/v1/images/generate",
        content=b'{"prompt": "' + b"x" * (1024 * 1024 + 10) + b'"}',
        headers={**JSON, **bearer(reference_server.key("primary"))},
    )
    assert response.status_code == 413
    assert response.json()["detail"]


def test_chunked_body_over_the_limit_is_413(reference_server: RunningReference) -> None:
    def chunks() -> object:
        yield b'{"prompt": "'
        for _ in range(20):
            yield b"x" * 65536
        yield b'"}'

    client = reference_server.client()
    response = client.post(
        "/v1/images/generate",
        content=chunks(),  # type: ignore[arg-type]
        headers={**JSON, **bearer(reference_server.key("primary"))},
    )
    assert response.status_code == 413


def _raw_request(base_url: str, request: bytes) -> bytes:
    """Send raw bytes and read the status line (bounded by a socket timeout and a length)."""
    parts = urlsplit(base_url)
    assert parts.hostname is not None and parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(request)
        with sock.makefile("rb") as reply:
            return reply.readline(65536)


def test_64k_header_is_refused_without_5xx(reference_server: RunningReference) -> None:
    request = (
        b"GET /v1/account/tier HTTP/1.1\r\nHost: x\r\nX-Big: "
        + b"a" * 65536
        + b"\r\nConnection: close\r\n\r\n"
    )
    status_line = _raw_request(reference_server.base_url, request).split(b"\r\n")[0]
    status = int(status_line.split()[1])
    assert 400 <= status < 500, status_line


def test_garbage_request_line_is_400(reference_server: RunningReference) -> None:
    status_line = _raw_request(reference_server.base_url, b"HELLO\r\n\r\n").split(b"\r\n")[0]
    assert status_line.split()[1] == b"400"


def test_unknown_path_is_404_json(reference_server: RunningReference) -> None:
    response = reference_server.client().get("/v2/images/generate")
    assert response.status_code == 404 and response.json()["detail"]


def test_wrong_method_is_405_json(reference_server: RunningReference) -> None:
    response = reference_server.client().get("/v1/images/generate")
    assert response.status_code == 405 and response.json()["detail"]
    assert "POST" in response.headers["allow"]


def test_healthz(reference_server: RunningReference) -> None:
    response = reference_server.client().get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_no_request_so_far_was_a_500(reference_server: RunningReference) -> None:
    # The request log has one JSON line per request: none of this session's was a 5xx.
    assert '"status":500' not in reference_server.stderr_text()
    assert "Traceback" not in reference_server.stderr_text()


# -- a store that cannot be written ------------------------------------------------------------

PRICES = load_tiers().prices
#: Bounds every wait on the reference in these tests.
WAIT_S = 30.0


def _inside(service: RunningReference, command: str) -> None:
    """Run a shell *command* in the service's mount namespace (where its tmpfs is)."""
    subprocess.run(  # noqa: S603
        ["nsenter", "-t", str(service.process.pid), "-m", "sh", "-c", command],  # noqa: S607
        capture_output=True,
        timeout=WAIT_S,
        check=False,
    )


def _submit_images(client: httpx.Client, key: str, callback_url: str, count: int) -> list[str]:
    """The ids of *count* image generations submitted (each must be accepted)."""
    ids = []
    for n in range(count):
        response = client.post(
            "/v1/images/generate",
            headers=bearer(key),
            json={"prompt": f"p{n}", "callback_url": callback_url},
        )
        assert response.status_code == 202, response.text
        ids.append(response.json()["id"])
    return ids


def _wait_for_log(service: RunningReference, needle: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while needle not in service.stderr_text():
        assert time.monotonic() < deadline, f"{needle!r} never logged"
        time.sleep(0.05)  # polling interval; the deadline bounds it


def test_a_full_store_answers_503_with_a_body_and_loses_no_accepted_generation(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    receiver = Receiver().start()
    try:
        with start_reference(
            tmp_path / "ref",
            # Long enough that the generations are still queued when the store fills.
            args=["--db", str(store / "s.sqlite3"), "--latency-ms", "3000"],
            wrapper=tmpfs_prefix(store, "size=4m"),
        ) as service:
            client = service.client()
            key = bearer(service.key("primary"))
            ids = _submit_images(client, service.key("primary"), receiver.url("/hook"), 4)
            _inside(service, f"dd if=/dev/zero of={store / 'filler'} bs=4k")
            _wait_for_log(service, "database or disk is full")  # the worker met it
            refused = client.post("/v1/images/generate", headers=key, json={"prompt": "full"})
            assert refused.status_code == 503, refused.text
            assert "store" in refused.json()["detail"] and refused.headers["Retry-After"]
            read = client.get(f"/v1/generations/{ids[0]}", headers=key)
            assert read.status_code in (200, 503) and read.json(), read.text
            _inside(service, f"rm {store / 'filler'}")
            for generation_id in ids:
                done = wait_for_status(
                    client, service.key("primary"), generation_id, timeout_s=WAIT_S
                )
                assert done["status"] == "completed", done
                assert client.get(done["output_url"]).status_code == 200
            arrivals = receiver.wait_for("/hook", len(ids), WAIT_S)
            assert {a.header("X-Service-Generation") for a in arrivals} == set(ids)
            usage = client.get("/v1/account/usage", headers=key).json()
            # The refused submit changed nothing: only the accepted ones were charged.
            assert usage["credits_used_today"] == len(ids) * PRICES["image"], usage
            log = service.stderr_text()
        assert '"status":500' not in log and "Traceback" not in log
    finally:
        receiver.stop()


@pytest.mark.parametrize("existing", [False, True], ids=["empty-read-only", "existing-read-only"])
def test_a_store_that_cannot_be_written_at_start_is_refused_with_a_message(
    tmp_path: Path, existing: bool
) -> None:
    store = tmp_path / "store"
    if existing:
        # A store made by an earlier start, then only readable (a read-only bind mount).
        start_reference(tmp_path / "first", args=["--db", str(store / "s.sqlite3")]).stop()
        wrapper = [
            "unshare", "-m", "sh", "-c",
            'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"',
            "sh", str(store),
        ]  # fmt: skip
        tmpfs_prefix(tmp_path / "probe", "size=64k")  # skips where mounts are not permitted
    else:
        wrapper = tmpfs_prefix(store, "ro,size=64k")
    with pytest.raises(RuntimeError) as refused:
        start_reference(
            tmp_path / "ref", args=["--db", str(store / "s.sqlite3")], wrapper=wrapper,
            provision=False,
        )  # fmt: skip
    said = str(refused.value)
    assert "Traceback" not in said, said
    assert str(store / "s.sqlite3") in said and "store" in said.lower(), said


# -- a delivery target that resets the connection mid-body -------------------------------------


class _ResettingTarget:
    """A loopback target that reads half of each delivery's body, then resets the
    connection (RST), for the first *resets* deliveries; it answers 200 to later ones."""

    def __init__(self, resets: int) -> None:
        self.resets = resets
        self.arrivals: list[float] = []  # time.monotonic() of each, half its body read
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self._server.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.getsockname()[1]}/reset"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(10)
                self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        with conn.makefile("rb") as reader:
            length = 0
            for _ in range(100):  # a bounded header block
                line = reader.readline(65536)
                if line in (b"\r\n", b""):
                    break
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            reader.read(length // 2)
            with self._lock:
                self.arrivals.append(time.monotonic())
                reset = len(self.arrivals) <= self.resets
            if reset:
                # Linger 0: closing sends RST, not FIN, with the rest of the body unread.
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            reader.read(length - length // 2)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=WAIT_S)
        self._server.close()


@pytest.fixture
def resetting(request: pytest.FixtureRequest) -> Iterator[_ResettingTarget]:
    target = _ResettingTarget(request.param)
    try:
        yield target
    finally:
        target.stop()


def _settled_delivery(client: httpx.Client, key: str, generation_id: str) -> dict[str, Any]:
    """The generation's one delivery once it is delivered or exhausted (bounded poll)."""
    record = wait_for_delivery(
        client,
        key,
        generation_id,
        lambda r: r["outcome"] in ("delivered", "exhausted"),
        timeout_s=WAIT_S,
    )
    listed = generation_deliveries(client, key, generation_id)
    assert len(listed) == 1, listed
    return record


@pytest.mark.parametrize(
    ("resetting", "outcome"), [(2, "delivered"), (3, "exhausted")], indirect=["resetting"]
)
def test_a_target_that_resets_mid_body_is_a_failed_attempt_retried_on_schedule(
    reference_factory: ReferenceFactory, resetting: _ResettingTarget, outcome: str
) -> None:
    service = reference_factory(args=["--latency-ms", "50"])
    client = service.client()
    key = service.key("primary")
    submitted = client.post(
        "/v1/images/generate",
        headers=bearer(key),
        json={"prompt": "r", "callback_url": resetting.url},
    )
    assert submitted.status_code == 202, submitted.text
    delivery = _settled_delivery(client, key, submitted.json()["id"])
    assert delivery["outcome"] == outcome, delivery
    attempts = delivery["attempts"]
    assert [a["n"] for a in attempts] == [1, 2, 3], attempts
    for failed in attempts[: resetting.resets]:
        assert failed["status"] == 0 and "reset" in failed["error"], failed  # with why
    if outcome == "delivered":
        assert attempts[2]["status"] == 200 and attempts[2]["error"] is None, attempts
    # Spec §6: "Backoff 1 s, then 2 s" (measured from arrival to arrival: each reset
    # attempt ends within milliseconds of its arrival).
    first, second, third = resetting.arrivals[:3]
    assert 0.95 <= second - first <= 2.5, resetting.arrivals
    assert 1.95 <= third - second <= 3.5, resetting.arrivals
    assert len(resetting.arrivals) == 3, "no attempt beyond the third"


# -- a calendar that jumps across 00:00 UTC ----------------------------------------------------


LOW_DAILY = load_tiers().get("low-daily")


def _clock(client: httpx.Client, to: float | None = None) -> float:
    """The service's time; with *to*, first move its clock forward to that unix time."""
    if to is not None:
        now = client.get("/test/clock").json()["now"]
        moved = client.post("/test/clock", json={"advance_seconds": max(0.0, to - now)})
        assert moved.status_code == 200, moved.text
    now: float = client.get("/test/clock").json()["now"]
    return now


def test_a_clock_jump_across_midnight_resets_the_day_exactly_and_loses_nothing(
    reference_factory: ReferenceFactory,
) -> None:
    # Generations take 2 s, so those submitted just before the jump finish after it.
    service = reference_factory(args=["--test-clock", "--latency-ms", "2000"])
    receiver = Receiver().start()
    try:
        client = service.client()
        daily = bearer(service.key("low-daily"))
        hook = receiver.url("/midnight")
        midnight = next_midnight(_clock(client))
        _clock(client, to=midnight - 30)
        # The old day: its whole credit cap spent (one video fails and is refunded to
        # that day), its whole request allowance used.
        video = PRICES["video"]
        assert LOW_DAILY.max_credits_per_day == 2 * video
        old = [
            client.post(
                "/v1/videos/generate", headers=daily, json={"prompt": p, "callback_url": hook}
            )
            for p in ("v", "[sandbox:fail] v")
        ]
        assert [r.status_code for r in old] == [202, 202], old[-1].text
        used = client.get("/v1/account/usage", headers=daily).json()
        assert used["credits_used_today"] == 2 * video, used
        for _ in range(LOW_DAILY.requests_per_day):
            if client.get("/v1/account/tier", headers=daily).status_code == 429:
                break
        # Straddling the jump: generations of the primary account, queued at 23:59:55
        # (they finish 2 s of real time later, after the jump).
        _clock(client, to=midnight - 5.0)
        straddling = _submit_images(client, service.key("primary"), hook, 3)
        _clock(client, to=midnight - 2.0)
        late = client.get("/v1/account/tier", headers=daily)
        before = _clock(client)
        assert before < midnight, f"the test's steps took {before - midnight + 2:.2f} s (slow host)"
        assert late.status_code == 429 and "daily request limit" in late.json()["detail"], late.text
        retry_after = int(late.headers["Retry-After"])
        assert retry_after <= 3, f"Retry-After {retry_after}: not the service's 00:00"
        # 00:00:00.05 of the new day: both daily limits are fresh.
        after = _clock(client, to=midnight + 0.05)
        fresh_day = client.get("/v1/account/tier", headers=daily)
        assert fresh_day.status_code == 200, (fresh_day.text, after - midnight)
        # Who may read each generation: its own account's key.
        owner = {r.json()["id"]: service.key("low-daily") for r in old}
        owner |= dict.fromkeys(straddling, service.key("primary"))
        for generation_id, key in owner.items():
            wait_for_status(client, key, generation_id, timeout_s=WAIT_S, interval_s=0.5)
        usage = client.get("/v1/account/usage", headers=daily).json()
        # Nothing of the old day leaked into the new one: neither its credits nor the
        # refund of its failed video, which went back to the day it was spent on.
        assert usage["credits_used_today"] == 0, usage
        assert usage["requests_today"] < LOW_DAILY.requests_per_day // 2, usage
        fresh = [
            client.post("/v1/videos/generate", headers=daily, json={"prompt": f"n{n}"})
            for n in range(2)
        ]
        assert [r.status_code for r in fresh] == [202, 202], fresh[-1].text
        assert (
            client.get("/v1/account/usage", headers=daily).json()["credits_used_today"] == 2 * video
        )
        # Every event of every generation arrived, once each (the target answered 200).
        arrivals = receiver.wait_for("/midnight", len(owner), WAIT_S)
        assert sorted(a.header("X-Service-Generation") or "" for a in arrivals) == sorted(owner)
        for generation_id, key in owner.items():
            # The target has the request before the service has recorded its answer: the
            # record is awaited (bounded), then it must be the one delivery, made once.
            record = wait_for_delivery(client, key, generation_id, "delivered", timeout_s=WAIT_S)
            listed = generation_deliveries(client, key, generation_id)
            assert len(listed) == 1 and len(record["attempts"]) == 1, listed
    finally:
        receiver.stop()
