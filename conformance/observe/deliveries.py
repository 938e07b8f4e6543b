"""Delivery chains and delivery records: set-up for the DLV, REC and REDLV checks.

A *chain* is one generation whose target is a receiver endpoint with scripted replies
(spec §3: retried after backoff while attempts remain; §6 Behaviour: 3 attempts, backoff
1 s then 2 s, 10 s per attempt, redirects not followed). Timing chains take up to ~35 s,
so a module submits all its chains first (:class:`Chains`, one module-scoped fixture)
and each check then judges one chain: a full run costs about the longest chain, not the
sum.

Delivery records (spec §2 Delivery record) are read with GET
/v1/generations/{id}/deliveries; a record is matched to its chain by ``target_url`` (each
endpoint has its own unguessable path) and ``event_type``. Records change after the
receiver has seen an attempt (the IUT records the reply it got), so reads poll with a
deadline (:func:`wait_for_record`).

Helpers here only set up; they raise :class:`SetupFailed` (an error, not a verdict) when
the IUT refuses the set-up. The checks send the requests they judge themselves.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import httpx

from conformance.findings import Arrival, ChainTrace, fail, trace
from conformance.observe.events import TargetKind, target_body
from conformance.observe.receiver import Delivery, DeliveryTimeout, Endpoint, Receiver, Reply
from conformance.observe.timing import ATTEMPT_TIMEOUT_SECONDS, BACKOFF_SECONDS, judge_timing
from conformance.target.client import ApiClient
from conformance.target.profile import CapabilityMissing, Profile
from conformance.target.setup import IMAGES_PATH, SUBMIT_PROMPT, SetupFailed, submit_generation
from conformance.target.webhooks import RegisteredWebhook, delete_webhook, register_webhook

__all__ = [
    "OUTCOMES",
    "RECORD_POLL_SECONDS",
    "RECORD_SETTLE_SECONDS",
    "Chain",
    "Chains",
    "arrival_gaps",
    "find_record",
    "record_of_target",
    "records_of",
    "settle_exhausted",
    "submit_with_target",
    "wait_for_record",
]

#: The delivery outcome values (spec §2 Delivery record, §4 outcome filter).
OUTCOMES: Final = ("delivered", "failed", "pending_retry", "exhausted")
#: How often a record is read again while waiting for it to change (bounded by a deadline).
RECORD_POLL_SECONDS: Final = 0.2
#: How long a record may lag behind the attempt the receiver saw (the IUT records the
#: reply after the attempt ends), before the profile's tolerance: a polling bound, not a
#: spec value (the spec does not say how soon a record shows an attempt).
RECORD_SETTLE_SECONDS: Final = 5.0


def submit_with_target(
    client: ApiClient,
    url: str,
    *,
    kind: TargetKind = "webhook.url",
    role: str = "primary",
    prompt: str = SUBMIT_PROMPT,
    path: str = IMAGES_PATH,
    webhook_id: str | None = None,
    events: tuple[str, ...] | None = None,
) -> str:
    """Submit a generation delivering to *url* (or the registered *webhook_id*, with the
    binding's *events*); its id. A refusal is a set-up error."""
    target = target_body(kind, url, webhook_id=webhook_id, events=events)
    body = {"prompt": prompt, **target}
    return submit_generation(client, path, body, role=role, context=f"{kind} {url!r}")


def records_of(client: ApiClient, generation_id: str, *, role: str = "primary") -> list[Any]:
    """The generation's delivery records (set-up read; REC checks judge the list)."""
    response = client.request("GET", f"/v1/generations/{generation_id}/deliveries", role=role)
    try:
        records = response.json().get("deliveries")
    except (ValueError, AttributeError):
        records = None
    if not 200 <= response.status_code < 300 or not isinstance(records, list):
        raise SetupFailed(
            f"setup: GET /v1/generations/{{id}}/deliveries answered {response.status_code} "
            f"without a deliveries array (REC-GEN-01, REC-LIST-01): "
            f"{client.recorder.redactor.text(response.text[:200])!r}"
        )
    return records


def find_record(
    records: Sequence[Any], target_url: str, event_type: str | None = None
) -> dict[str, Any] | None:
    """The record delivered to *target_url* (and of *event_type* when given), if any."""
    for record in records:
        if (
            isinstance(record, dict)
            and record.get("target_url") == target_url
            and (event_type is None or record.get("event_type") == event_type)
        ):
            return record
    return None


def record_of_target(records: Sequence[Any], target_url: str) -> dict[str, Any] | None:
    """The record of the delivery to *target_url*, for a generation with that one target:
    the record naming it, else the generation's only record (whatever ``target_url`` it
    shows: the record fields are judged by their own checks, not by finding the record)."""
    found = find_record(records, target_url)
    if found is None and len(records) == 1 and isinstance(records[0], dict):
        return records[0]
    return found


def wait_for_record(
    client: ApiClient,
    generation_id: str,
    target_url: str,
    until: Callable[[dict[str, Any]], bool],
    timeout: float | None = None,
    *,
    role: str = "primary",
) -> dict[str, Any] | None:
    """Read the record for *target_url* (:func:`record_of_target`) until *until* holds or
    *timeout* s pass (default :data:`RECORD_SETTLE_SECONDS` and the profile's tolerance).

    Returns the last record seen (None if there never was one); the caller judges it.
    Polling a state the IUT owns is bounded by the deadline, never an open sleep.
    """
    if timeout is None:
        timeout = RECORD_SETTLE_SECONDS + client.profile.timing.tolerance_seconds
    deadline = time.monotonic() + timeout
    pause = threading.Event()  # never set: wait() is a bounded pause between reads
    record: dict[str, Any] | None = None
    while True:
        record = record_of_target(records_of(client, generation_id, role=role), target_url)
        if record is not None and until(record):
            return record
        if time.monotonic() >= deadline:
            return record
        pause.wait(min(RECORD_POLL_SECONDS, max(0.0, deadline - time.monotonic())))


def settle_exhausted(
    client: ApiClient, generation_id: str, target_url: str, arrived: Sequence[Delivery]
) -> tuple[str, dict[str, Any]]:
    """Set-up for the redeliver checks: the delivery whose attempts *arrived* all failed,
    once its record shows ``exhausted``; its delivery id (from the attempts' delivery
    header, spec §6) and that record. Anything else is a set-up error: the retries and
    the records are judged by their own checks."""
    record = wait_for_record(
        client, generation_id, target_url, lambda r: r.get("outcome") == "exhausted"
    )
    if record is None or record.get("outcome") != "exhausted":
        raise SetupFailed(f"set-up: the delivery did not end exhausted: {record!r}")
    delivery_id = arrived[0].header("Delivery")
    if not delivery_id:
        name = arrived[0].wire.header("Delivery")
        raise SetupFailed(f"set-up: the delivery carried no {name} (DLV-HDR-03)")
    return delivery_id, record


#: Attempt numbers as messages name them (spec §3: at most three attempts).
_ORDINALS: Final = {2: "2nd", 3: "3rd"}


def arrival_gaps(deliveries: Sequence[Delivery]) -> list[float]:
    """Seconds between successive arrivals (each measured on entry to the handler)."""
    return [b.arrived_at - a.arrived_at for a, b in itertools.pairwise(deliveries)]


@dataclass
class Chain:
    """One generation delivering to one scripted endpoint, or the set-up error it met."""

    name: str
    endpoint: Endpoint
    replies: tuple[Reply, ...]
    kind: TargetKind
    tolerance: float
    max_generation_seconds: float
    generation_id: str | None = None
    error: BaseException | None = None
    webhook: RegisteredWebhook | None = None
    submitted_at: float = field(default_factory=time.monotonic)

    @property
    def url(self) -> str:
        return self.endpoint.url

    def generation(self) -> str:
        """The generation id; re-raises the set-up error if the submit failed."""
        if self.error is not None:
            raise self.error
        assert self.generation_id is not None
        return self.generation_id

    def reply(self, index: int) -> Reply:
        """The reply scripted for arrival *index* (0-based; the last repeats)."""
        return self.replies[min(index, len(self.replies) - 1)]

    def window_after_first(self, count: int) -> float:
        """How long after the first arrival arrival *count* may come: per attempt the
        scripted reply time (capped at the 10 s timeout) and the backoff (spec §6), both
        doubled, plus the tolerance and 2 s; generous, so a slow IUT fails the backoff
        checks rather than these waits, and bounded."""
        total = 0.0
        for index in range(count - 1):
            held = min(self.reply(index).delay, ATTEMPT_TIMEOUT_SECONDS)
            backoff = BACKOFF_SECONDS[min(index, len(BACKOFF_SECONDS) - 1)]
            total += 2 * (held + backoff) + self.tolerance
        return total + 2.0

    def wait_for(self, count: int, what: str, *, rule: str | None = None) -> list[Delivery]:
        """*count* arrivals (*what* they are, for the message); fewer by the deadline fails
        *rule*, by default every id the check cites (a verdict: the spec says how many
        attempts a target receives).

        Deadlines are absolute: the first arrival within the generation time plus the
        10 s timeout and the tolerance from the submit, later ones within
        :meth:`window_after_first` of the first, so checks of one chain that wait again
        after a miss do not wait again.
        """
        self.generation()
        first_by = (
            self.submitted_at
            + self.max_generation_seconds
            + ATTEMPT_TIMEOUT_SECONDS
            + self.tolerance
        )
        try:
            first = self.endpoint.wait_for(1, max(0.001, first_by - time.monotonic()))[0]
            rest_by = first.arrived_at + self.window_after_first(count)
            arrived = self.endpoint.wait_for(count, max(0.001, rest_by - time.monotonic()))
            self.trace()
            return arrived
        except DeliveryTimeout as missing:
            fail(f"{what}: {self.describe()}: {missing}", rule=rule)

    def judge_gap(self, gap: int, rule: str, profile: Profile) -> None:
        """Judge gap *gap* (1: from the 1st arrival to the 2nd) by the timing bands of
        *rule*, once the arrival that ends it came (fewer arrivals fail every cited id)."""
        arrived = self.wait_for(gap + 1, f"a {_ORDINALS[gap + 1]} attempt")
        judge_timing(rule, arrival_gaps(arrived)[gap - 1], profile, what=self.describe())

    def assert_arrivals(
        self, count: int, quiet: float, what: str, *, rule: str | None = None
    ) -> None:
        """Exactly *count* arrivals in all (*what* they are, for the message): none more
        within *quiet* s from now (a bounded window), counting also any that came before
        this check looked; else *rule* fails (by default every id the check cites)."""
        try:
            self.endpoint.assert_quiet(quiet)
        except AssertionError:
            pass  # judged below, with everything that arrived
        arrived = self.endpoint.deliveries
        self.trace()
        if len(arrived) != count:
            fail(
                f"{what}: expected exactly {count} arrival(s), saw {len(arrived)} "
                f"{self.describe()}",
                rule=rule,
            )

    def trace(self) -> None:
        """Keep what arrived so far in the running check's findings, for the report's
        timeline of this chain (:func:`conformance.findings.trace`)."""
        arrived = self.endpoint.deliveries
        if not arrived:
            return
        origin = arrived[0].arrived_at
        trace(
            ChainTrace(
                name=self.name,
                arrivals=tuple(
                    Arrival(
                        at=round(d.arrived_at - origin, 3),
                        attempt=d.header("Attempt"),
                        status=d.replied.status,
                        held=d.replied.delay,
                    )
                    for d in arrived
                ),
                timeout=ATTEMPT_TIMEOUT_SECONDS,
                backoffs=BACKOFF_SECONDS,
                tolerance=self.tolerance,
            )
        )

    def describe(self) -> str:
        """The chain and what arrived so far, for messages (and the report's timeline)."""
        self.trace()
        origin = self.endpoint.created_at
        arrived = "; ".join(d.summary(origin) for d in self.endpoint.deliveries) or "nothing"
        return f"[chain {self.name} ({self.kind}), generation {self.generation_id}: {arrived}]"


class Chains:
    """Submits chains side by side for a module and keeps them for its checks."""

    def __init__(self, client: ApiClient, receiver: Receiver, name: str) -> None:
        self.client = client
        self.profile: Profile = client.profile
        self.receiver = receiver
        self.name = name
        self._chains: dict[str, Chain] = {}
        self._others: list[Endpoint] = []
        self._webhooks: list[RegisteredWebhook] = []
        #: What a module derived once from its chains (e.g. settled records), by name.
        self.memo: dict[str, Any] = {}

    def endpoint(self, name: str) -> Endpoint:
        """A fresh endpoint that is no chain's target (e.g. a redirect's Location)."""
        made = self.receiver.endpoint(f"{self.name}-{name}")
        self._others.append(made)
        return made

    def start(
        self,
        name: str,
        replies: Sequence[Reply],
        *,
        kind: TargetKind = "webhook.url",
        role: str = "primary",
    ) -> Chain:
        """Script a fresh endpoint with *replies* (the last repeats) and submit now."""
        if name in self._chains:
            raise ValueError(f"chain {name!r} started twice")
        endpoint = self.receiver.endpoint(f"{self.name}-{name}")
        endpoint.respond_with(list(replies))
        chain = Chain(
            name,
            endpoint,
            tuple(replies),
            kind,
            self.profile.timing.tolerance_seconds,
            self.profile.sandbox.max_generation_seconds,
        )
        self._chains[name] = chain
        try:
            webhook_id = None
            if kind == "webhook.id":
                chain.webhook = register_webhook(self.client, endpoint.url)
                self._webhooks.append(chain.webhook)
                webhook_id = chain.webhook.id
            chain.generation_id = submit_with_target(
                self.client, endpoint.url, kind=kind, role=role, webhook_id=webhook_id
            )
        except (SetupFailed, CapabilityMissing, httpx.HTTPError) as error:
            chain.error = error
        return chain

    def __getitem__(self, name: str) -> Chain:
        return self._chains[name]

    def record(
        self,
        chain: Chain,
        until: Callable[[dict[str, Any]], bool] = lambda record: True,
        *,
        extra: float = 0.0,
    ) -> dict[str, Any] | None:
        """The chain's delivery record once *until* holds, or the last one read when it
        does not within :data:`RECORD_SETTLE_SECONDS`, the tolerance and *extra* s."""
        timeout = RECORD_SETTLE_SECONDS + self.profile.timing.tolerance_seconds + extra
        return wait_for_record(self.client, chain.generation(), chain.url, until, timeout)

    def assert_outcome(
        self, chain: Chain, expected: str, what: str, *, rule: str | None = None
    ) -> dict[str, Any]:
        """The chain's record, once its outcome is *expected* (*what* led there, for the
        message); any other outcome by the deadline fails *rule* (by default every id the
        check cites)."""
        record = self.record(chain, lambda r: r.get("outcome") == expected)
        if record is None or record.get("outcome") != expected:
            seen = None if record is None else record.get("outcome")
            shown = json.dumps(record)[:300]
            fail(
                f"expected outcome {expected!r} {what}, saw {seen!r} (record {shown}) "
                f"{chain.describe()}",
                rule=rule,
            )
        return record

    def close(self) -> None:
        """Stop serving the endpoints (later arrivals count as strays); surface handler
        errors."""
        try:
            for webhook in self._webhooks:
                delete_webhook(self.client, webhook)
        finally:
            endpoints = [chain.endpoint for chain in self._chains.values()] + self._others
            for endpoint in endpoints:
                endpoint.close()
            for endpoint in endpoints:
                endpoint.check()
