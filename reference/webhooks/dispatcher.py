"""The durable delivery dispatcher (spec §3 delivery states, §6 "Behaviour").

The database is the queue. A delivery is due when its outcome is ``pending_retry`` and
``next_attempt_at`` has passed; the dispatcher picks due rows, runs their next attempt
concurrently (bounded, so one slow target does not hold up the others), and commits each
attempt's result (and the next attempt's time, or the final outcome) before doing any
further network work for that delivery. A delivery the generation worker has just
committed is handed over (``wake(ready)``) and started at once, without reading it back;
one that finds no free slot waits in the store. Nothing else is kept in memory except
which deliveries are running and, for a minute, which attempts were recorded (so that a
read racing with a commit does not repeat an attempt), so after a restart (kill -9
included) the same query finds every delivery that still needs an attempt: one that was
in flight at the kill has its old ``attempt_count`` and is attempted again with the same
number (at-least-once, spec §6).

Timing: attempt n+1 is scheduled ``backoff[n-1]`` seconds after attempt n *ended*
(spec §6: 1 s, then 2 s), so a silent target with a 10 s timeout is retried at about
11 s and 23 s. After ``max_attempts`` failures the outcome is ``exhausted``.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from reference.aio import STOP_TIMEOUT_S, run_db, wait_event
from reference.config import Config
from reference.fault import Fault, Faults
from reference.store import Store

from .envelopes import timestamp_now
from .records import DeliveryRow, due_deliveries, log_attempt, next_due_at, record_attempt
from .sender import AttemptResult

__all__ = ["DeliveryPolicy", "Dispatcher", "delivery_policy"]

# Faults injected here (``--fault NAME``; the registry, ``reference/faults.py``, collects them).
NO_RETRY = Fault(
    "no-retry",
    "DLV-RETRY-01",
    "a failed attempt is never retried",
)
FOURTH_ATTEMPT = Fault(
    "fourth-attempt",
    "DLV-EXHAUST-01",
    "a fourth automatic attempt follows the third",
)
BACKOFF_TOO_SHORT = Fault(
    "backoff-too-short",
    "DLV-BACKOFF-01",
    "retries follow after 0.1 s instead of 1 s / 2 s",
)
TWO_ATTEMPTS = Fault(
    "two-attempts",
    "DLV-ATTEMPTS-01",
    "a failing delivery gets 2 attempts instead of 3",
)
SECOND_BACKOFF_1S = Fault(
    "second-backoff-1s",
    "DLV-BACKOFF-02",
    "the backoff before the third attempt is 1 s instead of 2 s",
)
TIMEOUT_TOO_LONG = Fault(
    "timeout-too-long",
    "DLV-TIMEOUT-01",
    "the per-attempt timeout is 20 s instead of 10 s",
)
TIMEOUT_TOO_SHORT = Fault(
    "timeout-too-short",
    "DLV-TIMEOUT-02",
    "the per-attempt timeout is 5 s instead of 10 s",
)
EXHAUSTED_RECORDED_FAILED = Fault(
    "exhausted-recorded-failed",
    "DLV-EXHAUST-02",
    "a delivery whose third attempt failed is recorded failed instead of exhausted",
)
SUCCESS_RECORDED_FAILED = Fault(
    "success-recorded-failed",
    "DLV-OK-02",
    "a delivery answered 2xx is recorded failed",
)
RETRY_AFTER_SUCCESS = Fault(
    "retry-after-success",
    "DLV-OK-01",
    "a delivery whose first attempt got a 2xx is sent once more",
)
TIMEOUT_NOT_RETRIED = Fault(
    "timeout-not-retried",
    "DLV-RETRY-02",
    "a timed-out attempt is not retried (the delivery ends exhausted)",
)


log = logging.getLogger("reference.webhooks")

#: Longest the loop sleeps without looking at the database (a safety net: wake() is the
#: normal signal, this only bounds how stale the dispatcher can get).
IDLE_POLL_S = 2.0
#: The same with several processes over one store: deliveries enqueued by the others are
#: found by polling alone.
SHARED_POLL_S = 0.2
#: How long the dispatcher remembers the attempts it recorded: longer than any read of
#: the store or hand-over can be in flight (see Dispatcher._stale).
RECORDED_MEMORY_S = 60.0
#: How long a delivery whose attempt crashed inside the service is left alone.
INTERNAL_ERROR_COOLDOWN_S = 5.0


@dataclass(frozen=True)
class DeliveryPolicy:
    """Attempts, backoff, timeout and concurrency (spec §6; faults may change them)."""

    timeout_s: float = 10.0
    #: How late the timeout may fire (test mode, like real clients' timers; 0: on time).
    timer_slack_s: float = 0.0
    backoff_s: tuple[float, ...] = (1.0, 2.0)
    max_attempts: int = 3
    concurrency: int = 32
    #: The outcome after the last failed attempt (spec §3: exhausted; a fault changes it).
    exhausted_outcome: str = "exhausted"
    #: The outcome after a 2xx (spec §3: delivered; a fault changes it).
    delivered_outcome: str = "delivered"
    #: Faults: a first 2xx is retried anyway; a timed-out attempt is not retried.
    retry_first_success: bool = False
    retry_timeouts: bool = True
    #: Whether this process makes the automatic attempts: with several processes over one
    #: store (``serve --workers``) only one does, so no delivery is attempted twice.
    dispatches: bool = True
    #: Longest the loop sleeps without looking at the store; shorter with several
    #: processes, whose commits cannot wake this one.
    idle_poll_s: float = IDLE_POLL_S

    def backoff_after(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based) before the next."""
        if not self.backoff_s:
            return 0.0
        return self.backoff_s[min(attempt - 1, len(self.backoff_s) - 1)]


