"""A scripted HTTP target for the reference's own tests (loopback only).

One threaded HTTP server; each path gets a script of replies (status, delay, headers) and
every arrival is captured raw (request target as sent, body bytes, headers, monotonic
arrival time taken in the handler, before the reply). Tests wait for "N arrivals on this
path within T" instead of sleeping. A reply delay is an interruptible wait, so teardown
never hangs on a handler. The webhook tests use it as their target, the netguard transport
tests to see where a pinned connection really went (Host header, request target).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        """A client that drops a kept-alive connection is normal here, not an error."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Reply:
    """One scripted reply: ``delay_s`` before answering (to exceed a timeout), then status."""

    status: int = 200
    delay_s: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Arrival:
    #: The request target as the server read it (origin-form, query included).
    path: str
    method: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.monotonic() when the request was read

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


@dataclass
class _State:
    scripts: dict[str, list[Reply]] = field(default_factory=dict)
    arrivals: list[Arrival] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Receiver:
    """Threaded HTTP server on 127.0.0.1 with per-path scripts and raw capture."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._state = _State()
        self._cond = threading.Condition()
        self._release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return  # quiet: arrivals are inspected by the tests

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                arrival = Arrival(
                    path=self.path,
                    method=self.command,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=body,
                    at=time.monotonic(),
                )
                reply = receiver._record(arrival)
                if reply.delay_s:
                    receiver._release.wait(reply.delay_s)
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers:
                        self.send_header(name, value)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:
                    pass  # the client gave up (timeout): expected in timeout tests

            do_POST = _handle
            do_GET = _handle
            do_PUT = _handle

        self._server = _QuietServer((host, port), Handler)
        self._server.daemon_threads = True
        # Do not join handler threads at close: one may sit on a keep-alive connection.
        self._server.block_on_close = False
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    def url(self, path: str) -> str:
        return f"http://{self.host}:{self.port}{path}"

    def start(self) -> Receiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def script(self, path: str, replies: Sequence[Reply]) -> None:
        """Replies for the next arrivals on ``path``; after the script: 200."""
        with self._cond:
            self._state.scripts[path] = list(replies)

    def _record(self, arrival: Arrival) -> Reply:
        with self._cond:
            self._state.arrivals.append(arrival)
            script = self._state.scripts.get(arrival.path.split("?", 1)[0], [])
            reply = script.pop(0) if script else Reply()
            self._cond.notify_all()
            return reply

    def arrivals(self, path: str | None = None) -> list[Arrival]:
        """The arrivals on ``path`` so far (every arrival, on any path, without one)."""
        with self._cond:
            return self._on(path) if path is not None else list(self._state.arrivals)

    async def arrived(self, path: str, count: int, timeout_s: float) -> list[Arrival]:
        """``wait_for`` without blocking the event loop (the service runs on it)."""
        return await anyio.to_thread.run_sync(self.wait_for, path, count, timeout_s)

    def wait_for(self, path: str, count: int, timeout_s: float) -> list[Arrival]:
        """At least ``count`` arrivals on ``path`` within ``timeout_s``, else AssertionError."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._on(path)) >= count, timeout_s):
                raise AssertionError(
                    f"expected {count} arrival(s) on {path} within {timeout_s} s, "
                    f"got {len(self._on(path))}"
                )
            return self._on(path)

    def _on(self, path: str) -> list[Arrival]:
        return [a for a in self._state.arrivals if a.path == path]
