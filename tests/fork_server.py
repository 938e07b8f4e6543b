"""A fork server for the project's tests: runs of ``python -m MODULE ARGS`` (and of
``python -u -c CODE``, below) that skip the interpreter's start and the imports every run
repeats.

The fault matrix starts a run of the suite per fault, hundreds of them, and each spent
about two seconds of CPU importing the same modules (pytest, its plugins, httpx,
jsonschema, the suite) before doing a second of work. The server is a process that imports
them once and then forks a child per run; the child runs the module as ``python -m`` would
(:func:`runpy.run_module` with ``sys.argv`` set), with the run's working directory,
environment and output files, in its own process group, and exits with the module's exit
status. A run is therefore still its own process that shares nothing mutable with the
test run that asked for it (or with another run): the module objects it starts from were
imported by a process that has run nothing else.

The server is single-threaded (a child forked from a process with threads could inherit a
lock held by a thread that does not exist in it): one loop waits on its requests (JSON
lines on stdin) and on ``SIGCHLD`` (through :func:`signal.set_wakeup_fd`), and writes a
JSON line to stdout when a child starts (its pid) and when it ends (its exit status).

The reference can be started through the server too. Each fault run starts its own
reference, ``python -m reference serve ...``, and so do most tests of the reference, and
half a second of the CPU of each start was imports. The server therefore imports the
reference as well, and listens on a Unix socket for starts sent by ``fork_client.py``:
the suite's launcher runs that client instead of ``python -m reference``
(``GENAPI_REFERENCE_COMMAND``, set in each run's environment), and
``tests/reference/running_reference.py`` runs it where it would run ``python -m
reference``. The client sends its arguments, working directory, environment and standard
streams (the descriptors themselves), and the server forks a child that becomes the
program on them. The client stands in for that child: it passes SIGTERM and SIGINT on,
and ends as the child ended (its exit status, or the same signal). If the client dies
(the launcher killed it, or a run's whole process group was killed at its deadline), the
server kills the child: no reference outlives the run that started it.

The client takes what ``python`` would: ``-m MODULE ARGS``, or ``-u -c CODE``, which is how
pytest-xdist starts a worker (execnet then sends it its code over stdin and stdout). A
run's workers are started that way (``GENAPI_WORKER_PYTHON``), and each is spared the two
seconds of importing the suite that a full run's eight workers otherwise spend.

:class:`ForkServer` is the client side of the runs: it starts the server (importing the
reference, and with ``suite`` the suite too), hands out runs from any thread and waits
for each with a deadline, killing the run's process group if it passes.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import inspect
import json
import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import types
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any

from processes import wait_or_kill

__all__ = ["CLIENT", "REFERENCE_MODULES", "SUITE_MODULES", "ForkServer", "RunTimeout", "shared"]

#: What a server imports before its first fork: the reference, which it can start for a
#: client of its socket (the module docstring).
REFERENCE_MODULES = ("reference.__main__",)
#: What a server for runs of the suite imports as well: what every run imports (its CLI,
#: pytest and the plugins pytest loads, the libraries of the checks). Check modules are
#: left out: pytest must import those itself, rewriting their asserts.
SUITE_MODULES = (
    "conformance.run.cli",
    "conformance.run.plugin",
    "conformance.run.fixtures",
    "conformance.judge.fuzzing",
    "schemathesis",  # the fuzzing module imports it when cases are drawn
    "conformance.judge.strategies",
    "conformance.observe.events",
    "_hypothesis_pytestplugin",
    "allure_pytest.plugin",
    "anyio.pytest_plugin",
    "pytest_httpserver.pytest_plugin",
    "pytest_locust.plugin",
    "pytest_timeout",
    "xdist.looponfail",
    "xdist.plugin",
)
#: The flags of ``python`` a child honours (:func:`_python_args`).
_FLAGS = frozenset({"-u", "-B"})
#: The modules runs execute (``python -m``): imported for what they import, then dropped.
_RUN_MODULES = frozenset({"conformance.run.cli", "reference.__main__"})
#: How long the server may take to import its modules and say it is ready.
_READY_TIMEOUT_S = 120.0
#: The client that starts a module through the server's socket (module docstring).
CLIENT = Path(__file__).with_name("fork_client.py")
#: How long the server waits for a connected client's request: it sends it at once, and
#: the server does nothing else meanwhile.
_REQUEST_TIMEOUT_S = 5.0
#: The largest request a client may send (its environment is most of it).
MAX_REQUEST_BYTES = 1 << 20


class RunTimeout(Exception):
    """A run did not end within its deadline; its process group was killed."""


# --------------------------------------------------------------------------- server side


def _no_rewrite_warning() -> None:
    """Keep pytest from refusing the preloaded plugin packages.

    pytest rewrites the asserts of every package of a distribution that has a pytest
    plugin, and warns (which the run's ``filterwarnings = error`` makes fatal) about one
    already imported. The preloaded ones (:data:`SUITE_MODULES`) keep their plain asserts,
    which only matters to a failing assert inside those libraries' own code.
    """
    from _pytest.assertion.rewrite import AssertionRewritingHook

    AssertionRewritingHook._warn_already_imported = lambda self, name: None  # type: ignore[method-assign]


def _python_args(argv: Sequence[str]) -> tuple[frozenset[str], str, str, list[str]]:
    """A ``python`` command line, read as a child can run it: its flags (``-u``, ``-B``),
    ``-m`` or ``-c`` with the module or the code, and the program's arguments.

    Those are the two forms the runs need: ``python -m MODULE`` (the suite, the reference)
    and pytest-xdist's ``python -u -c CODE`` (a worker: execnet sends it its code on
    stdin). Anything else is refused rather than run differently from ``python``.
    """
    flags: set[str] = set()
    index = 0
    while index < len(argv) and argv[index] in _FLAGS:
        flags.add(argv[index])
        index += 1
    if len(argv) - index < 2 or argv[index] not in ("-m", "-c"):
        raise ValueError(f"a fork server runs `python [-u] [-B] -m MODULE|-c CODE ...`: {argv}")
    return frozenset(flags), argv[index], argv[index + 1], list(argv[index + 2 :])


def _run_program(flags: frozenset[str], kind: str, target: str, args: list[str]) -> None:
    """Run ``python FLAGS KIND TARGET ARGS`` in this process, as the interpreter would."""
    sys.dont_write_bytecode = "-B" in flags
    if kind == "-m":
        sys.argv = [target, *args]
        runpy.run_module(target, run_name="__main__", alter_sys=True)
    else:
        sys.argv = ["-c", *args]
        main = types.ModuleType("__main__")
        sys.modules["__main__"] = main
        exec(compile(target, "<string>", "exec"), main.__dict__)  # noqa: S102 (python -c)


def _child(request: Mapping[str, Any], stdio: Sequence[int] | None = None) -> None:
    """In the forked child: become the run, then exit with its status (never return).

    Its standard streams are ``stdio`` (descriptors a client passed) when given, else
    ``/dev/null`` and the request's ``stdout`` and ``stderr`` files.
    """
    code = 1
    try:
        os.setpgid(0, 0)
        for signum in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.set_wakeup_fd(-1)
        if stdio is not None:
            for fd, given in enumerate(stdio):
                os.dup2(given, fd)
        else:
            with open(os.devnull, "rb") as null:
                os.dup2(null.fileno(), 0)
            for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
                with open(path, "wb") as sink:
                    os.dup2(sink.fileno(), fd)
        os.closerange(3, 256)
        if request.get("pid_file"):
            # Before the program runs: whoever reads its output can rely on it.
            Path(request["pid_file"]).write_text(str(os.getpid()), encoding="ascii")
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.pycache_prefix = request["env"].get("PYTHONPYCACHEPREFIX") or None
        try:
            flags, kind, target, args = _python_args(request["argv"])
        except ValueError as refused:
            os.write(2, f"fork_server: {refused}\n".encode())
            code = 2  # python's status for a usage error; the finally below exits with it
            return
        # As python does: unbuffered with -u, line by line when PYTHONUNBUFFERED asks it
        # (the launcher reads the reference's "listening on" line from a pipe as soon as it
        # is printed).
        buffering = 1 if "-u" in flags or request["env"].get("PYTHONUNBUFFERED") else -1
        sys.stdin = open(0, encoding="utf-8", closefd=False)
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False, buffering=buffering)
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False, buffering=buffering)
        _no_rewrite_warning()
        try:
            _run_program(flags, kind, target, args)
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
            if not isinstance(done.code, int | None):
                print(done.code, file=sys.stderr)
        except BaseException:  # the child's last word, as python says it
            import traceback

            traceback.print_exc()
            code = 1
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
    finally:
        os._exit(code)


def _fork(request: Mapping[str, Any], stdio: Sequence[int] | None = None) -> int:
    """Fork the child of ``request``; its pid, which is also its process group's id."""
    pid = os.fork()
    if pid == 0:
        _child(request, stdio)
    # The child makes itself a group too; doing it here as well means the group exists
    # before anyone may try to kill it.
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)
    return pid


