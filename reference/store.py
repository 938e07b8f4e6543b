"""The durable store: one SQLite database in WAL mode.

Everything that must survive a restart (kill -9 included) lives here: accounts, keys,
generations and their queue state, credit and request counters, and the tables other
parts add through ``extra_schema`` (the webhook deliveries). Each thread gets its own
connection (SQLite connections are not shared across threads); writers serialise through
``BEGIN IMMEDIATE`` with a busy timeout, readers never block writers in WAL mode. The same
holds between processes (``serve --workers N`` runs N over one file): every
read-modify-write is one short ``BEGIN IMMEDIATE`` transaction or one statement.

Within one process the writers also queue on a lock of the store, taken before SQLite's:
a thread waiting for SQLite's write lock polls it with sleeps of 1 to 100 ms (its busy
handler), which on the event loop's thread stalled every request; a waiter on the store's
lock runs as soon as the writer before it is done.

Checkpoints (copying the WAL back into the database file, with an fsync) are made every
``CHECKPOINT_EVERY`` commits by a thread that is not running an event loop, after its
commit and outside the write lock, instead of by whichever commit SQLite's automatic
checkpoint picks: on the event loop's thread that stalled every request for the copy.
The event loop's thread checkpoints only when no other thread has for
``LOOP_CHECKPOINT_EVERY`` commits (the WAL stays bounded when only it writes).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["CORE_SCHEMA", "Store", "StoreUnavailable"]

#: How long a writer waits for the others of its process (as SQLite's busy timeout).
WRITE_WAIT_S = 30.0
#: Commits between two checkpoints (see the module's docstring); SQLite's own default
#: is a checkpoint per 1000 WAL pages, a few hundred of this store's commits.
CHECKPOINT_EVERY = 200
#: Commits after which the event loop's thread checkpoints itself all the same.
LOOP_CHECKPOINT_EVERY = 5000

#: Tables of the service core. ``CREATE ... IF NOT EXISTS`` so a restart reuses them.
CORE_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS accounts (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    email TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    tier TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id),
    name TEXT NOT NULL,
    scopes TEXT NOT NULL,             -- JSON array of scope names
    key_hash TEXT NOT NULL UNIQUE,    -- sha256 hex of the full key; the key itself is never kept
    created_at TEXT NOT NULL,
    revoked_at TEXT,
    provisioned_role TEXT             -- profile role when created by --provision
);
CREATE INDEX IF NOT EXISTS api_keys_account ON api_keys (account_id, revoked_at);
CREATE TABLE IF NOT EXISTS generations (
    id TEXT PRIMARY KEY,
    account_id TEXT NOT NULL REFERENCES accounts (id),
    key_id TEXT NOT NULL REFERENCES api_keys (id),
    type TEXT NOT NULL,               -- image | video | audio | agent
    operation TEXT NOT NULL,          -- images.generate, images.edit, videos.generate, ...
    model TEXT NOT NULL,
    prompt TEXT NOT NULL,
    params TEXT NOT NULL,             -- JSON object of the accepted optional fields
    status TEXT NOT NULL,             -- queued | running | completed | failed | cancelled
    output_name TEXT,
    output_url TEXT,
    error_message TEXT,
    credits_used INTEGER NOT NULL,
    credits_day TEXT NOT NULL,        -- UTC day the credits were spent on (for refunds)
    due_at REAL NOT NULL,             -- unix time the work may run (submit + latency)
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    completed_at TEXT
);
CREATE INDEX IF NOT EXISTS generations_queue ON generations (status, due_at);
CREATE INDEX IF NOT EXISTS generations_account ON generations (account_id, status);
-- Output files (a few hundred bytes to a few KiB each): kept in the store so an output
-- is written in the same transaction that completes its generation.
CREATE TABLE IF NOT EXISTS outputs (
    name TEXT PRIMARY KEY,
    content_type TEXT NOT NULL,
    data BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS request_counts (
    key_id TEXT NOT NULL,
    day TEXT NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (key_id, day)
);
-- The rolling minute of each key when several processes serve this store (``serve
-- --workers``): one row per request admitted in the last minute (one process keeps them
-- in memory instead).
CREATE TABLE IF NOT EXISTS rate_window (
    counted_as TEXT NOT NULL,         -- the key id (an account id under a fault)
    at REAL NOT NULL                  -- unix time of the admission
);
CREATE INDEX IF NOT EXISTS rate_window_key ON rate_window (counted_as, at);
-- How many rows of rate_window each key has (kept in the same transactions).
CREATE TABLE IF NOT EXISTS rate_used (
    counted_as TEXT PRIMARY KEY,
    used INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS credit_days (
    account_id TEXT NOT NULL,
    day TEXT NOT NULL,
    credits INTEGER NOT NULL,
    PRIMARY KEY (account_id, day)
);
"""


