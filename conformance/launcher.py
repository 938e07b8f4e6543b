"""Start the bundled reference implementation as a separate process for one run.

The suite never imports the reference (ARCHITECTURE.md, the dependency rule): it starts
``python -m reference serve`` with a fresh store and lets the reference provision itself
and write the target profile, which the suite then reads like any other profile.
"""

from __future__ import annotations

import collections
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

__all__ = ["EmbeddedReference", "LaunchError"]

_LISTENING = re.compile(r"listening on (?P<url>https?://\S+)")


def _alive(thread: threading.Thread | None) -> bool:
    return thread is not None and thread.is_alive()


class LaunchError(RuntimeError):
    """The reference did not come up: it died, or never said it was listening."""


class EmbeddedReference:
    """A context manager that runs the reference on loopback; entering gives the profile path.

    The receiver's address (127.0.0.1) is allowlisted (``--allow-cidr 127.0.0.1/32``) so
    the reference treats the suite's receiver as public; every other private address stays
    rejected, as the rejection checks need (DESIGN.md, the loopback rule).

    ``command`` replaces ``python -m reference`` (the project's tests use a small fake).
    """

    def __init__(
        self,
        *,
        faults: Sequence[str] = (),
        extra_args: Sequence[str] = (),
        startup_timeout: float = 30.0,
        stop_timeout: float = 10.0,
        command: Sequence[str] | None = None,
        workdir: Path | None = None,
    ) -> None:
        self._faults = tuple(faults)
        self._extra_args = tuple(extra_args)
        self._startup_timeout = startup_timeout
        self._stop_timeout = stop_timeout
        self._command = (
            tuple(command) if command is not None else (sys.executable, "-m", "reference")
        )
        self._workdir = workdir
        self._tempdir: tempfile.TemporaryDirectory[str] | None = None
        self._process: subprocess.Popen[str] | None = None
        self._stdout_tail: collections.deque[str] = collections.deque(maxlen=50)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr_path: Path | None = None
        self._drainer: threading.Thread | None = None
        self.base_url: str | None = None
        self.profile_path: Path | None = None

    @property
    def pid(self) -> int | None:
        """The process id while the reference runs."""
        return None if self._process is None else self._process.pid

    def argv(self, directory: Path) -> list[str]:
        """The command line that starts the reference with its state in ``directory``."""
        argv = [
            *self._command,
            "serve",
            "--port",
            "0",
            "--db",
            str(directory / "store.sqlite3"),
            "--provision",
            str(directory / "profile.toml"),
            "--allow-cidr",
            "127.0.0.1/32",
        ]
        for fault in self._faults:
            argv += ["--fault", fault]
        argv += self._extra_args
        return argv

    def __enter__(self) -> Path:
        if self._workdir is None:
            self._tempdir = tempfile.TemporaryDirectory(prefix="genapi-reference-")
            directory = Path(self._tempdir.name)
        else:
            directory = self._workdir
            directory.mkdir(parents=True, exist_ok=True)
        self._stderr_path = directory / "stderr.log"
        try:
            return self._start(directory)
        except BaseException:
            self._stop()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop()

    def _start(self, directory: Path) -> Path:
        assert self._stderr_path is not None
        with self._stderr_path.open("w", encoding="utf-8") as stderr:
            # stderr goes to a file (it can grow without blocking the child); stdout is a
            # pipe drained by a thread, which hands us lines until the listening one.
            self._process = subprocess.Popen(  # noqa: S603 (our own interpreter, fixed args)
                self.argv(directory),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                encoding="utf-8",
                errors="replace",
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self._drainer = threading.Thread(
            target=self._drain, args=(self._process,), name="reference-stdout", daemon=True
        )
        self._drainer.start()
        deadline = time.monotonic() + self._startup_timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LaunchError(
                    f"the reference did not print 'listening on' within "
                    f"{self._startup_timeout:g} s{self._tails()}"
                )
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                code = self._process.wait(timeout=self._stop_timeout)
                raise LaunchError(
                    f"the reference exited (status {code}) before listening{self._tails()}"
                )
            match = _LISTENING.search(line)
            if match:
                self.base_url = match.group("url")
                break
        profile = directory / "profile.toml"
        if not profile.is_file():
            raise LaunchError(f"the reference is listening but wrote no profile at {profile}")
        self.profile_path = profile
        return profile

    def _drain(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self._stdout_tail.append(line.rstrip("\n"))
            self._lines.put(line)
        self._lines.put(None)

    def _tails(self, lines: int = 20) -> str:
        stderr = ""
        if self._stderr_path is not None and self._stderr_path.is_file():
            text = self._stderr_path.read_text(encoding="utf-8", errors="replace")
            stderr = "\n".join(text.splitlines()[-lines:])
        stdout = "\n".join(list(self._stdout_tail)[-lines:])
        return (
            f"\n--- command: {' '.join(self._command)} serve ..."
            f"\n--- stderr (last {lines} lines):\n{stderr or '(empty)'}"
            f"\n--- stdout (last {lines} lines):\n{stdout or '(empty)'}"
        )

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=self._stop_timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=self._stop_timeout)
        drainer, self._drainer = self._drainer, None
        if drainer is not None:
            # The pipe reaches end-of-file once the process is gone; a grandchild that
            # kept it open must not hang us.
            drainer.join(timeout=self._stop_timeout)
        if process is not None and process.stdout is not None and not _alive(drainer):
            process.stdout.close()
        if self._tempdir is not None:
            self._tempdir.cleanup()
            self._tempdir = None
