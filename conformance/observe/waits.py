"""Waiting on what a generation does: until it settles, until an event arrives.

Absence checks (an event that must not be sent) listen until the generation has settled
(:func:`wait_until_settled`); presence checks look for their event among the first few
arrivals (:func:`wait_for_event`), since the spec says which events are sent, not in
which order beside any others. Every wait is bounded.
"""

from __future__ import annotations

import time
from typing import Any, Final

from conformance.observe.receiver import Delivery, DeliveryTimeout, Endpoint
from conformance.target.client import ApiClient

__all__ = [
    "EVENT_SEARCH_ARRIVALS",
    "FINAL_STATUSES",
    "QUIET_AFTER_SETTLED_SECONDS",
    "event_of",
    "wait_for_event",
    "wait_until_settled",
]

#: Statuses after which a generation fires no further event (spec §3 names these three).
FINAL_STATUSES: Final = frozenset({"completed", "failed", "cancelled"})
#: How long an absence check listens once the generation has settled: the service fires
#: its event when the generation ends, and a first attempt is sent at once (spec §6).
QUIET_AFTER_SETTLED_SECONDS: Final = 3.0


def wait_until_settled(
    client: ApiClient, generation_id: str, endpoint: Endpoint, *, role: str | None = None
) -> tuple[str | None, list[Delivery]]:
    """Wait until the generation reads as finished, or anything arrives at *endpoint*.

    Polls ``GET /v1/generations/{id}`` (its ``status`` field is an interpretation,
    GEN-RECORD-01) between short waits on the endpoint, until the profile's
    ``max_generation_seconds``. Returns the final status seen (None if the record never
    showed one) and the deliveries that arrived meanwhile. Used by absence checks: an
    event that must not be sent has had its moment once the generation has settled.
    """
    profile = client.profile
    deadline = time.monotonic() + profile.sandbox.max_generation_seconds
    poll = 0.25
    while time.monotonic() < deadline:
        try:
            return None, endpoint.wait_for(1, timeout=poll)
        except DeliveryTimeout:
            pass
        response = client.request("GET", f"/v1/generations/{generation_id}", role=role)
        try:
            status = response.json().get("status")
        except (ValueError, AttributeError):
            status = None
        if status in FINAL_STATUSES:
            return str(status), endpoint.deliveries
        poll = min(poll * 2, 2.0)
    return None, endpoint.deliveries


#: How many arrivals at one endpoint are looked through for an expected event: the spec
#: says which events are sent, not in which order beside any others.
EVENT_SEARCH_ARRIVALS: Final = 3


def event_of(delivery: Delivery) -> Any:
    """The event a delivery reports: its body's ``event`` (the header is judged apart by
    the header checks), or the event header when the body is not JSON."""
    try:
        body = delivery.json()
    except ValueError:
        return delivery.header("Event")
    return body.get("event") if isinstance(body, dict) else None


def wait_for_event(endpoint: Endpoint, event: str, timeout: float) -> list[Delivery]:
    """Wait (at most *timeout* s) until a delivery of *event* is among the first
    :data:`EVENT_SEARCH_ARRIVALS` arrivals at *endpoint*; returns all arrived so far.

    Raises :class:`DeliveryTimeout` naming the events that did arrive, when none of them
    is *event* by the deadline (or within the arrivals looked through).
    """
    deadline = time.monotonic() + timeout
    arrived: list[Delivery] = []
    for count in range(1, EVENT_SEARCH_ARRIVALS + 1):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            arrived = endpoint.wait_for(count, timeout=remaining)
        except DeliveryTimeout:
            break
        if any(event_of(delivery) == event for delivery in arrived):
            return arrived
    seen = [event_of(delivery) for delivery in arrived]
    raise DeliveryTimeout(
        f"endpoint {endpoint.name!r}: expected {event} within {timeout:g} s; "
        f"events that arrived: {seen or 'none'}"
    )
