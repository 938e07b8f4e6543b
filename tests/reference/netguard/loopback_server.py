"""A minimal HTTP/1.1 server on 127.0.0.1 that records what reaches it (tests only).

It exists to prove where a delivery really went: the Host header and request target as
the server saw them. Replies are scripted per path; every read has a deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

READ_DEADLINE_S = 5.0


@dataclass(frozen=True)
class Seen:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    #: Seconds to wait before replying (to provoke a client timeout).
    delay_s: float = 0.0


@dataclass
class LoopbackServer:
    host: str
    port: int
    replies: dict[str, Reply] = field(default_factory=dict)
    seen: list[Seen] = field(default_factory=list)

    @property
    def authority(self) -> str:
        return f"{self.host}:{self.port}"


async def _handle(
    server: LoopbackServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_DEADLINE_S)
        lines = head.decode("latin-1").split("\r\n")
        method, target, _version = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        body = await asyncio.wait_for(reader.readexactly(length), READ_DEADLINE_S)
        server.seen.append(Seen(method, target, headers, body))
        path = target.split("?", 1)[0]
        reply = server.replies.get(path, Reply())
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        extra = "".join(f"{k}: {v}\r\n" for k, v in reply.headers.items())
        status_line = f"HTTP/1.1 {reply.status} X\r\n"
        fixed = "content-length: 0\r\nconnection: close\r\n"
        writer.write(f"{status_line}{fixed}{extra}\r\n".encode("latin-1"))
        await writer.drain()
    except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


@asynccontextmanager
async def loopback_server(host: str = "127.0.0.1") -> AsyncIterator[LoopbackServer]:
    """Serve on ``host`` (a free port) for the duration of the block."""
    state = LoopbackServer(host=host, port=0)
    server = await asyncio.start_server(lambda r, w: _handle(state, r, w), host=host, port=0)
    state.port = server.sockets[0].getsockname()[1]
    try:
        yield state
    finally:
        server.close()
        await asyncio.wait_for(server.wait_closed(), READ_DEADLINE_S)
