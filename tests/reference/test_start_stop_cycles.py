"""Starting and stopping the service many times, with work in flight, never hangs nor crashes.

Each cycle builds the service over the same database, runs the app's lifespan (generation
worker and webhook dispatcher), submits generations whose callback target accepts the
connection and never answers (so delivery attempts are in flight), stops while the worker
and the dispatcher are busy, then closes the store, as ``python -m reference serve`` does
at shutdown. The hazards (a cancellation swallowed by ``wait_for``; a store closed under a
thread still using it) show as a cycle missing its deadline or a crashed test process.
Afterwards nothing is lost: every generation completes and has exactly one delivery.
"""

from __future__ import annotations

import asyncio
import time
import tomllib
from pathlib import Path
from typing import Any

import httpx

from reference.app import build_service, create_app
from reference.config import Config
from reference.provision import provision

CYCLES = 30
PER_CYCLE = 3  # submitted before, and again after, an attempt is seen in flight
CYCLE_DEADLINE_S = 20.0  # generous: a healthy cycle takes a fraction of a second
DRAIN_DEADLINE_S = 30.0


class SilentTarget:
    """A loopback TCP server that accepts, reads and never answers."""

    def __init__(self) -> None:
        self.connections = 0
        self.arrived = asyncio.Event()
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/hook"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.arrived.set()
        self._writers.add(writer)
        try:
            while await reader.read(65536):
                pass
        except ConnectionError:
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()


def _config(db: Path, *, latency_ms: int) -> Config:
    return Config(
        db_path=db,
        base_url="http://test",
        master_secret="c" * 64,
        latency_ms=latency_ms,
        allow_cidrs=("127.0.0.1/32",),
    )


async def _submit(client: httpx.AsyncClient, key: str, url: str, n: int) -> None:
    for i in range(n):
        response = await client.post(
            "/v1/images/generate",
            json={"prompt": f"cycle {i}", "callback_url": url},
            headers={"Authorization": f"Bearer {key}"},
        )
        assert response.status_code == 202, response.text


async def _cycle(db: Path, profile_path: Path, target: SilentTarget, url: str) -> None:
    service = build_service(_config(db, latency_ms=0))
    try:
        if not profile_path.exists():
            provision(service, profile_path)
        profile: dict[str, Any] = tomllib.loads(profile_path.read_text(encoding="utf-8"))
        key = profile["keys"]["primary"]["key"]
        app = create_app(service)
        transport = httpx.ASGITransport(app=app)
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=transport, base_url="http://test") as client,
        ):
            seen = target.connections
            target.arrived.clear()
            await _submit(client, key, url, PER_CYCLE)
            while target.connections == seen:  # bounded by the cycle's deadline
                await target.arrived.wait()
                target.arrived.clear()
            # More work queued right before the stop: the worker is busy while it stops.
            await _submit(client, key, url, PER_CYCLE)
    finally:
        service.store.close()


async def _drain(db: Path) -> list[Any]:
    """Start once more until every generation has left the queue; their rows."""
    service = build_service(_config(db, latency_ms=0))
    try:
        app = create_app(service)
        async with app.router.lifespan_context(app):
            deadline = time.monotonic() + DRAIN_DEADLINE_S
            while service.store.read("SELECT 1 FROM generations WHERE status = 'queued'"):
                assert time.monotonic() < deadline, "generations still queued"
                await asyncio.sleep(0.05)  # polling the store, bounded by the deadline
        return service.store.read(
            "SELECT g.id, g.status, COUNT(d.id) AS deliveries FROM generations g "
            "LEFT JOIN webhook_deliveries d ON d.generation_id = g.id GROUP BY g.id"
        )
    finally:
        service.store.close()


def test_many_start_stop_cycles_with_work_in_flight(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite3"
    profile_path = tmp_path / "profile.toml"

    async def run() -> list[Any]:
        target = SilentTarget()
        url = await target.start()
        try:
            for cycle in range(CYCLES):
                started = time.monotonic()
                try:
                    async with asyncio.timeout(CYCLE_DEADLINE_S):
                        await _cycle(db, profile_path, target, url)
                except TimeoutError:
                    raise AssertionError(
                        f"cycle {cycle} missed its {CYCLE_DEADLINE_S} s deadline "
                        f"after {time.monotonic() - started:.1f} s"
                    ) from None
            assert target.connections >= CYCLES
            return await _drain(db)
        finally:
            await target.close()

    rows = asyncio.run(run())
    assert len(rows) == CYCLES * PER_CYCLE * 2
    assert {row["status"] for row in rows} == {"completed"}
    assert [row["id"] for row in rows if row["deliveries"] != 1] == []
