"""Reading and writing delivery rows and attempts (the SQL lives here, nowhere else).

The delivery record shown by the list endpoints (spec §2 "Delivery record") carries the
five spec fields (event_type, outcome, status_code, target_url, attempts) plus, as
documented extensions: ``id`` (the event id, for redeliver), ``generation_id``,
``webhook_id``, ``mode`` (inline | registered | callback), ``created_at`` and
``next_attempt_at`` (ISO 8601 while a retry is scheduled, else null).

``status_code`` is the status of the latest attempt, 0 when that attempt got no HTTP
response, and 0 before the first attempt has finished (the spec types it as an integer).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

from reference.logs import log_event
from reference.netguard import mask_userinfo
from reference.store import Store

from .sender import ATTEMPT_FIELDS, AttemptResult

__all__ = [
    "DeliveryRow",
    "delivery_views",
    "due_deliveries",
    "get_delivery",
    "insert_delivery",
    "log_attempt",
    "next_due_at",
    "record_attempt",
]


@dataclass(frozen=True)
class DeliveryRow:
    """One delivery as stored (body bytes included)."""

    id: str
    generation_id: str | None
    account_id: str
    key_id: str | None
    webhook_id: str | None
    mode: str
    event_type: str
    target_url: str
    address: str
    body: bytes
    outcome: str
    status_code: int | None
    attempt_count: int
    next_attempt_at: float | None
    created_at: str

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> DeliveryRow:
        """The row of ``webhook_deliveries`` (its columns are the fields, by name)."""
        values = {f.name: row[f.name] for f in fields(cls)}
        return cls(**{**values, "body": bytes(row["body"])})


def insert_delivery(conn: sqlite3.Connection, row: DeliveryRow) -> bool:
    """Insert a new delivery; False when this generation already has one for this event.

    The unique index on (generation_id, event_type) makes a repeated final transition
    harmless: one delivery per event and target (spec §3).
    """
    cursor = conn.execute(
        """
        INSERT OR IGNORE INTO webhook_deliveries (
            id, generation_id, account_id, key_id, webhook_id, mode, event_type,
            target_url, address, body, outcome, status_code, attempt_count,
            next_attempt_at, created_at, updated_at
        ) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """,
        (
            row.id,
            row.generation_id,
            row.account_id,
            row.key_id,
            row.webhook_id,
            row.mode,
            row.event_type,
            row.target_url,
            row.address,
            row.body,
            row.outcome,
            row.status_code,
            row.attempt_count,
            row.next_attempt_at,
            row.created_at,
            row.created_at,
        ),
    )
    return cursor.rowcount == 1


def record_attempt(
    conn: sqlite3.Connection,
    delivery_id: str,
    result: AttemptResult,
    *,
    trigger: str,
    outcome: str,
    next_attempt_at: float | None,
) -> None:
    """Store one attempt and the delivery's new state, in the caller's transaction."""
    conn.execute(
        "INSERT OR REPLACE INTO webhook_attempts (delivery_id, n, at, status, ms, error, trigger)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (delivery_id, result.n, result.at, result.status, result.ms, result.error, trigger),
    )
    conn.execute(
        "UPDATE webhook_deliveries SET outcome = ?, status_code = ?, attempt_count = ?,"
        " next_attempt_at = ?, updated_at = ? WHERE id = ?",
        (
            outcome,
            result.status,
            result.n,
            next_attempt_at,
            datetime.now(UTC).isoformat(timespec="milliseconds"),
            delivery_id,
        ),
    )


def get_delivery(store: Store, delivery_id: str) -> DeliveryRow | None:
    rows = store.read("SELECT * FROM webhook_deliveries WHERE id = ?", (delivery_id,))
    return DeliveryRow.from_row(rows[0]) if rows else None


def due_deliveries(
    store: Store, now: float, exclude: Collection[str], limit: int
) -> list[DeliveryRow]:
    """Pending deliveries whose next attempt is due, oldest first, not already running."""
    if limit <= 0:
        return []
    rows = store.read(
        "SELECT * FROM webhook_deliveries WHERE outcome = 'pending_retry'"
        " AND next_attempt_at IS NOT NULL AND next_attempt_at <= ?"
        " ORDER BY next_attempt_at LIMIT ?",
        (now, limit + len(exclude)),
    )
    due = [DeliveryRow.from_row(row) for row in rows if row["id"] not in exclude]
    return due[:limit]


def next_due_at(store: Store, exclude: Collection[str]) -> float | None:
    """When the earliest pending delivery that is not running falls due (unix seconds)."""
    rows = store.read(
        "SELECT id, next_attempt_at FROM webhook_deliveries WHERE outcome = 'pending_retry'"
        " AND next_attempt_at IS NOT NULL ORDER BY next_attempt_at LIMIT ?",
        (len(exclude) + 1,),
    )
    for row in rows:
        if row["id"] not in exclude:
            value: float = row["next_attempt_at"]
            return value
    return None


def _iso(unix: float | None) -> str | None:
    if unix is None:
        return None
    return datetime.fromtimestamp(unix, UTC).isoformat(timespec="milliseconds")


def log_attempt(
    delivery_id: str,
    generation_id: str | None,
    result: AttemptResult,
    *,
    outcome: str,
    trigger: str,
) -> None:
    """The log line of one recorded attempt, automatic or manual (*trigger*), with the
    outcome it left the delivery in."""
    log_event(
        "delivery",
        delivery_id=delivery_id,
        generation_id=generation_id,
        attempt=result.n,
        status=result.status,
        ms=result.ms,
        error=result.error,
        outcome=outcome,
        trigger=trigger,
    )


def delivery_views(
    store: Store,
    where: str,
    params: Sequence[Any],
    *,
    limit: int | None = None,
    newest_first: bool = True,
) -> tuple[list[dict[str, Any]], int]:
    """Delivery records matching ``where`` (newest first, or oldest first: the choice
    ``list_order``) and the total count.

    ``total`` counts every match, not only the ``limit`` returned (spec §4 list shape).
    """
    total_rows = store.read(f"SELECT COUNT(*) AS n FROM webhook_deliveries WHERE {where}", params)  # noqa: S608 (where is built from fixed fragments)
    total = int(total_rows[0]["n"])
    order = "DESC" if newest_first else "ASC"
    sql = (
        f"SELECT * FROM webhook_deliveries WHERE {where} ORDER BY created_at {order}, rowid {order}"  # noqa: S608
    )
    query_params = list(params)
    if limit is not None:
        sql += " LIMIT ?"
        query_params.append(limit)
    rows = store.read(sql, query_params)
    if not rows:
        return [], total
    ids = [row["id"] for row in rows]
    placeholders = ",".join("?" * len(ids))
    attempt_rows = store.read(
        f"SELECT * FROM webhook_attempts WHERE delivery_id IN ({placeholders})"  # noqa: S608
        " ORDER BY delivery_id, n",
        ids,
    )
    attempts: dict[str, list[dict[str, Any]]] = {}
    for a in attempt_rows:
        attempts.setdefault(a["delivery_id"], []).append({name: a[name] for name in ATTEMPT_FIELDS})
    views = [
        {
            "id": row["id"],
            "event_type": row["event_type"],
            "outcome": row["outcome"],
            "status_code": row["status_code"] if row["status_code"] is not None else 0,
            "target_url": mask_userinfo(row["target_url"]),
            "attempts": attempts.get(row["id"], []),
            "generation_id": row["generation_id"],
            "webhook_id": row["webhook_id"],
            "mode": row["mode"],
            "created_at": row["created_at"],
            "next_attempt_at": _iso(row["next_attempt_at"])
            if row["outcome"] == "pending_retry"
            else None,
        }
        for row in rows
    ]
    return views, total
