"""Running the reference implementation as a process, and small HTTP helpers for its tests.

Fixtures built on these live in ``tests/reference/conftest.py``.

The tests start the reference a few hundred times, and half a second of the CPU of each
start was its imports. So each test process has one fork server that has imported the
reference (``tests/fork_server.py``), started with the first reference, and a reference
is a child forked from it with ``serve``'s arguments, working directory and environment,
writing to the pipe and file given here, as ``python -m reference`` would. The process
this module holds is the server's client, which stands in for the reference: it passes
SIGTERM on and ends as the reference ended. A crash (:meth:`RunningReference.stop` with
SIGKILL) kills the reference itself, by the pid it wrote before it started, and the
client then ends with it. A reference started under a *wrapper* (a command that must exec the
reference in its own namespace) is still ``python -m reference``.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fork_server
import httpx
from processes import wait_or_kill

STARTUP_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
_LISTENING = re.compile(r"^listening on (http://\S+)$")


@dataclass
class RunningReference:
    """One reference service process and what it provisioned."""

    directory: Path
    process: subprocess.Popen[str]
    base_url: str
    profile: dict[str, Any]
    stderr_path: Path
    #: Where the reference forked by the fork server wrote its pid (None: ``process`` is
    #: the reference itself).
    pid_file: Path | None = None
    clients: list[httpx.Client] = field(default_factory=list)

    @property
    def db_path(self) -> Path:
        return self.directory / "store.sqlite3"

    def key(self, role: str) -> str:
        """The raw API key of a profile role (e.g. ``primary``, ``low-limit``)."""
        value: str = self.profile["keys"][role]["key"]
        return value

    def key_id(self, role: str) -> str:
        value: str = self.profile["keys"][role]["key_id"]
        return value

    def session(self, name: str = "primary") -> str:
        """The console JWT of a provisioned session (``primary`` or ``second``)."""
        value: str = self.profile["sessions"][name]["token"]
        return value

    def client(self, timeout: float = 10.0) -> httpx.Client:
        """An httpx client on the service (closed with the service)."""
        client = httpx.Client(base_url=self.base_url, timeout=timeout, trust_env=False)
        self.clients.append(client)
        return client

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def __enter__(self) -> RunningReference:
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Leaving a ``with start_reference(...)`` block stops the service gracefully."""
        self.stop()

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Stop the process (SIGTERM: graceful; SIGKILL: a crash); returns its status."""
        for client in self.clients:
            client.close()
        self.clients.clear()
        if self.process.poll() is None:
            if sig == signal.SIGKILL and self.pid_file is not None:
                # The client cannot pass SIGKILL on: kill the reference itself (only it,
                # as a crash would), and the client ends once the reference has.
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(self.pid_file.read_text(encoding="ascii")), sig)
            else:
                self.process.send_signal(sig)
            wait_or_kill(self.process, STOP_TIMEOUT_S)
        if self.process.stdout is not None:
            self.process.stdout.close()
        return self.process.returncode


def start_reference(
    directory: Path,
    *,
    faults: Sequence[str] = (),
    args: Sequence[str] = (),
    provision: bool = True,
    wrapper: Sequence[str] = (),
) -> RunningReference:
    """Start ``python -m reference serve`` with its state in ``directory``; *wrapper* is a
    command that execs its arguments (e.g. ``unshare -m sh -c ...``: the same process)."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = time.monotonic_ns()
    pid_file = None if wrapper else directory / f"reference-{stamp}.pid"
    command = (
        [*wrapper, sys.executable, "-m", "reference"]
        if pid_file is None
        else list(
            fork_server.shared(os.environ, suite=False).command("reference", pid_file=pid_file)
        )
    )
    argv = [
        *command, "serve", "--port", "0",
        "--db", str(directory / "store.sqlite3"), "--allow-cidr", "127.0.0.1/32",
    ]  # fmt: skip
    if provision:
        argv += ["--provision", str(directory / "profile.toml")]
    for fault in faults:
        argv += ["--fault", fault]
    argv += list(args)
    stderr_path = directory / f"stderr-{stamp}.log"
    with stderr_path.open("w", encoding="utf-8") as stderr:
        process = subprocess.Popen(  # noqa: S603 - our interpreter, fixed arguments
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    lines: queue.Queue[str | None] = queue.Queue()

    def drain() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=drain, daemon=True, name="reference-stdout").start()
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    base_url = None
    while base_url is None:
        remaining = deadline - time.monotonic()
        try:
            line = lines.get(timeout=max(0.01, remaining))
        except queue.Empty:
            line = ""
        if line is None or remaining <= 0:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT_S)
            if process.stdout is not None:
                process.stdout.close()
            raise RuntimeError(
                f"reference did not start (status {process.returncode}):\n"
                + stderr_path.read_text(encoding="utf-8", errors="replace")[-3000:]
            )
        match = _LISTENING.match(line)
        if match:
            base_url = match.group(1)
    profile: dict[str, Any] = {}
    if provision:
        profile = tomllib.loads((directory / "profile.toml").read_text(encoding="utf-8"))
    return RunningReference(directory, process, base_url, profile, stderr_path, pid_file)


