"""Generated bodies and Authorization headers never get a 5xx (in-process, no network).

Delivery-target fields are kept out of the generated bodies: a generated URL could name a
public host, and these tests must never make the service resolve or dial one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reference.app import Service, build_service, create_app
from reference.config import Config
from reference.provision import provision

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
FIELDS = st.sampled_from(["prompt", "size", "model", "duration", "resolution", "image", "n"])
BODIES = st.dictionaries(FIELDS | st.text(max_size=8), JSON_VALUES, max_size=6).filter(
    lambda body: not {"callback_url", "webhook"} & set(body)
)
PATHS = st.sampled_from(
    ["/v1/images/generate", "/v1/images/edit", "/v1/videos/generate", "/v1/audio/generate",
     "/v1/agents/run", "/api/keys", "/api/session"]
)  # fmt: skip


@pytest.fixture(scope="module")
def in_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, Any]]:
    directory = tmp_path_factory.mktemp("fuzz")
    config = Config(db_path=directory / "s.sqlite3", master_secret="f" * 64, base_url="http://test")
    service = build_service(config)
    profile = provision(service, directory / "profile.toml")
    app = create_app(service)
    yield service, (app, profile)
    service.store.close()


def _send(app: Any, method: str, path: str, **kwargs: Any) -> httpx.Response:
    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.request(method, path, **kwargs)

    return asyncio.run(call())


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=PATHS, body=BODIES)
def test_generated_bodies_never_get_5xx(
    in_process: tuple[Service, Any], path: str, body: dict[str, Any]
) -> None:
    _, (app, profile) = in_process
    token = profile["sessions"]["primary"]["token"] if path == "/api/keys" else (
        profile["keys"]["primary"]["key"]
    )  # fmt: skip
    response = _send(
        app, "POST", path, content=json.dumps(body), headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/json",
        },
    )  # fmt: skip
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert response.json()["detail"]


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    value=st.text(st.characters(min_codepoint=32, max_codepoint=255), max_size=300),
    path=st.sampled_from(["/v1/account/tier", "/api/keys", "/api/tier"]),
)
def test_generated_authorization_headers_never_get_5xx(
    in_process: tuple[Service, Any], value: str, path: str
) -> None:
    _, (app, _) = in_process
    header = value.strip().encode("latin-1")
    response = _send(app, "GET", path, headers={"Authorization": header})
    assert response.status_code == 401, response.text
