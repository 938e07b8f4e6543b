"""The store: WAL mode, transactions that commit or roll back, one connection per thread."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from reference import store as store_module
from reference.config import load_master_secret
from reference.store import Store


def test_wal_mode_and_core_tables(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite3")
    assert store.read("PRAGMA journal_mode")[0][0] == "wal"
    tables = {row["name"] for row in store.read("SELECT name FROM sqlite_master")}
    assert {"accounts", "api_keys", "generations", "credit_days", "request_counts"} <= tables


def test_extra_schema_is_applied_and_reopening_is_harmless(tmp_path: Path) -> None:
    extra = "CREATE TABLE IF NOT EXISTS extra (n INTEGER);"
    Store(tmp_path / "s.sqlite3", extra_schema=[extra]).close()
    store = Store(tmp_path / "s.sqlite3", extra_schema=[extra])
    assert store.read("SELECT COUNT(*) AS n FROM extra")[0]["n"] == 0


def test_transaction_rolls_back_on_error(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite3")
    with pytest.raises(RuntimeError, match="boom"), store.transaction() as conn:
        conn.execute("INSERT INTO meta (name, value) VALUES ('a', '1')")
        raise RuntimeError("boom")
    assert store.read("SELECT * FROM meta WHERE name = 'a'") == []
    with store.transaction() as conn:
        conn.execute("INSERT INTO meta (name, value) VALUES ('a', '1')")
    assert store.read("SELECT value FROM meta WHERE name = 'a'")[0]["value"] == "1"


def test_nested_transaction_is_refused(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite3")
    with store.transaction(), pytest.raises(RuntimeError, match="nested"):
        with store.transaction():
            pass


def test_concurrent_writers_from_threads_lose_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite3")
    with store.transaction() as conn:
        conn.execute("INSERT INTO meta (name, value) VALUES ('counter', '0')")
    errors: list[BaseException] = []

    def bump() -> None:
        try:
            for _ in range(50):
                with store.transaction() as conn:
                    (value,) = conn.execute(
                        "SELECT value FROM meta WHERE name='counter'"
                    ).fetchone()
                    conn.execute(
                        "UPDATE meta SET value = ? WHERE name = 'counter'", (str(int(value) + 1),)
                    )
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert store.read("SELECT value FROM meta WHERE name='counter'")[0]["value"] == "200"
    store.close()


def test_master_secret_is_created_once_and_kept(tmp_path: Path) -> None:
    first = load_master_secret(Store(tmp_path / "s.sqlite3"))
    again = load_master_secret(Store(tmp_path / "s.sqlite3"))
    assert first == again and len(first) == 64
    assert load_master_secret(Store(tmp_path / "other.sqlite3")) != first


def test_closed_store_refuses_new_connections(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite3")
    store.close()
    result: list[BaseException] = []

    def use() -> None:
        try:
            store.read("SELECT 1")
        except RuntimeError as exc:
            result.append(exc)

    thread = threading.Thread(target=use)
    thread.start()
    thread.join(timeout=10)
    assert result and "closed" in str(result[0])


def test_execute_is_one_write_and_refuses_inside_a_transaction(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite3")
    assert store.execute("INSERT INTO meta (name, value) VALUES ('x', '1')") == 1
    assert store.execute("UPDATE meta SET value = '2' WHERE name = 'nobody'") == 0
    with store.transaction(), pytest.raises(RuntimeError, match="inside"):
        store.execute("DELETE FROM meta")
    assert store.read("SELECT value FROM meta WHERE name = 'x'")[0]["value"] == "1"


def test_a_writer_waits_for_the_writer_of_another_thread_then_gives_sqlites_busy_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writers of one process queue on the store's own lock (not SQLite's sleeping busy
    handler): the second writes as soon as the first commits, and one that cannot get its
    turn within the wait gets the error SQLite gives when its busy timeout runs out (which
    the service answers with a 503)."""
    monkeypatch.setattr(store_module, "WRITE_WAIT_S", 0.2)
    store = Store(tmp_path / "s.sqlite3")
    holding, release = threading.Event(), threading.Event()
    outcome: list[BaseException | int] = []

    def first() -> None:
        with store.transaction() as conn:
            conn.execute("INSERT INTO meta (name, value) VALUES ('first', '1')")
            holding.set()
            release.wait(timeout=10)

    def second() -> None:
        try:
            outcome.append(store.execute("INSERT INTO meta (name, value) VALUES ('second', '2')"))
        except sqlite3.OperationalError as exc:
            outcome.append(exc)

    writer = threading.Thread(target=first)
    writer.start()
    assert holding.wait(timeout=10)
    late = threading.Thread(target=second)
    late.start()
    late.join(timeout=10)
    (refused,) = outcome
    assert isinstance(refused, sqlite3.OperationalError)
    assert refused.sqlite_errorcode == sqlite3.SQLITE_BUSY
    # Once the first writer is done, the lock is free again: a writer goes straight in.
    monkeypatch.setattr(store_module, "WRITE_WAIT_S", 10.0)
    outcome.clear()
    late = threading.Thread(target=second)
    late.start()
    release.set()
    writer.join(timeout=10)
    late.join(timeout=10)
    assert outcome == [1]
    names = {row["name"] for row in store.read("SELECT name FROM meta")}
    assert {"first", "second"} <= names
    store.close()


def test_checkpoints_are_made_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A thread without an event loop checkpoints the WAL every CHECKPOINT_EVERY commits
    (the WAL then starts over and stays small); the event loop's thread leaves them to
    the others until LOOP_CHECKPOINT_EVERY (its WAL grows meanwhile)."""
    monkeypatch.setattr(store_module, "CHECKPOINT_EVERY", 10)
    monkeypatch.setattr(store_module, "LOOP_CHECKPOINT_EVERY", 1_000_000)

    def write(store: Store, commits: int) -> None:
        for n in range(commits):
            with store.transaction() as conn:
                conn.execute(
                    "INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)",
                    (f"row {n}", "x" * 2000),
                )

    def wal_bytes(path: Path) -> int:
        return Path(f"{path}-wal").stat().st_size

    off_loop = Store(tmp_path / "off.sqlite3")
    write(off_loop, 300)
    on_loop = Store(tmp_path / "on.sqlite3")

    async def on_the_loop() -> None:
        write(on_loop, 300)

    asyncio.run(on_the_loop())
    # 300 commits of a page or more each: over 1 MB of WAL unless it was checkpointed.
    assert wal_bytes(tmp_path / "off.sqlite3") < 300_000
    assert wal_bytes(tmp_path / "on.sqlite3") > 1_000_000
    off_loop.close()
    on_loop.close()
