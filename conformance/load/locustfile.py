"""The Locust users of ``genapi-conformance load`` (run by Locust's master and workers).

Configured through the environment (set by :mod:`conformance.run.commands.load`, on each
machine from that machine's own profile, so no key travels over Locust's channel): the
base URL, the request sent, the limited key, another key and, optionally, a key whose
tier has a small daily limit, and a key whose generations are held to a small
concurrent_limit. ``LimitedKey`` users send back to back, and so does one ``DailyKey``
user on every worker when there is such a key; one ``OtherKey`` user sends at a low,
steady rate; ``ConcurrencyKey`` users submit generations and read them to their end.
Every answer is recorded (role, sent and received wall-clock times, status, rate-limit
headers) in the worker process.

The records reach the master over Locust's own channel, so a worker on another machine
is no different from a local one: when the master stops the test, each worker sends its
records in messages of at most ``CHUNK_RECORDS``, the last one marked and carrying the
worker's plan (a digest of what it was told to send, which the command compares with its
own). The master stops the test itself after ``GENAPI_LOAD_DURATION`` seconds, with a
message of its own (Locust's ``--run-time`` quits without stopping the workers first, and
its stop forgets the workers until they report ready again, so its quit would reach
none), waits a bounded time for every worker's last message and writes what arrived to
``GENAPI_LOAD_OUT``, a file on the master's machine, for the command to judge. Locust's
own failure accounting is not used: a 429 is what is being measured, not an error.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from locust import FastHttpUser, constant, constant_throughput, events, task
from locust.runners import MasterRunner, WorkerRunner

from conformance.load import CHUNK_RECORDS, HEADERS, MAX_RECORDS, RECORDS_WAIT_S, Record

_ENV = os.environ
_records: list[Record] = []
#: The JSON body of the request (the profile's rate request), if it has one.
_BODY: Any = json.loads(_ENV["GENAPI_LOAD_BODY"]) if _ENV.get("GENAPI_LOAD_BODY") else None
#: The concurrency user's generations: a harmless prompt, the final statuses of a read
#: (the event statuses of spec §3), how many reads one generation gets and their pace.
CONC_PROMPT = "conformance suite: a red square (load)"
VIDEOS_PATH = "/v1/videos/generate"
FINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})
MAX_READS = 200
READ_PAUSE_S = 0.02
#: The custom message that carries records from a worker to the master.
RECORDS_MESSAGE = "genapi_records"
#: The custom message by which the master asks its workers to stop and send their records.
STOP_MESSAGE = "genapi_stop"
#: What the master collected: the workers it started with, and per worker its records
#: count, its plan and whether its last message came.
_collected: dict[str, Any] = {"expected": [], "workers": {}, "records": []}


class _Keyed(FastHttpUser):
    abstract = True
    host = _ENV.get("GENAPI_LOAD_BASE_URL", "http://127.0.0.1")
    network_timeout = connection_timeout = 10.0
    role = ""
    secret = ""

    @task
    def request(self) -> None:
        sent = time.time()
        with self.client.request(
            _ENV.get("GENAPI_LOAD_METHOD", "GET"),
            _ENV.get("GENAPI_LOAD_PATH", "/v1/account/tier"),
            json=_BODY,
            headers={"Authorization": f"Bearer {self.secret}"},
            name=self.role,
            catch_response=True,
        ) as response:
            headers = response.headers or {}
            _record(
                Record(
                    self.role,
                    sent,
                    time.time(),
                    int(response.status_code or 0),
                    *(headers.get(name) for name in HEADERS),
                )
            )
            response.success()


class LimitedKey(_Keyed):
    wait_time = constant(0)
    role = "limited"
    secret = _ENV.get("GENAPI_LOAD_KEY", "")


class OtherKey(_Keyed):
    fixed_count = 1
    wait_time = constant_throughput(float(_ENV.get("GENAPI_LOAD_OTHER_RPS", "2")))
    role = "other"
    secret = _ENV.get("GENAPI_LOAD_OTHER_KEY", "")


class DailyKey(_Keyed):
    """The key of a small requests_per_day: one user on every worker, started by the
    worker itself (abstract, so the master never dispatches it: its dispatch gives a
    class of N fixed users to some workers twice and to others not at all)."""

    abstract = True
    wait_time = constant(0)
    role = "daily"
    secret = _ENV.get("GENAPI_LOAD_DAILY_KEY", "")


class ConcurrencyKey(FastHttpUser):
    """A user of the concurrency key (``GENAPI_LOAD_CONC_KEY``; absent: never started):
    submits a video generation (always asynchronous), then reads it until it is finished
    or the reads' bound is reached, and again. Its submits are ``conc-submit`` records;
    each accepted generation adds an ``in-flight`` record spanning the moments it was
    certainly running (from the 202's arrival to the sending of the last read that showed
    it unfinished: the read body is not shown by the spec, so only a ``status`` string
    other than a final one counts as unfinished)."""

    abstract = not _ENV.get("GENAPI_LOAD_CONC_KEY")
    fixed_count = int(_ENV.get("GENAPI_LOAD_CONC_USERS", "0") or 0)
    wait_time = constant(0)
    host = _Keyed.host
    network_timeout = connection_timeout = 10.0
    secret = _ENV.get("GENAPI_LOAD_CONC_KEY", "")

    @task
    def generate(self) -> None:
        headers = {"Authorization": f"Bearer {self.secret}"}
        sent = time.time()
        with self.client.request(
            "POST",
            VIDEOS_PATH,
            json={"prompt": CONC_PROMPT},
            headers=headers,
            name="conc-submit",
            catch_response=True,
        ) as response:
            accepted_at = time.time()
            status = int(response.status_code or 0)
            body = _json(response.text) if status == 202 else None
            response.success()
        _record(Record("conc-submit", sent, accepted_at, status, None, None, None, None))
        generation_id = body.get("id") if isinstance(body, dict) else None
        if not isinstance(generation_id, str):
            return
        unfinished_at = None
        for _ in range(MAX_READS):
            read_sent = time.time()
            with self.client.request(
                "GET",
                f"/v1/generations/{generation_id}",
                headers=headers,
                name="conc-read",
                catch_response=True,
            ) as read:
                state = _json(read.text) if read.status_code == 200 else None
                read.success()
            current = state.get("status") if isinstance(state, dict) else None
            if not isinstance(current, str) or current in FINAL_STATUSES:
                break
            unfinished_at = read_sent
            time.sleep(READ_PAUSE_S)  # patched by Locust: yields to the other users
        if unfinished_at is not None:
            _record(Record("in-flight", accepted_at, unfinished_at, 200, None, None, None, None))


def _json(text: str | None) -> Any:
    try:
        return json.loads(text or "")
    except ValueError:
        return None


def _record(record: Record) -> None:
    if len(_records) < MAX_RECORDS:
        _records.append(record)


#: The worker's own daily user, while it runs.
_daily: list[DailyKey] = []


@events.init.add_listener  # type: ignore[untyped-decorator]
def _on_init(environment: Any, **_: Any) -> None:
    if isinstance(environment.runner, MasterRunner):
        environment.runner.register_message(RECORDS_MESSAGE, _receive)
    elif isinstance(environment.runner, WorkerRunner):
        environment.runner.register_message(STOP_MESSAGE, _stop_worker)


def _stop_worker(environment: Any, **_: Any) -> None:
    for user in _daily:
        user.stop(force=True)
    _daily.clear()
    environment.runner.stop()  # fires test_stop: the records go to the master


@events.test_start.add_listener  # type: ignore[untyped-decorator]
def _on_start(environment: Any, **_: Any) -> None:
    runner = environment.runner
    if isinstance(runner, WorkerRunner) and DailyKey.secret and not _daily:
        # A group of its own: Locust counts the users of its group by dispatched class.
        _daily.append(DailyKey(environment))
        _daily[0].start(type(runner.user_greenlets)())
    if isinstance(runner, MasterRunner):
        _collected["expected"] = [node.id for node in runner.clients.all]
        # Locust patches threading into greenlets: the timer runs beside the master's own
        # (which its quit kills) and its sleeps yield to the messages coming in.
        duration = float(_ENV.get("GENAPI_LOAD_DURATION", "20"))
        timer = threading.Timer(duration, _finish, args=(environment,))
        timer.daemon = True
        timer.start()


def _receive(environment: Any, msg: Any) -> None:
    """A worker's chunk of records (the master's side); bounded per worker like its own."""
    worker = _collected["workers"].setdefault(
        msg.node_id, {"count": 0, "plan": None, "complete": False, "roles": []}
    )
    rows = msg.data.get("rows", [])[: max(0, MAX_RECORDS - worker["count"])]
    worker["count"] += len(rows)
    worker["roles"] = sorted(set(worker["roles"]) | {row[0] for row in rows})
    _collected["records"] += rows
    if msg.data.get("last"):
        worker["plan"] = msg.data.get("plan")
        worker["complete"] = True


def _finish(environment: Any) -> None:
    """Stop the workers, wait (bounded) for all their records, write them, quit.

    Not Locust's own stop: a master forgets the workers it stopped until they report
    ready again, seconds later, and its quit then reaches none of them."""
    runner = environment.runner
    runner.send_message(STOP_MESSAGE)
    deadline = time.monotonic() + RECORDS_WAIT_S
    while time.monotonic() < deadline and not all(
        _collected["workers"].get(node, {}).get("complete") for node in _collected["expected"]
    ):
        time.sleep(0.1)  # patched by Locust: yields to the messages
    Path(_ENV["GENAPI_LOAD_OUT"]).write_text(json.dumps(_collected), encoding="utf-8")
    runner.quit()


@events.test_stop.add_listener  # type: ignore[untyped-decorator]
def _send_records(environment: Any, **_: Any) -> None:
    if not isinstance(environment.runner, WorkerRunner):
        return
    # A worker stops once per test (then quits): send what it has, then forget it, so a
    # second stop sends nothing twice.
    rows = [list(record) for record in _records]
    _records.clear()
    for start in range(0, len(rows), CHUNK_RECORDS):
        environment.runner.send_message(
            RECORDS_MESSAGE, {"rows": rows[start : start + CHUNK_RECORDS]}
        )
    environment.runner.send_message(
        RECORDS_MESSAGE, {"rows": [], "last": True, "plan": _ENV.get("GENAPI_LOAD_PLAN", "")}
    )
