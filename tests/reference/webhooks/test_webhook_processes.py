"""Deliveries when the reference serves from several processes (``serve --workers 2``).

Generations accepted by either process are finished by it and their events land in the
one store; the first process alone makes the attempts. Each delivery arrives once: nothing
lost, nothing doubled.
"""

from __future__ import annotations

import json
import time

import httpx
from running_reference import ReferenceFactory, bearer
from scripted_target import Receiver

GENERATIONS = 6
POLL_S = 0.05


def test_each_delivery_is_made_once_across_processes(
    reference_factory: ReferenceFactory, receiver: Receiver
) -> None:
    reference = reference_factory(args=["--workers", "2", "--latency-ms", "50"])
    key = reference.key("primary")
    ids = []
    for n in range(GENERATIONS):
        # A fresh connection each: the kernel hands connections to either process.
        with httpx.Client(base_url=reference.base_url, timeout=10.0, trust_env=False) as client:
            accepted = client.post(
                "/v1/images/generate",
                headers=bearer(key),
                json={"prompt": f"picture {n}", "webhook": {"url": receiver.url("/multi")}},
            )
        assert accepted.status_code == 202, accepted.text
        ids.append(accepted.json()["id"])
    arrivals = receiver.wait_for("/multi", GENERATIONS, timeout_s=20)
    client = reference.client()
    deadline = time.monotonic() + 10
    for generation_id in ids:
        while True:
            listing = client.get(
                f"/v1/generations/{generation_id}/deliveries", headers=bearer(key)
            ).json()["deliveries"]
            if [d["outcome"] for d in listing] == ["delivered"] or time.monotonic() > deadline:
                break
            time.sleep(POLL_S)  # polling interval; the deadline bounds the wait
        assert [d["outcome"] for d in listing] == ["delivered"], listing
    # Recorded delivered once each, and no attempt beyond the one per generation arrived.
    delivered = sorted(
        json.loads(a.body)["data"]["generation_id"] for a in receiver.arrivals("/multi")
    )
    assert delivered == sorted(ids), arrivals
