"""Fixtures for the tests of the spec artifacts (OpenAPI document, schemas, examples)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fail the test if anything resolves a name or opens a connection.

    Validating the artifacts must never fetch a ``$ref`` or an ``$id``: the schema ids
    live under the reserved ``.test`` TLD, and a tool that tried to retrieve one would
    send a DNS query off the machine. This turns such an attempt into a test failure.
    """

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"network access attempted while validating artifacts: {args[:2]}")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    yield
