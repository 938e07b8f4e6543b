"""The tests' fork server (``fork_server.py``): a run is ``python -m`` in a child
with its own working directory, environment and output, and a run past its deadline is
killed; a module started through the socket (``fork_client.py``) writes to its client's
streams, takes its signals, and does not outlive it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
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


def _client(
    server: ForkServer, cwd: Path, *code: str, pid_file: Path | None = None
) -> subprocess.Popen[str]:
    """``python -m timeit`` of *code* started through the server's socket, as the launcher
    starts the reference: stdout a pipe, the environment its own."""
    return subprocess.Popen(  # noqa: S603 (our interpreter, the project's client)
        [*server.command("timeit", pid_file=pid_file), "-n", "1", "-r", "1", *code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env={"PYTHONUNBUFFERED": "1", "SEEN": "yes"},
    )


def _gone(pid: int, within: float = 30.0) -> bool:
    """Whether process *pid* has ended (and been reaped) within *within* seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_a_module_started_through_the_socket_writes_to_the_clients_streams(
    server: ForkServer, tmp_path: Path
) -> None:
    """The child has the client's directory, environment and standard streams, and the
    client exits with the child's status."""
    setup = "import os; print(os.getcwd(), os.environ['SEEN'], flush=True)"
    client = _client(server, tmp_path, "-s", setup, "pass")
    out, err = client.communicate(timeout=60)
    assert client.returncode == 0, err
    assert out.splitlines()[0] == f"{tmp_path} yes"
    failing = _client(server, tmp_path, "raise SystemExit(7)")
    _, err = failing.communicate(timeout=60)
    assert failing.returncode == 1 and "SystemExit: 7" in err  # timeit reports the error


def test_the_client_passes_sigterm_on_and_a_killed_client_takes_its_child_along(
    server: ForkServer, tmp_path: Path
) -> None:
    wait = ("-s", "import os; print(os.getpid(), flush=True)", "import time; time.sleep(60)")
    for signum in (signal.SIGTERM, signal.SIGKILL):
        client = _client(server, tmp_path, *wait)
        assert client.stdout is not None
        child = int(client.stdout.readline())
        assert child != client.pid
        client.send_signal(signum)
        assert client.wait(timeout=30) == -signum, "the client ends as its child did"
        assert _gone(child), f"the child {child} outlived its client ({signum!r})"
        client.stdout.close()
        assert client.stderr is not None
        client.stderr.close()


def test_the_client_says_its_childs_pid_and_ends_as_the_child_killed_by_a_signal(
    server: ForkServer, tmp_path: Path
) -> None:
    """A caller that kills the child itself (a crash, in the reference's tests) knows it
    dead once the client has ended, and sees the signal that ended it."""
    pid_file = tmp_path / "child.pid"
    wait = ("-s", "import os; print(os.getpid(), flush=True)", "import time; time.sleep(60)")
    client = _client(server, tmp_path, *wait, pid_file=pid_file)
    assert client.stdout is not None and client.stderr is not None
    child = int(client.stdout.readline())
    assert int(pid_file.read_text(encoding="ascii")) == child
    os.killpg(child, signal.SIGKILL)
    assert client.wait(timeout=30) == -signal.SIGKILL
    assert _gone(child, within=0.0) or _gone(child)
    client.stdout.close()
    client.stderr.close()


def test_the_client_stands_in_for_python_dash_c_reading_its_stdin_as_execnet_does(
    server: ForkServer, tmp_path: Path
) -> None:
    """pytest-xdist starts a worker as ``python -u -c CODE`` and talks to it over its
    stdin and stdout: through the server, the code runs as ``__main__`` with
    ``sys.argv == ["-c", ...]``, reads what the caller writes and answers at once."""
    code = (
        "import sys; assert __name__ == '__main__', __name__; "
        "print(sys.argv[1:], sys.dont_write_bytecode, flush=False); "
        "print(sys.stdin.readline().strip().upper())"
    )
    client = subprocess.Popen(  # noqa: S603 (our interpreter, the project's client)
        [*server.python(), "-u", "-B", "-c", code, "one", "two"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={},
    )
    assert client.stdin is not None and client.stdout is not None
    assert client.stdout.readline() == "['one', 'two'] True\n", "-u: written at once"
    out, err = client.communicate("ping\n", timeout=60)
    assert client.returncode == 0, err
    assert out == "PING\n"


def test_the_server_refuses_what_python_would_run_differently(
    server: ForkServer, tmp_path: Path
) -> None:
    """Only ``-m`` and ``-c`` (after ``-u``/``-B``) are run; anything else is refused with
    the forms it takes, never run as something else."""
    client = subprocess.run(  # noqa: S603 (our interpreter, the project's client)
        [*server.python(), "-X", "dev", "-c", "pass"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={},
        timeout=60,
        check=False,
    )
    assert client.returncode == 2
    assert "-m MODULE|-c CODE" in client.stderr, client.stderr
