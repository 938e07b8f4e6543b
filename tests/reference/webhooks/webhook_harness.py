"""Helpers for the webhook side's own tests: a service harness, schema checks, waits.

``Harness`` wraps a ``WebhookService`` over a fresh store and plays the generation core's
part (submit, finish) directly, so delivery behaviour is tested without the HTTP layer;
the HTTP layer is tested against the real reference process (``tests/reference/conftest.py``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
import referencing
from referencing.jsonschema import DRAFT202012
from scripted_target import Receiver, Reply

import genapi_spec
from reference.auth import KeyContext, signing_secret_for
from reference.config import Config
from reference.errors import ApiError
from reference.store import Store
from reference.webhooks import WebhookService

MASTER_SECRET = "m" * 64


@dataclass
class Harness:
    """A service under test plus what tests need around it."""

    service: WebhookService
    store: Store
    config: Config
    hosts_file: Path
    account_id: str
    key: KeyContext
    _counter: list[int] = field(default_factory=lambda: [0])

    def rebind(self, name: str, address: str) -> None:
        """Make ``name`` resolve to ``address`` from now on (hosts file, re-read per lookup)."""
        self.hosts_file.write_text(f"{address} {name}\n", encoding="utf-8")

    def add_generation(
        self, *, status: str = "queued", gen_type: str = "image", key: KeyContext | None = None
    ) -> str:
        """A row in the generations table (ownership checks read it)."""
        key = key or self.key
        self._counter[0] += 1
        generation_id = f"gen_{secrets.token_hex(8)}"
        with self.store.transaction() as conn:
            conn.execute(
                "INSERT INTO generations (id, account_id, key_id, type, operation, model, prompt,"
                " params, status, credits_used, credits_day, due_at, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, 'images.generate', 'img-1', 'p', '{}', ?, 5,"
                " '2026-01-01', 0, '2026-01-01T00:00:00+00:00', '2026-01-01T00:00:00+00:00')",
                (generation_id, key.account_id, key.key_id, gen_type, status),
            )
        return generation_id

    async def submit(self, body: Mapping[str, Any], key: KeyContext | None = None) -> str:
        """What the generation core does at submit: select the target, then record the binding."""
        key = key or self.key
        binding = await self.service.select_target(body, key)
        generation_id = self.add_generation(key=key)
        if binding is not None:
            with self.store.transaction() as conn:
                self.service.record_binding(conn, generation_id, binding)
        return generation_id

    async def register(self, url: str, events: list[str] | None = None) -> str:
        """Register a webhook for the harness's account; its id."""
        body: dict[str, Any] = {"url": url}
        if events is not None:
            body["events"] = events
        created = await self.service.create_webhook(self.account_id, body)
        return str(created["id"])

    async def finished(self, body: Mapping[str, Any], status: str = "completed") -> str:
        """A generation submitted with ``body`` and finished with ``status`` at once."""
        generation_id = await self.submit(body)
        self.finish(generation_id, status)
        return generation_id

    async def deliver_to(self, receiver: Receiver, path: str, replies: Sequence[Reply]) -> str:
        """A generation finished with an inline webhook on ``path`` of ``receiver``, which
        answers with ``replies`` (then 200)."""
        receiver.script(path, replies)
        return await self.finished({"webhook": {"url": receiver.url(path)}})

    def finish(self, generation_id: str, status: str = "completed") -> None:
        """What the generation core does at the end: move the generation, enqueue events;
        one commit."""
        generation = {
            "id": generation_id,
            "account_id": self.key.account_id,
            "key_id": self.key.key_id,
            "type": "image",
            "model": "img-1",
            "status": status,
            "output_url": "http://127.0.0.1:1/outputs/x.png" if status == "completed" else None,
            "error_message": None if status == "completed" else f"generation {status}",
            "credits_used": 5 if status == "completed" else 0,
        }
        with self.store.transaction() as conn:
            conn.execute("UPDATE generations SET status = ? WHERE id = ?", (status, generation_id))
            self.service.enqueue_events(conn, generation)
        self.service.wake()

    def deliveries(self, generation_id: str) -> list[dict[str, Any]]:
        listing = self.service.generation_deliveries(self.key.account_id, generation_id)
        deliveries: list[dict[str, Any]] = listing["deliveries"]
        return deliveries

    def delivery(self, generation_id: str) -> dict[str, Any]:
        """The generation's one delivery record (asserting there is exactly one)."""
        deliveries = self.deliveries(generation_id)
        assert len(deliveries) == 1, deliveries
        return deliveries[0]

    async def settled(self, generation_id: str, outcome: str, timeout_s: float) -> dict[str, Any]:
        """The generation's one delivery record, once its outcome is ``outcome`` (bounded)."""
        await wait_until(
            lambda: any(d["outcome"] == outcome for d in self.deliveries(generation_id)),
            timeout_s,
            f"delivery of {generation_id} {outcome}",
        )
        return self.delivery(generation_id)


