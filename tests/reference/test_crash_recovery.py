"""kill -9 during processing, then restart on the same store: nothing is lost.

Every accepted generation completes after the restart, and every one's event reaches its
callback target at least once (spec §6: delivery is at-least-once).
"""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from running_reference import ReferenceFactory, bearer, wait_for_status


class _Target:
    """A loopback callback target recording the generations whose events arrived."""

    def __init__(self) -> None:
        self.generations: set[str] = set()
        self.lock = threading.Lock()
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with target.lock:
                    target.generations.add(self.headers.get("X-Service-Generation", ""))
                self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/crash"

    def arrived(self) -> set[str]:
        with self.lock:
            return set(self.generations)


@pytest.fixture
def target() -> Iterator[_Target]:
    receiver = _Target()
    thread = threading.Thread(target=receiver.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()
        thread.join(timeout=10)


def test_kill_9_then_restart_loses_no_generation_nor_event(
    reference_factory: ReferenceFactory, tmp_path: Path, target: _Target
) -> None:
    state = tmp_path / "state"
    first = reference_factory(directory=state, args=["--latency-ms", "400"])
    client = first.client()
    key = first.key("primary")
    ids: list[str] = []
    # Submit steadily, so the crash lands while some generations wait and some events are
    # still to be delivered.
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and len(ids) < 400:
        response = client.post(
            "/v1/images/generate",
            headers=bearer(key),
            json={"prompt": f"p{len(ids)}", "callback_url": target.url},
        )
        assert response.status_code == 202, response.text
        ids.append(response.json()["id"])
    first.stop(signal.SIGKILL)
    with sqlite3.connect(first.db_path) as db:
        statuses = dict(db.execute("SELECT status, COUNT(*) FROM generations GROUP BY status"))
    assert sum(statuses.values()) == len(ids)  # every accepted submit was durable
    assert statuses.get("queued", 0) > 0, statuses  # the crash cut work short
    second = reference_factory(directory=state, provision=False)
    client = second.client()
    for generation_id in ids:
        done = wait_for_status(client, key, generation_id, timeout_s=30)
        assert done["status"] == "completed", done
        assert client.get(done["output_url"]).status_code == 200
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not set(ids) <= target.arrived():
        time.sleep(0.1)  # polling interval; the deadline bounds the wait
    assert set(ids) <= target.arrived(), f"{len(set(ids) - target.arrived())} events lost"
