"""The webhook side's tables; the app passes ``SCHEMA_SQL`` to ``Store(extra_schema=...)``.

Durability (spec §3, §6 "at-least-once"): a delivery row is inserted in the same
transaction that finishes the generation, and every attempt's result is committed
before the next network action. A delivery whose ``outcome`` is ``pending_retry`` is
due at ``next_attempt_at`` (unix seconds, wall clock, so it survives a restart); one
whose attempt was in flight when the process died still has its old ``attempt_count``
and is attempted again with the same attempt number after the restart.
"""

from __future__ import annotations

__all__ = ["OUTCOMES", "SCHEMA_SQL"]

#: Delivery outcomes (spec §2 "Delivery record", §4 outcome filter).
OUTCOMES = ("delivered", "failed", "pending_retry", "exhausted")

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS webhooks (
    id          TEXT PRIMARY KEY,           -- wh_<hex>
    account_id  TEXT NOT NULL,
    url         TEXT NOT NULL,
    events      TEXT NOT NULL,              -- JSON array of event names
    secret      TEXT NOT NULL,              -- whsec_<...>; needed in clear to sign
    created_at  TEXT NOT NULL,
    deleted_at  TEXT                        -- soft delete: old deliveries stay readable
);
CREATE INDEX IF NOT EXISTS webhooks_by_account ON webhooks (account_id, created_at);

CREATE TABLE IF NOT EXISTS webhook_bindings (
    generation_id TEXT PRIMARY KEY,
    account_id    TEXT NOT NULL,
    key_id        TEXT NOT NULL,            -- whose per-key secret signs inline/callback
    mode          TEXT NOT NULL CHECK (mode IN ('inline', 'registered', 'callback')),
    webhook_id    TEXT,
    url           TEXT NOT NULL,
    address       TEXT NOT NULL,            -- the address validated at submit (pinned)
    events        TEXT NOT NULL,            -- JSON array of event names
    created_at    TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS webhook_deliveries (
    id              TEXT PRIMARY KEY,       -- the event id, evt_<hex>
    generation_id   TEXT,                   -- NULL for console test deliveries
    account_id      TEXT NOT NULL,
    key_id          TEXT,
    webhook_id      TEXT,
    mode            TEXT NOT NULL CHECK (mode IN ('inline', 'registered', 'callback')),
    event_type      TEXT NOT NULL,
    target_url      TEXT NOT NULL,
    address         TEXT NOT NULL,
    body            BLOB NOT NULL,          -- the exact bytes, serialized once
    outcome         TEXT NOT NULL
                    CHECK (outcome IN ('delivered', 'failed', 'pending_retry', 'exhausted')),
    status_code     INTEGER,                -- of the latest attempt; NULL before the first
    attempt_count   INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL,                   -- unix seconds; NULL when nothing is scheduled
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS webhook_deliveries_once
    ON webhook_deliveries (generation_id, event_type) WHERE generation_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS webhook_deliveries_by_webhook
    ON webhook_deliveries (webhook_id, created_at);
CREATE INDEX IF NOT EXISTS webhook_deliveries_due
    ON webhook_deliveries (outcome, next_attempt_at);

CREATE TABLE IF NOT EXISTS webhook_attempts (
    delivery_id TEXT NOT NULL REFERENCES webhook_deliveries (id),
    n           INTEGER NOT NULL,           -- 1-based, continues across redeliveries
    at          TEXT NOT NULL,              -- ISO 8601 with offset, start of the attempt
    status      INTEGER NOT NULL,           -- HTTP status; 0 when no response arrived
    ms          INTEGER NOT NULL,
    error       TEXT,
    trigger     TEXT NOT NULL CHECK (trigger IN ('automatic', 'redeliver', 'test')),
    PRIMARY KEY (delivery_id, n)
);
"""
