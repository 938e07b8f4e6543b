"""Fixtures for the netguard tests: an in-memory resolver and the expanded URL vectors.

Nothing here touches the network: names resolve through a dict (the ``names`` table of
``fixtures/callback_urls.yaml``), and ``.invalid`` names never resolve.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any

import pytest

import genapi_spec
from reference.netguard import HostNotResolved, IPAddress

#: Where the tests pretend the suite's receiver listens (never contacted by these tests).
RECEIVER_HOST = "127.0.0.1"
RECEIVER_PORT = 8765
ALLOW_CIDRS = ("127.0.0.1/32",)


class DictResolver:
    """Resolves names from a mapping, case-insensitively, ignoring a trailing dot."""

    def __init__(self, names: Mapping[str, Sequence[str]]) -> None:
        self.names = {name.lower(): list(addresses) for name, addresses in names.items()}
        self.calls: list[str] = []

    async def resolve(self, host: str) -> list[IPAddress]:
        self.calls.append(host)
        addresses = self.names.get(host.rstrip(".").lower())
        if addresses is None:
            raise HostNotResolved(host, "NXDOMAIN")
        if not addresses:
            raise HostNotResolved(host, "no A or AAAA record")
        return [ipaddress.ip_address(address) for address in addresses]


@cache
def _vector_file() -> dict[str, Any]:
    data: dict[str, Any] = genapi_spec.load_fixture("callback_urls.yaml")
    return data


def vector_names() -> dict[str, list[str]]:
    """The vectors' names, plus localhost as most systems answer it (A and AAAA)."""
    data = _vector_file()
    names: dict[str, list[str]] = {name: list(v) for name, v in data["names"].items()}
    names["localhost"] = ["127.0.0.1", "::1"]
    return names


@pytest.fixture
def resolver() -> DictResolver:
    """Resolves the names of ``fixtures/callback_urls.yaml``."""
    return DictResolver(vector_names())


@pytest.fixture
def make_resolver() -> Callable[[Mapping[str, Sequence[str]]], DictResolver]:
    """Factory: a resolver over the given names."""
    return DictResolver


@pytest.fixture
def anyio_backend() -> str:
    """The reference runs on asyncio (uvicorn); test it there."""
    return "asyncio"