def delivery_policy(config: Config, faults: Faults) -> DeliveryPolicy:
    """The configured attempts, backoff and timeout, as the active faults change them."""
    max_attempts = config.max_attempts
    backoff = tuple(config.retry_backoff_s)
    if faults.on(NO_RETRY):
        max_attempts = 1
    if faults.on(FOURTH_ATTEMPT):
        max_attempts += 1
    if faults.on(BACKOFF_TOO_SHORT):
        backoff = tuple(0.1 for _ in backoff)
    if faults.on(TWO_ATTEMPTS):
        max_attempts = 2
    if faults.on(SECOND_BACKOFF_1S):
        backoff = tuple(backoff[0] for _ in backoff)
    timeout_s = config.delivery_timeout_s
    if faults.on(TIMEOUT_TOO_LONG):
        timeout_s *= 2
    if faults.on(TIMEOUT_TOO_SHORT):
        timeout_s /= 2
    return DeliveryPolicy(
        timeout_s=timeout_s,
        timer_slack_s=config.delivery_timer_slack_s,
        backoff_s=backoff,
        max_attempts=max_attempts,
        exhausted_outcome="failed" if faults.on(EXHAUSTED_RECORDED_FAILED) else "exhausted",
        delivered_outcome="failed" if faults.on(SUCCESS_RECORDED_FAILED) else "delivered",
        retry_first_success=faults.on(RETRY_AFTER_SUCCESS),
        retry_timeouts=not faults.on(TIMEOUT_NOT_RETRIED),
        dispatches=config.process_index == 0,
        idle_poll_s=IDLE_POLL_S if config.workers == 1 else SHARED_POLL_S,
    )


SecretLookup = Callable[[DeliveryRow], str]
#: What an automatic attempt leaves to commit: delivery id, result, outcome, next attempt.
_Result = tuple[str, AttemptResult, str, float | None]


class AttemptSender(Protocol):
    """Sends one attempt of a stored delivery (``Attempts.send``)."""

    async def __call__(
        self, row: DeliveryRow, *, attempt: int, secret: str, address: str, generation_id: str
    ) -> AttemptResult: ...


