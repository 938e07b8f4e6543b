"""Fixtures for the webhook side's own tests (helpers live in ``webhook_harness.py``).

``service_factory`` builds started ``WebhookService`` harnesses over a fresh store in
``tmp_path`` with a test configuration: the receiver's address (127.0.0.1) allowlisted,
names resolved from a hosts file the test may rewrite (rebinding), a short delivery
timeout so timeout tests stay fast, and the spec's 1 s / 2 s backoff. ``canary`` listens
on 127.0.0.2 at the port of ``receiver`` (``tests/reference/conftest.py``), where a name
rebound away from the receiver leads. Everything else here talks to 127.0.0.1 only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from scripted_target import Receiver
from webhook_harness import (
    MASTER_SECRET,
    Harness,
    HarnessFactory,
    add_account_and_key,
)

from reference.auth import KeyContext, signing_secret_for
from reference.config import Config
from reference.fault import Faults
from reference.netguard import CallbackPolicy, HostsFileResolver
from reference.store import Store
from reference.webhooks import SCHEMA_SQL, WebhookService


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def canary(receiver: Receiver) -> Iterator[Receiver]:
    """A listener on 127.0.0.2 at the receiver's port: where a rebound name would lead."""
    target = Receiver(host="127.0.0.2", port=receiver.port).start()
    try:
        yield target
    finally:
        target.stop()


@pytest.fixture
async def service_factory(tmp_path: Path) -> AsyncIterator[HarnessFactory]:
    """Build started services; each is stopped at teardown."""
    started: list[WebhookService] = []
    stores: list[Store] = []

    async def build(
        *, faults: frozenset[str] = frozenset(), timeout_s: float = 1.0, db_name: str = "db"
    ) -> Harness:
        hosts = tmp_path / "hosts"
        if not hosts.exists():
            hosts.write_text("", encoding="utf-8")
        config = Config(
            db_path=tmp_path / f"{db_name}.sqlite",
            base_url="http://127.0.0.1:9",
            allow_cidrs=("127.0.0.1/32",),
            hosts_file=hosts,
            delivery_timeout_s=timeout_s,
            faults=faults,
            master_secret=MASTER_SECRET,
        )
        store = Store(config.db_path, extra_schema=[SCHEMA_SQL])
        stores.append(store)
        policy = CallbackPolicy(HostsFileResolver(hosts), config.allow_cidrs)
        service = WebhookService(store, config, Faults(faults), policy=policy)
        started.append(service)
        with store.transaction() as conn:
            existing = conn.execute("SELECT id FROM accounts WHERE name = 'primary'").fetchone()
            if existing is None:
                key = add_account_and_key(conn, "primary")
            else:
                row = conn.execute(
                    "SELECT id FROM api_keys WHERE account_id = ?", (existing["id"],)
                ).fetchone()
                key = KeyContext(
                    key_id=row["id"],
                    account_id=existing["id"],
                    scopes=frozenset(),
                    signing_secret=signing_secret_for(MASTER_SECRET, row["id"]),
                )
        await service.start()
        return Harness(
            service=service,
            store=store,
            config=config,
            hosts_file=hosts,
            account_id=key.account_id,
            key=key,
        )

    yield build
    for service in started:
        await service.stop()
    for store in stores:
        store.close()
