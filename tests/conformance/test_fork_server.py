"""The fault matrix's fork server (``fork_server.py``): a run is ``python -m`` in a child
with its own working directory, environment and output, and a run past its deadline is
killed."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fork_server import ForkServer, RunTimeout


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    with ForkServer(dict(os.environ)) as running:
        yield running


def test_a_run_is_python_dash_m_with_its_own_directory_environment_and_output(
    server: ForkServer, tmp_path: Path
) -> None:
    (tmp_path / "in.json").write_text('{"b": 1, "a": [2]}', encoding="utf-8")
    out, err = tmp_path / "out", tmp_path / "err"
    code = server.run(
        "json.tool",
        ["--sort-keys", "in.json"],
        cwd=tmp_path,
        env={"ONLY_THIS": "1"},
        stdout=out,
        stderr=err,
        timeout=60,
    )
    assert code == 0, err.read_text()
    assert json.loads(out.read_text()) == {"a": [2], "b": 1}
    code = server.run(
        "json.tool",
        ["missing.json"],
        cwd=tmp_path,
        env={},
        stdout=out,
        stderr=err,
        timeout=60,
    )
    assert code != 0
    assert "missing.json" in err.read_text()


def test_runs_go_at_once_and_one_past_its_deadline_is_killed(
    server: ForkServer, tmp_path: Path
) -> None:
    started = time.monotonic()
    with pytest.raises(RunTimeout):
        server.run(
            "timeit",
            ["-n", "1", "-r", "1", "import time; time.sleep(60)"],
            cwd=tmp_path,
            env={},
            stdout=tmp_path / "out",
            stderr=tmp_path / "err",
            timeout=1.0,
        )
    assert time.monotonic() - started < 30
