"""The Locust users of ``genapi-conformance load`` (run by Locust's master and workers).

Configured through the environment (set by :mod:`conformance.run.commands.load`): the
base URL, the path requested, the limited key and another key. ``LimitedKey`` users
send back to back; one ``OtherKey`` user sends at a low, steady rate. Every answer is
recorded (role, sent and received wall-clock times, status, rate-limit headers) in this
worker process and written to ``<out dir>/worker-<pid>.json`` when the test stops, for
the command to judge. Locust's own failure accounting is not used: a 429 is what is being
measured, not an error.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from locust import FastHttpUser, constant, constant_throughput, events, task
from locust.runners import MasterRunner

from conformance.load import HEADERS, MAX_RECORDS, Record

_ENV = os.environ
_records: list[Record] = []
#: The JSON body of the request (the profile's rate request), if it has one.
_BODY: Any = json.loads(_ENV["GENAPI_LOAD_BODY"]) if _ENV.get("GENAPI_LOAD_BODY") else None


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
            if len(_records) < MAX_RECORDS:
                headers = response.headers or {}
                _records.append(
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


@events.test_stop.add_listener  # type: ignore[untyped-decorator]
def _write_records(environment: Any, **_: Any) -> None:
    if isinstance(environment.runner, MasterRunner):
        return
    out = Path(_ENV["GENAPI_LOAD_OUT"]) / f"worker-{os.getpid()}.json"
    out.write_text(json.dumps([list(record) for record in _records]), encoding="utf-8")