def _kill(pid: int) -> None:
    """Kill the child ``pid`` and whatever it started (its process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def _say(message: Mapping[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _warm() -> None:
    """Compute once, before any fork, what every run computes alike and its modules cache:
    the catalog (parsed, validated against its schema and the spec's text), which ids each
    check module may cite (a syntax tree read per module), the digest of the installed
    suite that each run's results name, the fixtures of the URL checks, and the map from
    files to modules that pytest's tracebacks look up. Measured: 0.8 s of CPU a run for the
    first two, 0.13 s for the others."""
    from conformance.catalog import load_catalog
    from conformance.judge.strategies import fixture_vectors
    from conformance.provenance import distribution_sha256
    from conformance.run.plugin.citations import OWN_CHECKS
    from conformance.run.plugin.preselect import source_citations
    from genapi_spec.address_tables import address_ranges, embeddings

    ids = load_catalog().ids
    for path in sorted(OWN_CHECKS.glob("test_*.py")):
        source_citations(path, ids)
    distribution_sha256()
    fixture_vectors()
    address_ranges()
    embeddings()
    inspect.getmodule(_warm.__code__)


def _accept(listener: socket.socket) -> tuple[socket.socket, int] | None:
    """Take one client's request from the socket and fork its child; the client's
    connection and the child's pid (None for a client that sent no valid request, or left
    before it learnt its child's pid: that child is killed)."""
    connection, _ = listener.accept()
    fds: list[int] = []
    try:
        connection.settimeout(_REQUEST_TIMEOUT_S)
        message, fds, _, _ = socket.recv_fds(connection, MAX_REQUEST_BYTES, 3)
        if len(fds) == 3:
            pid = _fork(json.loads(message), stdio=fds)
            try:
                connection.sendall(json.dumps({"pid": pid}).encode())
            except OSError:
                _kill(pid)
                raise
            return connection, pid
    except (OSError, ValueError):
        pass
    finally:
        for fd in fds:
            os.close(fd)
    connection.close()
    return None


def serve(socket_path: str, *, suite: bool) -> None:
    """The server's loop: fork a child per request (a line on stdin, or a client on the
    socket at ``socket_path``), report starts and ends to whoever asked. ``suite``: import
    and warm up the suite too (:data:`SUITE_MODULES`, :func:`_warm`)."""
    for name in (*REFERENCE_MODULES, *SUITE_MODULES) if suite else REFERENCE_MODULES:
        importlib.import_module(name)
    if suite:
        _warm()
    # What was imported and computed is frozen out of the collector's reach: the
    # children's collections (pytest runs two at its end) no longer walk it, nor write to
    # its pages.
    gc.collect()
    gc.freeze()
    # The run's module itself is executed anew as __main__ in each child, as python -m
    # does; left imported, runpy would warn that it was found in sys.modules.
    for name in [name for name in sys.modules if name in _RUN_MODULES]:
        del sys.modules[name]
    assert threading.active_count() == 1, "the imports started a thread: forking is unsafe"
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    os.set_blocking(wake_read, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(socket_path)
    listener.listen(64)
    listener.setblocking(False)
    running: dict[int, str] = {}  # children of stdin requests: pid -> request id
    clients: dict[int, socket.socket] = {}  # children of socket clients: pid -> client
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ, "request")
    selector.register(wake_read, selectors.EVENT_READ, "child")
    selector.register(listener, selectors.EVENT_READ, "client")
    _say({"ready": True})
    pending = b""
    open_input = True
    while open_input or running or clients:
        for key, _ in selector.select():
            if key.data == "request":
                # Read the fd itself: a buffered readline could keep a second request in
                # its buffer, where select would never see it.
                chunk = os.read(0, 65536)
                if not chunk:
                    open_input = False
                    selector.unregister(0)
                    continue
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    request = json.loads(line)
                    pid = _fork(request)
                    running[pid] = request["id"]
                    _say({"id": request["id"], "pid": pid})
            elif key.data == "client":
                with contextlib.suppress(BlockingIOError):
                    accepted = _accept(listener)
                    if accepted is not None:
                        connection, pid = accepted
                        clients[pid] = connection
                        selector.register(connection, selectors.EVENT_READ, pid)
            elif isinstance(key.data, int):
                # A client sends nothing after its request: readable means it is gone, and
                # its child must not outlive it.
                pid = key.data
                connection = clients.pop(pid)
                selector.unregister(connection)
                connection.close()
                _kill(pid)
            else:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_read, 512)
                while True:
                    try:
                        pid, status = os.waitpid(-1, os.WNOHANG)
                    except ChildProcessError:  # no child left at all
                        break
                    if pid == 0:
                        break
                    code = os.waitstatus_to_exitcode(status)
                    run_id = running.pop(pid, None)
                    if run_id is not None:
                        _say({"id": run_id, "returncode": code})
                    connection = clients.pop(pid, None)
                    if connection is not None:
                        selector.unregister(connection)
                        with contextlib.suppress(OSError):
                            connection.sendall(json.dumps({"returncode": code}).encode())
                        connection.close()


