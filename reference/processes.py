"""``serve --workers N``: N processes serving the one store on one listening socket.

The parent binds the socket, opens the store, provisions, closes its connections, then
forks N children (``os.fork``: the socket is inherited, nothing else is shared). Each
child opens its own store connections and runs the service on the socket; the kernel
spreads the connections among them. Every limit is kept in the store (``Config.workers``
above 1 tells the rate limiter so), each generation is claimed in the store when it
finishes, and only child 0 makes delivery attempts. The parent prints ``listening on``
once every child accepts connections, forwards SIGTERM/SIGINT to them, and stops them all
when one dies: nothing runs half served; queued work stays in the store for the next start.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable
from types import FrameType

from reference.config import Config
from reference.logs import log_event

__all__ = ["ChildMain", "serve_processes"]

#: Runs one child: (its config, the listening socket, announce-when-ready) → exit status.
ChildMain = Callable[[Config, socket.socket, Callable[[], None]], int]

#: How long the children get to accept connections.
STARTUP_TIMEOUT_S = 30.0
#: How long the children get to stop after SIGTERM (uvicorn's 5 s graceful shutdown,
#: then the generation worker's batch) before they are killed.
STOP_TIMEOUT_S = 20.0
#: prctl's option that signals a child when its parent dies (linux/prctl.h).
_PR_SET_PDEATHSIG = 1
#: How often the parent looks at its children while it waits.
_POLL_S = 0.05


def _end_with_parent(parent: int) -> None:
    """Linux: SIGTERM this child when the parent dies, even by SIGKILL (no orphan keeps
    serving); elsewhere the parent's own stop is the only one."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


def _fork(config: Config, index: int, sock: socket.socket, ready: int, child: ChildMain) -> int:
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    # The child: never returns into the parent's code.
    code = 1
    try:
        _end_with_parent(parent)
        mine = dataclasses.replace(config, process_index=index)

        def announce() -> None:
            os.write(ready, b".")

        code = child(mine, sock, announce)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


class _Children:
    """The running children by pid, and how they ended."""

    def __init__(self, pids: list[int]) -> None:
        self.running = set(pids)
        self.failed = False

    def reap(self, *, block: bool = False) -> None:
        """Collect the children that ended (a failure is any non-zero end)."""
        while self.running:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
            if pid == 0:
                return
            self.running.discard(pid)
            code = os.waitstatus_to_exitcode(status)
            if code not in (0, 130, -signal.SIGTERM, -signal.SIGINT):
                self.failed = True
                log_event("worker_error", error=f"serving process {pid} ended with {code}")
            if block:
                return

    def signal(self, signum: int) -> None:
        for pid in self.running:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        """SIGTERM each child, wait a bounded time, kill what remains."""
        self.signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while self.running and time.monotonic() < deadline:
            self.reap()
            time.sleep(_POLL_S)
        if self.running:
            self.signal(signal.SIGKILL)
            while self.running:
                self.reap(block=True)


def _await_ready(children: _Children, ready: int, count: int) -> bool:
    """Whether all ``count`` children announced themselves before the deadline."""
    seen = 0
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while seen < count and time.monotonic() < deadline:
        readable, _, _ = select.select([ready], [], [], _POLL_S)
        if readable:
            seen += len(os.read(ready, count))
        children.reap()
        if children.failed or len(children.running) < count:
            return False
    return seen >= count


def serve_processes(config: Config, sock: socket.socket, url: str, child: ChildMain) -> int:
    """Run ``config.workers`` children of ``child`` on ``sock`` until a signal or one
    ends; the exit status: 0 after SIGTERM, 130 after SIGINT, 1 when a child ended."""
    ready, announce = os.pipe()
    sys.stdout.flush()  # nothing buffered may be written twice, once by each child
    sys.stderr.flush()
    pids = [_fork(config, index, sock, announce, child) for index in range(config.workers)]
    os.close(announce)
    children = _Children(pids)
    stopping: list[int] = []

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        stopping.append(signum)

    previous = {
        signum: signal.signal(signum, _on_signal) for signum in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        if not _await_ready(children, ready, config.workers):
            print("the service failed to start (see the log above)", file=sys.stderr)
            children.stop()
            return 1
        # Logged before the URL is announced: whoever waits for "listening on" (the
        # suite's launcher, the tests) finds the children's pids already written.
        log_event("serving", processes=config.workers, pids=pids)
        print(f"listening on {url}", flush=True)
        while not stopping and len(children.running) == config.workers:
            children.reap()
            time.sleep(_POLL_S)
        children.stop()
        if children.failed or not stopping:
            return 1  # a child ended on its own: the others were stopped with it
        return 130 if stopping[0] == signal.SIGINT else 0
    finally:
        os.close(ready)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
