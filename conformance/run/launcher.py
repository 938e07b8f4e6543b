"""Start the bundled reference implementation as a separate process for one run.

The suite never imports the reference (ARCHITECTURE.md, the dependency rule): it starts
``python -m reference serve`` with a fresh store and lets the reference provision itself
and write the target profile, which the suite then reads like any other profile.

The run's DNS server (:mod:`conformance.observe.dns`) is started here too, before the reference:
the reference must be told its address at start (``--dns-server``), and the server must
outlive every pytest-xdist worker, so the controller process owns it. Its zone directory
is added to the profile's ``[dns]`` table, where the workers' ``dns_server`` fixture
finds it and attaches instead of binding the port themselves.

The command that starts the reference is ``python -m reference`` unless the environment
names another in :data:`REFERENCE_COMMAND_ENV` (split like a shell would): the project's
fault matrix starts hundreds of references and has them forked from a process that
imported the reference once (``tests/fork_server.py``) rather than paying
half a second of imports each time; a user can run the reference under a profiler the
same way. The command is given the same arguments either way.
"""

from __future__ import annotations

import collections
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import tomli_w

from conformance.observe.dns import DEFAULT_DOMAIN, DnsServer

__all__ = ["REFERENCE_COMMAND_ENV", "EmbeddedReference", "LaunchError", "reference_command"]

#: The environment variable that replaces ``python -m reference`` (module docstring).
REFERENCE_COMMAND_ENV = "GENAPI_REFERENCE_COMMAND"

_LISTENING = re.compile(r"listening on (?P<url>https?://\S+)")


def _alive(thread: threading.Thread | None) -> bool:
    return thread is not None and thread.is_alive()


class LaunchError(RuntimeError):
    """The reference did not come up: it died, or never said it was listening."""


def reference_command(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The command that starts the reference: :data:`REFERENCE_COMMAND_ENV` split like a
    shell would, else ``python -m reference`` with this interpreter."""
    configured = shlex.split(environ.get(REFERENCE_COMMAND_ENV, ""))
    return tuple(configured) if configured else (sys.executable, "-m", "reference")


class EmbeddedReference:
    """A context manager that runs the reference on loopback; entering gives the profile path.

    The receiver's address (127.0.0.1) is allowlisted (``--allow-cidr 127.0.0.1/32``) so
    the reference treats the suite's receiver as public; every other private address stays
    rejected, as the rejection checks need: the spec rejects loopback callback targets, and
    the receiver listens on loopback, so without the allowlist no delivery could reach it.

    With ``dns`` (the default) a DNS server for :data:`~conformance.observe.dns.DEFAULT_DOMAIN`
    serves on a free loopback UDP port for as long as the reference runs; the reference
    resolves callback hosts through it (``--dns-server``) and the profile's ``[dns]``
    table says where it is and where its zone lives (``zone_dir``).

    With ``variant`` the reference takes the other legitimate side of every choice the
    spec leaves open (``serve --variant``) and provisions a profile that declares it.

    ``command`` replaces :func:`reference_command` (the project's tests use a small fake).
    ``test_clock=False`` leaves out ``--test-clock`` (one process's clock: ``--workers``
    above 1 refuses it).
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
        dns: bool = True,
        variant: bool = False,
        test_clock: bool = True,
    ) -> None:
        self._faults = tuple(faults)
        self._test_clock = test_clock
        self._variant = variant
        self._dns = dns
        self.dns_server: DnsServer | None = None
        self._extra_args = tuple(extra_args)
        self._startup_timeout = startup_timeout
        self._stop_timeout = stop_timeout
        self._command = tuple(command) if command is not None else reference_command(os.environ)
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
        if self._test_clock:
            # The daily limits' reset at 00:00 UTC is checked by moving its test clock.
            argv.append("--test-clock")
        if self.dns_server is not None:
            host, port = self.dns_server.address
            argv += ["--dns-server", f"{host}:{port}"]
        for fault in self._faults:
            argv += ["--fault", fault]
        if self._variant:
            argv.append("--variant")
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
        if self._dns:
            # A fresh port and zone per run: runs side by side (the fault matrix) never
            # meet. Bound before the reference starts, so the address it is given works.
            try:
                self.dns_server = DnsServer(
                    DEFAULT_DOMAIN, "127.0.0.1", 0, zone_dir=directory / "dns-zone"
                ).start()
            except OSError as error:
                raise LaunchError(f"cannot start the run's DNS server: {error}") from None
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
        if self.dns_server is not None:
            self._describe_dns(profile, self.dns_server)
        self.profile_path = profile
        return profile

    @staticmethod
    def _describe_dns(profile: Path, server: DnsServer) -> None:
        """Complete the profile's ``[dns]`` table with the zone the workers attach to.

        The reference writes ``server`` and ``domain`` when given ``--dns-server``; they
        must be the server started here (anything else is a mismatch between the parts,
        reported rather than papered over). ``zone_dir`` is the suite's own business.
        """
        try:
            document: dict[str, Any] = tomllib.loads(profile.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as error:
            raise LaunchError(f"the reference wrote a profile that is not TOML: {error}") from None
        host, port = server.address
        ours = {"server": f"{host}:{port}", "domain": server.domain}
        written = document.get("dns")
        if isinstance(written, dict):
            seen = {k: str(written.get(k, "")).lower() for k in ours}
            if seen != ours:
                raise LaunchError(
                    f"the reference's profile says [dns] {seen}, but the suite's DNS server "
                    f"is {ours}: the reference must write the --dns-server it was given"
                )
        document["dns"] = {**ours, "zone_dir": str(server.zone_dir)}
        partial = profile.with_name(profile.name + ".part")
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # keys inside
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(tomli_w.dumps(document))
        os.replace(partial, profile)

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
        server, self.dns_server = self.dns_server, None
        if server is not None:
            # After the reference, which resolves through it until its last delivery.
            server.stop(linger=self._stop_timeout)
        if self._tempdir is not None:
            self._tempdir.cleanup()
            self._tempdir = None