# --------------------------------------------------------------------------- client side


class ForkServer:
    """The client of one fork server process: :meth:`run` from any thread, and
    :meth:`command`, which starts a module through the server from anywhere.

    Close it (or use it as a context manager) to end the server: it exits once its
    running children have ended.
    """

    def __init__(self, env: Mapping[str, str], *, suite: bool = True) -> None:
        # A folder of its own for the socket: a short path (a Unix socket's is at most
        # 107 bytes) that only this user can reach.
        self._socket_dir = tempfile.TemporaryDirectory(prefix="fork-server-")
        self._socket_path = str(Path(self._socket_dir.name) / "socket")
        self._process = subprocess.Popen(  # noqa: S603 (our interpreter, this file)
            [sys.executable, __file__, self._socket_path, *(["--suite"] if suite else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=dict(env),
        )
        assert self._process.stdin is not None and self._process.stdout is not None
        self._requests: IO[str] = self._process.stdin
        self._replies: IO[str] = self._process.stdout
        self._lock = threading.Lock()
        self._counter = 0
        self._started: dict[str, Future[int]] = {}
        self._ended: dict[str, Future[int]] = {}
        self._ready: Future[bool] = Future()
        self._reader = threading.Thread(target=self._read, name="fork-server", daemon=True)
        self._reader.start()
        if not self._ready.result(timeout=_READY_TIMEOUT_S):
            raise RuntimeError("the fork server ended before it was ready")

    def python(self, *, pid_file: Path | None = None) -> tuple[str, ...]:
        """The command line that stands in for ``python`` run as a child of the server: it
        takes ``-m MODULE ARGS`` or ``[-u] [-B] -c CODE ARGS`` after it.
        ``fork_client.py`` stands in for the child, which writes its pid to ``pid_file``
        (when given) before it runs its program. The client needs only the standard
        library, so it starts without ``site`` (``-S``)."""
        pid = ("--pid-file", str(pid_file)) if pid_file is not None else ()
        return (sys.executable, "-S", str(CLIENT), self._socket_path, *pid)

    def command(self, module: str, *, pid_file: Path | None = None) -> tuple[str, ...]:
        """The command line that runs ``python -m module`` as a child of the server (the
        arguments follow it); see :meth:`python`."""
        return (*self.python(pid_file=pid_file), "-m", module)

    def _read(self) -> None:
        for line in self._replies:
            message = json.loads(line)
            if message.get("ready"):
                self._ready.set_result(True)
            elif "pid" in message:
                self._started[message["id"]].set_result(message["pid"])
            else:
                self._ended[message["id"]].set_result(message["returncode"])
        if not self._ready.done():
            self._ready.set_result(False)
        for future in [*self._started.values(), *self._ended.values()]:
            if not future.done():
                future.set_exception(RuntimeError("the fork server ended"))

    def run(
        self,
        module: str,
        args: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        stdout: Path,
        stderr: Path,
        timeout: float,
    ) -> int:
        """Run ``python -m module args`` as a forked child; its exit status.

        Raises :class:`RunTimeout` (after killing the run's process group, the reference
        it started included) when it has not ended within ``timeout`` seconds.
        """
        with self._lock:
            self._counter += 1
            run_id = str(self._counter)
            started: Future[int] = Future()
            ended: Future[int] = Future()
            self._started[run_id], self._ended[run_id] = started, ended
            request = {
                "id": run_id,
                "argv": ["-m", module, *args],
                "cwd": str(cwd),
                "env": dict(env),
                "stdout": str(stdout),
                "stderr": str(stderr),
            }
            self._requests.write(json.dumps(request) + "\n")
            self._requests.flush()
        pid = started.result(timeout=_READY_TIMEOUT_S)
        try:
            return ended.result(timeout=timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            raise RunTimeout(f"python -m {module} did not end within {timeout:.0f} s") from None

    def close(self) -> None:
        """End the server: no more runs; it exits when its children have."""
        with contextlib.suppress(OSError):
            self._requests.close()
        wait_or_kill(self._process, _READY_TIMEOUT_S)
        self._reader.join(timeout=_READY_TIMEOUT_S)
        self._replies.close()
        self._socket_dir.cleanup()

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_SHARED: dict[bool, ForkServer] = {}
_SHARED_LOCK = threading.Lock()


def shared(env: Mapping[str, str], *, suite: bool) -> ForkServer:
    """This process's fork server of its kind (with ``suite``, the suite's as well as the
    reference's; else the reference's only), started with *env* on first use and closed
    when the process exits: every caller in the process shares it."""
    with _SHARED_LOCK:
        server = _SHARED.get(suite)
        if server is None:
            server = _SHARED[suite] = ForkServer(env, suite=suite)
            atexit.register(server.close)
        return server


if __name__ == "__main__":
    serve(sys.argv[1], suite="--suite" in sys.argv[2:])
