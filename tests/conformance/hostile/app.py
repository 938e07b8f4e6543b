"""A Generation API implementation that misbehaves on purpose, one way per mode.

The suite must survive the implementations it meets, and those are the broken ones: this
ASGI app answers every request the way its mode says, served on loopback by uvicorn in a
thread (:class:`HostileServer`). Every mode that streams is bounded on this side too (a
count of chunks, and the server's stop), so a test that fails cannot leave it running.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Final

import uvicorn

__all__ = ["MODES", "HostileServer"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: One mebibyte of a JSON string's inside: what the large modes send, chunk by chunk.
_MIB: Final = b"x" * (1024 * 1024)
#: The most chunks an endless mode sends before it gives up (bounded on this side too).
_MAX_CHUNKS: Final = 100_000


async def _start(send: Send, status: int, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})


async def _answer(
    send: Send, status: int, body: bytes, content_type: bytes, **extra: bytes
) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    headers += [(name.replace("_", "-").encode(), value) for name, value in extra.items()]
    await _start(send, status, headers)
    await send({"type": "http.response.body", "body": body})


async def _never(scope: Scope, send: Send, stop: asyncio.Event) -> None:
    """Accepts the request and never answers."""
    await stop.wait()


async def _drip(scope: Scope, send: Send, stop: asyncio.Event) -> None:
    """Answers 200 with a JSON body that arrives one byte a second."""
    await _start(send, 200, [(b"content-type", b"application/json")])
    for _ in range(_MAX_CHUNKS):
        await send({"type": "http.response.body", "body": b" ", "more_body": True})
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except TimeoutError:
            continue
        return


async def _invalid_json(scope: Scope, send: Send, stop: asyncio.Event) -> None:
    await _answer(send, 200, b'{"id": "gen_1", "status": ', b"application/json")


async def _wrong_content_type(scope: Scope, send: Send, stop: asyncio.Event) -> None:
    await _answer(send, 200, b"<html><body>It works!</body></html>", b"text/html")


async def _huge_body(scope: Scope, send: Send, stop: asyncio.Event) -> None:
    """Answers 200 with a 100 MB JSON body (its Content-Length says so)."""
    size = 100 * len(_MIB) + 2
    await _start(
        send,
        200,
        [(b"content-type", b"application/json"), (b"content-length", str(size).encode())],
    )
    await send({"type": "http.response.body", "body": b'"', "more_body": True})
    for _ in range(100):
        if stop.is_set():
            return
        await send({"type": "http.response.body", "body": _MIB, "more_body": True})
    await send({"type": "http.response.body", "body": b'"'})


async def _endless_chunked(scope: Scope, send: Send, stop: asyncio.Event) -> None:
    """Answers 200 with a chunked body (no Content-Length) that never ends."""
    await _start(send, 200, [(b"content-type", b"application/json")])
    await send({"type": "http.response.body", "body": b'"', "more_body": True})
    for _ in range(_MAX_CHUNKS):
        if stop.is_set():
            return
        await send({"type": "http.response.body", "body": _MIB, "more_body": True})


async def _server_error(scope: Scope, send: Send, stop: asyncio.Event) -> None:
    body = json.dumps({"error": {"code": "internal", "message": "boom"}}).encode()
    await _answer(send, 500, body, b"application/json")


async def _rate_limited(scope: Scope, send: Send, stop: asyncio.Event) -> None:
    body = json.dumps({"error": {"code": "rate_limited", "message": "come back tomorrow"}})
    await _answer(send, 429, body.encode(), b"application/json", retry_after=b"86400")


async def _redirect_loop(scope: Scope, send: Send, stop: asyncio.Event) -> None:
    """Answers every request with a redirect to itself."""
    location = scope["path"].encode() + (
        b"?" + scope["query_string"] if scope["query_string"] else b""
    )
    await _answer(send, 302, b"", b"text/plain", location=location)


MODES: Final[dict[str, Callable[[Scope, Send, asyncio.Event], Awaitable[None]]]] = {
    "never-answers": _never,
    "drip": _drip,
    "invalid-json": _invalid_json,
    "wrong-content-type": _wrong_content_type,
    "huge-body": _huge_body,
    "endless-chunked": _endless_chunked,
    "server-error": _server_error,
    "rate-limited-for-a-day": _rate_limited,
    "redirect-loop": _redirect_loop,
}


class HostileServer:
    """The hostile app in *mode*, on a free loopback port, in a thread (a context manager)."""

    def __init__(self, mode: str, *, startup_timeout: float = 10.0) -> None:
        self.mode = mode
        self._handler = MODES[mode]
        self._startup_timeout = startup_timeout
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        config = uvicorn.Config(
            self._app,
            host="127.0.0.1",
            port=0,
            log_level="warning",
            lifespan="off",
            interface="asgi3",
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, name=f"hostile-{mode}", daemon=True
        )

    async def _app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if self._stop is None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
        await self._handler(scope, send, self._stop)

    @property
    def base_url(self) -> str:
        (sock,) = self._server.servers[0].sockets
        host, port = sock.getsockname()[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> HostileServer:
        self._thread.start()
        deadline = time.monotonic() + self._startup_timeout
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the hostile server ({self.mode}) did not start")
            time.sleep(0.05)  # polling a flag uvicorn sets, with a deadline
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._server.should_exit = True
        self._thread.join(timeout=10.0)