def _on_event_loop() -> bool:
    """Whether this thread is running an event loop (store calls there block it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class StoreUnavailable(RuntimeError):
    """The store cannot be opened for writing (a read-only file or folder, a full disk):
    the service refuses to start rather than fail its first accepted request."""


class Store:
    """Thread-safe access to the service database.

    ``path`` must be a file (each thread opens its own connection, so ``:memory:`` would
    give each thread a different database). ``extra_schema`` holds further
    ``CREATE ... IF NOT EXISTS`` scripts (e.g. ``reference.webhooks.SCHEMA_SQL``).
    """

    def __init__(self, path: Path | str, extra_schema: Sequence[str] = ()) -> None:
        self.path = Path(path)
        self._local = threading.local()
        self._lock = threading.Lock()
        #: Held by the thread writing now (see the module's docstring).
        self._write_lock = threading.Lock()
        #: Commits through this store, and how many there had been at the last checkpoint.
        self._commits = 0
        self._checkpointed = 0
        self._connections: list[sqlite3.Connection] = []
        self._closed = False
        try:
            conn = self._connection()
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(CORE_SCHEMA)
            for script in extra_schema:
                conn.executescript(script)
            # A real write: on a read-only file the schema scripts (all IF NOT EXISTS)
            # and even BEGIN IMMEDIATE; COMMIT succeed, and the first accepted request
            # would be the one to fail.
            conn.execute(
                "INSERT OR REPLACE INTO meta (name, value) VALUES ('opened_at', ?)",
                (datetime.now(UTC).isoformat(),),
            )
        except sqlite3.Error as error:
            self.close()
            raise StoreUnavailable(
                f"cannot open the store {self.path} for writing: {error} (the file and its "
                f"folder must be writable: SQLite keeps {self.path.name}-wal and "
                f"{self.path.name}-shm next to it)"
            ) from error

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        if self._closed:
            raise RuntimeError("store is closed")
        # isolation_level=None: no implicit transactions; transaction() issues BEGIN itself.
        # check_same_thread=False only so close() may run from the shutdown thread; each
        # connection is otherwise used by the one thread that opened it.
        conn = sqlite3.connect(
            self.path, timeout=WRITE_WAIT_S, isolation_level=None, check_same_thread=False
        )
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a commit survives a process crash (kill -9); only an OS
        # crash may lose the last transactions.
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=30000")
        # Checkpoints are made by _checkpoint_if_due, not by the commit that fills the WAL.
        conn.execute("PRAGMA wal_autocheckpoint=0")
        self._local.conn = conn
        with self._lock:
            self._connections.append(conn)
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``): commit on success, rollback on error."""
        conn = self._connection()
        if conn.in_transaction:
            raise RuntimeError("nested store.transaction() on one thread")
        with self._writing():
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")
        self._checkpoint_if_due(conn)

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> int:
        """Run one write statement as its own transaction; returns the rows it changed."""
        conn = self._connection()
        if conn.in_transaction:
            raise RuntimeError("store.execute() inside store.transaction(): use the connection")
        with self._writing():
            changed = conn.execute(sql, params).rowcount
        self._checkpoint_if_due(conn)
        return changed

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """This process's turn to write; past ``WRITE_WAIT_S`` the error SQLite gives when
        its own wait runs out (the service answers 503 for it)."""
        if not self._write_lock.acquire(timeout=WRITE_WAIT_S):
            busy = sqlite3.OperationalError("database is locked (other writers of this process)")
            busy.sqlite_errorcode = sqlite3.SQLITE_BUSY
            busy.sqlite_errorname = "SQLITE_BUSY"
            raise busy
        try:
            yield
        finally:
            self._commits += 1  # counted under the lock: one writer at a time
            self._write_lock.release()

    def _checkpoint_if_due(self, conn: sqlite3.Connection) -> None:
        """Checkpoint the WAL when due for this thread (see the module's docstring)."""
        since = self._commits - self._checkpointed
        if since < CHECKPOINT_EVERY or (since < LOOP_CHECKPOINT_EVERY and _on_event_loop()):
            return
        with self._lock:
            if self._commits - self._checkpointed < CHECKPOINT_EVERY:
                return  # another thread took this one
            self._checkpointed = self._commits
        try:
            # PASSIVE: waits for no reader or writer; what it cannot copy now waits for
            # the next checkpoint.
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error:
            self._checkpointed = 0  # tried again at the next commit

    def read(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[sqlite3.Row]:
        """Run one read-only statement outside any transaction; rows are ``sqlite3.Row``."""
        rows: list[sqlite3.Row] = self._connection().execute(sql, params).fetchall()
        return rows

    def close(self) -> None:
        """Close every connection opened through this store (at shutdown)."""
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()
