"""kill -9 during processing, then restart on the same store: no generation is lost."""

from __future__ import annotations

import signal
import sqlite3
import time
from pathlib import Path

from running_reference import ReferenceFactory, bearer, wait_for_status


def test_kill_9_then_restart_loses_no_generation(
    reference_factory: ReferenceFactory, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    first = reference_factory(directory=state, args=["--latency-ms", "400"])
    client = first.client()
    key = first.key("primary")
    ids: list[str] = []
    # Submit steadily, so the crash lands while some generations run and others wait.
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and len(ids) < 400:
        response = client.post(
            "/v1/images/generate", headers=bearer(key), json={"prompt": f"p{len(ids)}"}
        )
        assert response.status_code == 202
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