class Dispatcher:
    """Runs automatic attempts for every due delivery until stopped."""

    def __init__(
        self,
        store: Store,
        policy: DeliveryPolicy,
        secret_for: SecretLookup,
        send: AttemptSender,
    ) -> None:
        self._store = store
        self._policy = policy
        self._secret_for = secret_for
        self._send = send
        self._running: dict[str, asyncio.Task[None]] = {}
        self._cooldown: dict[str, float] = {}
        #: The latest attempt this process recorded of each delivery (for a while, see
        #: _stale), and when, oldest first.
        self._recorded: dict[str, tuple[int, float]] = {}
        self._recorded_at: collections.deque[tuple[float, str]] = collections.deque()
        #: Whether due deliveries may be waiting in the store for a free slot.
        self._backlog = True
        #: Attempt results waiting for the committer, each with its attempt's future.
        self._to_commit: list[tuple[_Result, asyncio.Future[None]]] = []
        self._commit_wake = asyncio.Event()
        self._committer: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    async def start(self) -> None:
        """Start the loop; pending deliveries of a previous run are picked up at once."""
        if self._task is not None or not self._policy.dispatches:
            return
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._stopping = False
        self._to_commit = []
        self._commit_wake = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name="webhook-dispatcher")
        self._committer = asyncio.create_task(self._commit_loop(), name="webhook-commits")

    async def stop(self) -> None:
        """Stop the loop and cancel running attempts.

        A cancelled attempt has not been recorded, so it is made again after the next
        start: at-least-once, never lost.
        """
        self._stopping = True
        task, self._task = self._task, None
        committer, self._committer = self._committer, None
        pending = [t for t in [task, committer, *self._running.values()] if t is not None]
        for each in pending:
            each.cancel()
        if pending:
            _, stuck = await asyncio.wait(pending, timeout=STOP_TIMEOUT_S)
            for each in stuck:
                log.error(
                    "webhook task %s did not stop within %g s", each.get_name(), STOP_TIMEOUT_S
                )
        for each in pending:
            if each.done() and not each.cancelled() and each.exception() is not None:
                log.error("webhook task %s failed: %r", each.get_name(), each.exception())
        self._running.clear()

    def wake(self, ready: Sequence[DeliveryRow] = ()) -> None:
        """Look for due deliveries now (thread-safe; called after a commit). *ready*:
        deliveries just committed as due, started at once without a look at the store
        (the store still has them: one not started here is found by the next look)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            if ready:
                loop.call_soon_threadsafe(self._accept, tuple(ready))
            else:
                loop.call_soon_threadsafe(self._wake.set)
        except RuntimeError:  # the loop closed between the check and the call
            pass

    @property
    def running_ids(self) -> frozenset[str]:
        return frozenset(self._running)

    def _accept(self, ready: Sequence[DeliveryRow]) -> None:
        """Start the handed-over deliveries there is room for; the loop looks in the store
        for the others."""
        for row in ready:
            if self._stopping or self._stale(row) or row.id in self._cooldown:
                continue
            if len(self._running) >= self._policy.concurrency:
                self._backlog = True
                self._wake.set()
                continue
            self._start(row)

    def _start(self, row: DeliveryRow) -> None:
        self._running[row.id] = asyncio.create_task(
            self._deliver(row), name=f"webhook-delivery-{row.id}"
        )

    def _stale(self, row: DeliveryRow) -> bool:
        """Running now, or read before this process recorded its latest attempt: a look
        at the store (or a hand-over) that raced with an attempt's commit must not make
        that attempt again."""
        recorded = self._recorded.get(row.id)
        return row.id in self._running or (recorded is not None and row.attempt_count < recorded[0])

    def _remember(self, delivery_id: str, attempt: int) -> None:
        now = time.monotonic()
        self._recorded[delivery_id] = (attempt, now)
        self._recorded_at.append((now, delivery_id))
        # Forget what no read still in flight can predate (a read takes far less).
        while self._recorded_at and self._recorded_at[0][0] < now - RECORDED_MEMORY_S:
            at, old = self._recorded_at.popleft()
            if self._recorded.get(old, (0, None))[1] == at:
                del self._recorded[old]

    async def _run(self) -> None:
        while not self._stopping:
            self._wake.clear()
            now = time.time()
            self._cooldown = {k: v for k, v in self._cooldown.items() if v > now}
            busy = set(self._running) | set(self._cooldown)
            free = self._policy.concurrency - len(self._running)
            try:
                due = await run_db(due_deliveries, self._store, now, busy, free)
                # Rows beyond the free slots may wait: look again when a slot frees.
                self._backlog = free <= 0 or len(due) >= free
                for row in due:
                    if self._stale(row) or len(self._running) >= self._policy.concurrency:
                        continue
                    self._start(row)
                busy = set(self._running) | set(self._cooldown)
                next_at = await run_db(next_due_at, self._store, busy)
            except Exception:
                log.exception("webhook dispatcher could not read the delivery queue")
                next_at = None
            wait = self._policy.idle_poll_s
            if next_at is not None and len(self._running) < self._policy.concurrency:
                wait = min(max(next_at - time.time(), 0.0), wait)
            if wait > 0:
                await wait_event(self._wake, wait)

    async def _deliver(self, row: DeliveryRow) -> None:
        # Whether the loop must look at the store when this attempt is over: a retry to
        # schedule, a failure to cool down, or deliveries left waiting for a free slot.
        look_again = True
        try:
            n = row.attempt_count + 1
            try:
                secret = self._secret_for(row)
            except LookupError as missing:
                # Counted as a failed attempt (nothing sent), so the delivery still ends.
                result = AttemptResult(
                    n=n, at=timestamp_now(), status=0, ms=0, error=f"not sent: {missing}"
                )
            else:
                result = await self._send(
                    row,
                    attempt=n,
                    secret=secret,
                    address=row.address,
                    generation_id=row.generation_id or "",
                )
            # Backoff counts from the end of the failed attempt (spec §6).
            ended = time.time()
            outcome, next_at = self.next_state(result, ended)
            await self._record((row.id, result, outcome, next_at))
            self._remember(row.id, n)
            look_again = next_at is not None
            log_attempt(row.id, row.generation_id, result, outcome=outcome, trigger="automatic")
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("delivery %s: attempt could not be made or recorded", row.id)
            self._cooldown[row.id] = time.time() + INTERNAL_ERROR_COOLDOWN_S
        finally:
            self._running.pop(row.id, None)
            if look_again or self._backlog:
                self._wake.set()

    def next_state(self, result: AttemptResult, ended: float) -> tuple[str, float | None]:
        """The delivery's outcome after an automatic attempt, and its next attempt time."""
        if result.succeeded:
            if self._policy.retry_first_success and result.n == 1:
                return "pending_retry", ended + self._policy.backoff_after(result.n)
            return self._policy.delivered_outcome, None
        timed_out = (result.error or "").startswith("no response")
        if result.n >= self._policy.max_attempts or (timed_out and not self._policy.retry_timeouts):
            return self._policy.exhausted_outcome, None
        return "pending_retry", ended + self._policy.backoff_after(result.n)

    async def _record(self, item: _Result) -> None:
        """Commit an attempt's result; returns once it is in the store. The results of the
        attempts that end meanwhile share one transaction (and one worker-thread hop)."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._to_commit.append((item, done))
        self._commit_wake.set()
        await done

    async def _commit_loop(self) -> None:
        while True:
            await self._commit_wake.wait()
            self._commit_wake.clear()
            batch, self._to_commit = self._to_commit, []
            if not batch:
                continue
            try:
                errors = await run_db(self._commit_all, [item for item, _ in batch])
            except Exception as exc:  # the committer outlives any batch
                errors = [exc] * len(batch)
            for (_, done), error in zip(batch, errors, strict=True):
                if done.done():  # its attempt was cancelled (stop)
                    continue
                if error is None:
                    done.set_result(None)
                else:
                    done.set_exception(error)

    def _commit_all(self, batch: Sequence[_Result]) -> list[Exception | None]:
        """Commit every result in one transaction; if that fails, each in its own, so that
        one result that cannot be stored does not hold back the others."""
        try:
            with self._store.transaction() as conn:
                for item in batch:
                    self._commit(conn, *item)
            return [None] * len(batch)
        except Exception as exc:
            if len(batch) == 1:
                return [exc]
        errors: list[Exception | None] = []
        for item in batch:
            try:
                with self._store.transaction() as conn:
                    self._commit(conn, *item)
                errors.append(None)
            except Exception as exc:
                errors.append(exc)
        return errors

    def _commit(
        self,
        conn: sqlite3.Connection,
        delivery_id: str,
        result: AttemptResult,
        outcome: str,
        next_at: float | None,
    ) -> None:
        # Only a delivery still waiting is moved: a webhook deleted meanwhile has
        # already closed its pending deliveries, and the attempt is still recorded.
        state = conn.execute(
            "SELECT outcome FROM webhook_deliveries WHERE id = ?", (delivery_id,)
        ).fetchone()
        if state is not None and state["outcome"] != "pending_retry":
            outcome, next_at = state["outcome"], None
        record_attempt(
            conn,
            delivery_id,
            result,
            trigger="automatic",
            outcome=outcome,
            next_attempt_at=next_at,
        )
