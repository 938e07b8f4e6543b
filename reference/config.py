"""Settings of one running reference service.

One frozen :class:`Config` is built at start-up (``python -m reference serve``) after the
listening socket is bound (so ``base_url`` is known, port 0 included) and after the store
is opened (so the master secret, kept in the database, is known). Every part of the
service (core, webhooks, netguard) reads its settings from this one object.

The test-mode settings (``allow_cidrs``, ``hosts_file``, ``dns_server``) loosen the
callback URL rules of spec §4 so that the suite's loopback receiver is reachable; they are
off by default and the service logs a loud WARNING when any is on.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reference.store import Store

__all__ = ["Config", "load_master_secret"]


@dataclass(frozen=True)
class Config:
    """Everything a running service needs to know; immutable once started."""

    db_path: Path
    host: str = "127.0.0.1"
    port: int = 0
    #: Absolute base of the service, e.g. ``http://127.0.0.1:8765``; set once bound.
    base_url: str = ""
    #: API keys look like ``<key_prefix>_<random>`` (spec §2, API key).
    key_prefix: str = "gk"
    #: How long a generation takes before it completes (sandbox contract).
    latency_ms: int = 200
    #: Test mode: CIDRs treated as public for callback targets (e.g. ``127.0.0.1/32``).
    allow_cidrs: tuple[str, ...] = ()
    #: Test mode: resolve callback hosts through this hosts file first.
    hosts_file: Path | None = None
    #: Test mode: resolve callback hosts through this DNS server (host, port).
    dns_server: tuple[str, int] | None = None
    #: Where deliveries may connect: ``"loopback"`` (default) or ``"any"`` (explicit flag).
    egress: str = "loopback"
    #: Per-attempt delivery timeout (spec §6: 10 s).
    delivery_timeout_s: float = 10.0
    #: Test mode: how late (at most) the delivery timer may fire, as real HTTP clients'
    #: timers do (see ``reference.webhooks.sender.timer_deadline``); 0 fires on time.
    delivery_timer_slack_s: float = 0.0
    #: Waits before the 2nd and 3rd attempt (spec §6: 1 s, then 2 s).
    retry_backoff_s: tuple[float, ...] = (1.0, 2.0)
    #: Attempts per delivery (spec §6: 3).
    max_attempts: int = 3
    #: Names of the injected faults (see ``reference.faults``); empty in honest mode.
    faults: frozenset[str] = frozenset()
    #: Random secret kept in the database (``load_master_secret``): per-key signing
    #: secrets, console JWTs and output names derive from it, so they survive restarts.
    master_secret: str = field(default="", repr=False)
    #: Largest request body accepted (bytes); larger bodies get 413.
    max_body_bytes: int = 1024 * 1024

    @property
    def test_mode(self) -> bool:
        """True when any setting loosens the callback rules (log a WARNING at start)."""
        return bool(self.allow_cidrs) or self.hosts_file is not None or self.dns_server is not None


def load_master_secret(store: Store) -> str:
    """Return the service's master secret, creating it on the first start.

    It lives in the ``meta`` table, so derived secrets (per-key webhook signing secrets of
    spec §5.6, console tokens) stay stable across restarts with the same database.
    """
    with store.transaction() as conn:
        conn.execute(
            "INSERT OR IGNORE INTO meta (name, value) VALUES ('master_secret', ?)",
            (secrets.token_hex(32),),
        )
        row = conn.execute("SELECT value FROM meta WHERE name = 'master_secret'").fetchone()
    value: str = row["value"]
    return value