def add_account_and_key(conn: sqlite3.Connection, account: str) -> KeyContext:
    account_id = f"acc_{account}"
    key_id = f"key_{secrets.token_hex(6)}"
    conn.execute(
        "INSERT INTO accounts (id, name, email, password_hash, tier, created_at)"
        " VALUES (?, ?, ?, 'x', 'standard', '2026-01-01T00:00:00+00:00')",
        (account_id, account, f"{account}@example.test"),
    )
    conn.execute(
        "INSERT INTO api_keys (id, account_id, name, scopes, key_hash, created_at)"
        " VALUES (?, ?, 'k', '[]', ?, '2026-01-01T00:00:00+00:00')",
        (key_id, account_id, secrets.token_hex(32)),
    )
    return KeyContext(
        key_id=key_id,
        account_id=account_id,
        scopes=frozenset(),
        signing_secret=signing_secret_for(MASTER_SECRET, key_id),
    )


HarnessFactory = Callable[..., Awaitable[Harness]]


def add_foreign_key(harness: Harness, account: str = "second") -> KeyContext:
    with harness.store.transaction() as conn:
        return add_account_and_key(conn, account)


_REGISTRY: referencing.Registry[Any] | None = None


def schema_validator(name: str) -> jsonschema.Draft202012Validator:
    """A validator for one of the spec's schemas, with every sibling schema resolvable."""
    global _REGISTRY
    if _REGISTRY is None:
        resources = []
        for schema_name in genapi_spec.schema_names():
            document = genapi_spec.schema(schema_name)
            resources.append((document["$id"], DRAFT202012.create_resource(document)))
        _REGISTRY = referencing.Registry().with_resources(resources)
    return jsonschema.Draft202012Validator(genapi_spec.schema(name), registry=_REGISTRY)


def assert_schema(name: str, instance: Any) -> None:
    errors = sorted(schema_validator(name).iter_errors(instance), key=str)
    assert not errors, f"{name}: " + "; ".join(e.message for e in errors[:5])


@contextmanager
def refused(status: int) -> Iterator[pytest.ExceptionInfo[ApiError]]:
    """Expect the block to be refused: an ``ApiError`` with this HTTP ``status``. Gives the
    caught error, for asserts on its detail."""
    with pytest.raises(ApiError) as raised:
        yield raised
    assert raised.value.status == status, f"refused with {raised.value}, not {status}"


def parse_body(raw: bytes) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(raw)
    return loaded


async def wait_until(
    predicate: Callable[[], bool], timeout_s: float, what: str, step_s: float = 0.02
) -> None:
    """Poll a condition (a committed DB state) until it holds, or fail after the deadline."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        await anyio.sleep(step_s)


async def exhausted_delivery(
    h: Harness, receiver: Receiver, path: str, url: str | None = None
) -> str:
    """The id of a delivery to *url* (default: *path* on *receiver*) whose three attempts
    were answered 500, once its outcome is ``exhausted``."""
    receiver.script(path, [Reply(500), Reply(500), Reply(500)])
    generation_id = await h.finished({"webhook": {"url": url or receiver.url(path)}})
    await receiver.arrived(path, 3, timeout_s=8)
    return str((await h.settled(generation_id, "exhausted", 5))["id"])


def verify_signature(header: str | None, secret: str, raw_body: bytes) -> int:
    """Check ``t=..,v1=..`` against HMAC-SHA256(secret, t + "." + raw body); return t."""
    assert header is not None, "no X-Service-Signature header"
    parts = dict(part.split("=", 1) for part in header.split(","))
    expected = hmac.new(
        secret.encode("utf-8"), parts["t"].encode() + b"." + raw_body, hashlib.sha256
    ).hexdigest()
    assert hmac.compare_digest(parts["v1"], expected), "signature does not verify"
    return int(parts["t"])