def wait_for_status(
    client: httpx.Client,
    key: str,
    generation_id: str,
    statuses: Sequence[str] = ("completed", "failed", "cancelled"),
    timeout_s: float = 15.0,
    interval_s: float = 0.05,
) -> dict[str, Any]:
    """Poll GET /v1/generations/{id} until its status is one of ``statuses`` (bounded).

    Each poll is a /v1 request and counts against the key's rate limit: use a longer
    ``interval_s`` with low-limit keys.
    """
    deadline = time.monotonic() + timeout_s
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        response = client.get(
            f"/v1/generations/{generation_id}", headers={"Authorization": f"Bearer {key}"}
        )
        assert response.status_code == 200, response.text
        last = response.json()
        if last["status"] in statuses:
            return last
        time.sleep(interval_s)  # polling interval, not synchronisation: the deadline bounds it
    raise AssertionError(
        f"generation {generation_id} still {last.get('status')!r} after {timeout_s}s"
    )


def submit_image(client: httpx.Client, key: str, body: dict[str, Any]) -> str:
    """POST /v1/images/generate with ``body`` (asserting a 202); the generation's id."""
    response = client.post("/v1/images/generate", json=body, headers=bearer(key))
    assert response.status_code == 202, response.text
    generation_id: str = response.json()["id"]
    return generation_id


def generation_deliveries(
    client: httpx.Client, key: str, generation_id: str
) -> list[dict[str, Any]]:
    """The delivery records of GET /v1/generations/{id}/deliveries (asserting a 200)."""
    response = client.get(f"/v1/generations/{generation_id}/deliveries", headers=bearer(key))
    assert response.status_code == 200, response.text
    records: list[dict[str, Any]] = response.json()["deliveries"]
    return records


def wait_for_delivery(
    client: httpx.Client,
    key: str,
    generation_id: str,
    until: str | Callable[[dict[str, Any]], bool],
    timeout_s: float = 20.0,
    interval_s: float = 0.05,
) -> dict[str, Any]:
    """Poll the generation's deliveries until a record meets ``until`` (bounded); return it.

    ``until`` is an outcome (``"delivered"``, ``"exhausted"``) or a test on a record.
    """
    done = until if callable(until) else (lambda record: record["outcome"] == until)
    deadline = time.monotonic() + timeout_s
    while True:
        records = generation_deliveries(client, key, generation_id)
        for record in records:
            if done(record):
                return record
        if time.monotonic() > deadline:
            raise AssertionError(f"no delivery of {generation_id} meets {until!r}: {records}")
        time.sleep(interval_s)  # polling interval, not synchronisation: the deadline bounds it


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


#: The type of the ``reference_factory`` fixture.
ReferenceFactory = Callable[..., RunningReference]
