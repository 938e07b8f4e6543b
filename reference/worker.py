"""The durable worker queue that runs generations, and the sandbox contract.

The queue is the ``generations`` table itself: a restart (even after kill -9) reloads
every ``queued`` row and runs it (again). The transaction that moves a generation to
completed, failed or cancelled also stores its output file (table ``outputs``, served at
``GET /outputs/{name}``), refunds credits where due and lets the webhooks part enqueue
its events, so an event is never lost, nor sent for a state or an output that was rolled
back.

Sandbox contract (how failure and cancellation are driven from outside):
``[sandbox:fail]`` in the prompt fails the generation, ``[sandbox:cancel]`` cancels it;
either way the credits are refunded (spec §1, §6) and ``credits_used`` becomes 0 (or stays
the price, with the choice ``failed_credits_used``).
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import hmac
import sqlite3
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from reference import media
from reference.accounts import now_iso
from reference.aio import STOP_TIMEOUT_S, run_db, wait_event
from reference.config import Config
from reference.fault import Fault, Faults
from reference.logs import log_event
from reference.store import Store

__all__ = ["CANCEL_MARK", "FAIL_MARK", "FinishHooks", "GenerationWorker"]

FAIL_MARK = "[sandbox:fail]"
CANCEL_MARK = "[sandbox:cancel]"

# Faults injected here (``--fault NAME``; the registry, ``reference/faults.py``, collects them).
FAILURE_OUTPUT_URL_SET = Fault(
    "failure-output-url-set",
    "EVT-DATA-06",
    "a failed generation carries an output_url (and no error_message)",
)
IMAGE_RESULT_NOT_PUSHED = Fault(
    "image-result-not-pushed",
    "VER-IMAGE-01",
    "an image generation's result is never pushed to its delivery target (polling only)",
)
FAILED_NOT_REFUNDED = Fault(
    "failed-not-refunded",
    "CREDIT-REFUND-01",
    "a failed generation keeps its credits",
)


_BATCH = 64  # per worker step: bounds how long one batch runs before stop() is seen
#: How long stop() lets the batch in hand finish before cancelling the worker.
STOP_GRACE_S = 10.0


class FinishHooks(Protocol):
    """What the worker needs from the webhooks part when a generation finishes."""

    def enqueue_events(
        self, conn: sqlite3.Connection, generation: Mapping[str, Any]
    ) -> Sequence[Any]:
        """Queue a finished generation's events in ``conn``'s transaction; returns the
        deliveries queued (opaque here), handed to :meth:`wake` once committed."""
        ...

    def wake(self, ready: Sequence[Any] = ()) -> None:
        """After the commit: deliveries are due, *ready* among them."""
        ...


class GenerationWorker:
    """Runs queued generations when they fall due and records how they end."""

    def __init__(self, store: Store, config: Config, faults: Faults, hooks: FinishHooks) -> None:
        self.store = store
        self.config = config
        self.faults = faults
        self.hooks = hooks
        self._heap: list[tuple[float, str]] = []
        self._queued: set[str] = set()
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def output_name(self, generation_id: str, kind: str) -> str:
        """Unguessable, deterministic file name (a re-run after a crash overwrites it)."""
        digest = hmac.new(
            self.config.master_secret.encode(), f"output:{generation_id}".encode(), hashlib.sha256
        ).hexdigest()[:32]
        return digest + media.EXTENSIONS[kind]

    def output_url(self, name: str | None) -> str | None:
        """The absolute URL of an output file (None when there is none)."""
        return f"{self.config.base_url}/outputs/{name}" if name else None

    def schedule(self, generation_id: str, due_at: float) -> None:
        if generation_id in self._queued:
            return
        self._queued.add(generation_id)
        heapq.heappush(self._heap, (due_at, generation_id))
        self._wakeup.set()

    async def start(self) -> None:
        """Reload the durable queue (work cut short by a crash or stop runs again)."""
        with self.store.transaction() as conn:
            conn.execute("UPDATE generations SET status = 'queued' WHERE status = 'running'")
        for row in self.store.read(
            "SELECT id, due_at FROM generations WHERE status = 'queued' ORDER BY due_at"
        ):
            self.schedule(row["id"], row["due_at"])
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name="generation-worker")

    async def stop(self) -> None:
        """Finish the batch in hand, then stop; queued rows stay queued for the next start.

        Waits through ``asyncio.wait`` (which never cancels nor swallows a cancellation);
        a worker stuck past the bound is cancelled, and ``run_db`` lets its batch finish
        before it unwinds, so the store is never closed under a running batch.
        """
        self._stopping = True
        self._wakeup.set()
        task, self._task = self._task, None
        if task is None:
            return
        _, stuck = await asyncio.wait([task], timeout=STOP_GRACE_S)
        if stuck:
            task.cancel()
            _, stuck = await asyncio.wait([task], timeout=STOP_TIMEOUT_S)
            if stuck:
                log_event("worker_error", error="the generation worker did not stop")
        if task.done() and not task.cancelled() and task.exception() is not None:
            log_event("worker_error", error=repr(task.exception()))

    async def _run(self) -> None:
        while not self._stopping:
            now = time.time()
            due: list[str] = []
            while self._heap and self._heap[0][0] <= now and len(due) < _BATCH:
                _, generation_id = heapq.heappop(self._heap)
                self._queued.discard(generation_id)
                due.append(generation_id)
            if due:
                try:
                    # In a worker thread: rendering and the commit stay off the event loop.
                    await run_db(self._process, due)
                except Exception as exc:  # a bad batch must not stop the worker
                    log_event("worker_error", error=repr(exc), generations=len(due))
                    for generation_id in due:  # retry the batch shortly
                        self.schedule(generation_id, time.time() + 1.0)
                continue
            timeout = (self._heap[0][0] - now) if self._heap else 1.0
            self._wakeup.clear()
            await wait_event(self._wakeup, max(0.0, min(timeout, 1.0)))

    async def run_now(self, generation_id: str) -> None:
        """Do one generation at once, during its request (the choice image_without_target)."""
        await run_db(self._process, [generation_id])

    def _process(self, generation_ids: Sequence[str]) -> None:
        # The work happens outside any transaction; its result then lands in one
        # transaction that first claims the generation (see _finish), so a crash in
        # between leaves it queued and the next start runs it again.
        marks = ",".join("?" for _ in generation_ids)
        rows = self.store.read(
            f"SELECT * FROM generations WHERE id IN ({marks}) AND status = 'queued'",  # noqa: S608
            list(generation_ids),
        )
        outcomes = [self._run_one(row) for row in rows]
        queued: list[Any] = []
        finished: list[tuple[sqlite3.Row, str]] = []
        with self.store.transaction() as conn:
            for row, (status, output, error) in zip(rows, outcomes, strict=True):
                claimed, enqueued = self._finish(conn, row, status, output, error)
                queued.extend(enqueued)
                if claimed:
                    finished.append((row, status))
        # Handed over once committed (a commit that fails, a full disk, leaves the
        # generations queued and nothing announced), before the logs: it is the latency.
        # Nothing queued (no delivery target): nothing to wake the dispatcher for.
        if queued:
            self.hooks.wake(queued)
        for row, status in finished:
            log_event("generation", generation_id=row["id"], key_id=row["key_id"], status=status)

    def _run_one(self, row: sqlite3.Row) -> tuple[str, bytes | None, str | None]:
        """Do the work; returns (status, output file bytes, error message)."""
        prompt: str = row["prompt"]
        if CANCEL_MARK in prompt:
            if self.config.choices.cancelled_error_message == "null":
                return "cancelled", None, None
            return "cancelled", None, "cancelled: the prompt asked for it ([sandbox:cancel])"
        failing = FAIL_MARK in prompt
        if failing and not self.faults.on(FAILURE_OUTPUT_URL_SET):
            return "failed", None, "generation failed: the prompt asked for it ([sandbox:fail])"
        data = media.render(row["type"], row["id"], prompt, row["model"])
        if failing:  # fault FAILURE_OUTPUT_URL_SET: a failure that looks like a success
            return "failed", data, None
        return "completed", data, None

    def _finish(
        self,
        conn: sqlite3.Connection,
        row: sqlite3.Row,
        status: str,
        output: bytes | None,
        error: str | None,
    ) -> tuple[bool, Sequence[Any]]:
        """Record how a generation ended: whether this process claimed it (see below), and
        the deliveries its events queued."""
        price = row["credits_used"]
        refund = (
            status in ("failed", "cancelled")
            and not (status == "failed" and self.faults.on(FAILED_NOT_REFUNDED))
            and price
        )
        # The choice failed_credits_used: 0 once refunded, or the price charged.
        credits = 0 if refund and self.config.choices.failed_credits_used == "zero" else price
        name = None if output is None else self.output_name(row["id"], row["type"])
        output_url = self.output_url(name)
        stamp = now_iso()
        # The claim: only a generation still queued is finished. Inside BEGIN IMMEDIATE the
        # check and the change are one step, so when several processes serve one store
        # (each reloads the queue at its start) a generation is finished, refunded and
        # announced once.
        claimed = conn.execute(
            "UPDATE generations SET status = ?, output_name = ?, output_url = ?, "
            "error_message = ?, credits_used = ?, updated_at = ?, completed_at = ? "
            "WHERE id = ? AND status = 'queued'",
            (status, name, output_url, error, credits, stamp, stamp, row["id"]),
        ).rowcount
        if not claimed:
            return False, ()
        if output is not None:
            content_type = media.CONTENT_TYPES[media.EXTENSIONS[row["type"]]]
            conn.execute(
                "INSERT OR REPLACE INTO outputs (name, content_type, data) VALUES (?, ?, ?)",
                (name, content_type, output),
            )
        if refund:
            conn.execute(
                "UPDATE credit_days SET credits = MAX(0, credits - ?) "
                "WHERE account_id = ? AND day = ?",
                (price, row["account_id"], row["credits_day"]),
            )
        if row["type"] not in ("image", "video"):
            return True, ()
        if row["type"] == "image" and self.faults.on(IMAGE_RESULT_NOT_PUSHED):
            return True, ()
        queued = self.hooks.enqueue_events(
            conn,
            {
                "id": row["id"],
                "account_id": row["account_id"],
                "key_id": row["key_id"],
                "type": row["type"],
                "model": row["model"],
                "status": status,
                "output_url": output_url,
                "error_message": error,
                "credits_used": credits,
            },
        )
        return True, queued

    def output(self, name: str) -> tuple[bytes, str] | None:
        """The file behind ``GET /outputs/{name}`` and its content type, if it exists."""
        rows = self.store.read("SELECT content_type, data FROM outputs WHERE name = ?", (name,))
        if not rows:
            return None
        return bytes(rows[0]["data"]), rows[0]["content_type"]
