"""An unexpected exception becomes a logged 500 with a JSON body (never a bare trace)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reference.app import build_service, create_app
from reference.config import Config


async def _boom(request: Request) -> Response:
    raise RuntimeError("a bug")


def test_unexpected_exception_is_a_logged_json_500(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service = build_service(Config(db_path=tmp_path / "s.sqlite3", master_secret="x" * 64))
    app = create_app(service)
    app.router.routes.append(Route("/boom", _boom))

    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.get("/boom")

    response = asyncio.run(call())
    assert response.status_code == 500
    assert "bug in the reference" in response.json()["detail"]
    log = capsys.readouterr().err
    assert '"event":"error"' in log and "RuntimeError" in log
    assert '"path":"/boom","status":500' in log
    service.store.close()
