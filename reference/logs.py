"""Structured logs: one JSON object per line on stderr.

One line per request (``event="request"``) and per delivery attempt (written by the
webhooks part through :func:`log_event`). Lines carry key ids, never keys, tokens or
signing secrets.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

__all__ = ["log_event"]


def log_event(event: str, **fields: Any) -> None:
    """Write one JSON log line: ``{"ts": ..., "event": event, **fields}``."""
    record = {"ts": round(time.time(), 3), "event": event, **fields}
    try:
        sys.stderr.write(json.dumps(record, default=str, separators=(",", ":")) + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        # stderr closed (e.g. the parent went away): logging must never break a request.
        pass
