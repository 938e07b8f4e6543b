"""Asyncio helpers shared by the generation worker and the webhook dispatcher.

Two hazards of shutting down a loop that does blocking store work, met once each:

* A cancelled ``asyncio.to_thread`` returns at once while its thread goes on using a
  SQLite connection; if the store is closed meanwhile (shutdown) the process can crash.
  :func:`run_db` waits (bounded) for the thread call to finish before re-raising.
* On Python 3.11 ``asyncio.wait_for`` can swallow a cancellation that races with the
  awaited event being set, so a ``stop()`` that cancels the loop task hangs. Callers use
  :func:`wait_event` (``asyncio.timeout``) instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["STOP_TIMEOUT_S", "run_db", "wait_event"]

T = TypeVar("T")

#: How long a cancelled caller waits for its thread call, and stop() for its tasks.
STOP_TIMEOUT_S = 5.0


async def run_db(function: Callable[..., T], *args: Any) -> T:
    """Run a blocking store call in a worker thread, and never abandon it half-way.

    On cancellation this waits (at most ``STOP_TIMEOUT_S``) for the call to finish, then
    re-raises the cancellation, so the store may be closed once the caller has unwound.
    """
    call = asyncio.ensure_future(asyncio.to_thread(function, *args))
    try:
        return await asyncio.shield(call)
    except asyncio.CancelledError:
        await asyncio.wait([call], timeout=STOP_TIMEOUT_S)
        raise


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait for ``event`` at most ``timeout_s`` seconds; True when it was set.

    ``asyncio.timeout``, not ``wait_for``: on Python 3.11 ``wait_for`` can swallow a
    cancellation that races with the event being set, and the caller's stop() would hang.
    """
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return False
    return True
