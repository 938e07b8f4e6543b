"""Generations with a delivery target, and the deliveries they cause: set-up for checks.

The checks of envelopes, bodies, delivery headers and signatures (spec §2 Event
envelope, §4 Target selection rules, §5.6, §6) judge what arrives at the suite's
receiver. Arriving needs a generation submitted with a target, which costs credits and
up to the profile's ``sandbox.max_generation_seconds``; so one delivery serves several
checks. :class:`EventLab` runs each :class:`Scenario` at most once per module of checks,
on first use, and keeps what arrived. Each check still judges one statement.

A scenario that does not produce its deliveries is a *setup* failure here
(:class:`SetupFailed`, reported as an error): whether events arrive at all is judged by
the checks that send the submit themselves (``test_events_*``), with :func:`target_body`
and :func:`delivery_deadline`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import httpx

import genapi_spec
from conformance.observe.receiver import Delivery, DeliveryTimeout, Endpoint, Receiver
from conformance.secrets import Redactor, Secret
from conformance.target.adapters import console_request, declared
from conformance.target.client import ApiClient, Recorder
from conformance.target.profile import CapabilityMissing, KeyProfile, Profile
from conformance.target.setup import SUBMIT_PROMPT, SetupFailed

__all__ = [
    "CANCELLED",
    "COMPLETED",
    "ENVELOPE_FIELDS",
    "FAILED",
    "FINAL_STATUSES",
    "QUIET_AFTER_SETTLED_SECONDS",
    "TARGET_KINDS",
    "EventLab",
    "Generated",
    "RegisteredWebhook",
    "Scenario",
    "SetupFailed",
    "TargetKind",
    "delete_webhook",
    "delivery_deadline",
    "event_lab",
    "event_of",
    "other_key",
    "register_webhook",
    "schema_errors",
    "signing_secret",
    "target_body",
    "wait_for_event",
    "wait_until_settled",
]

#: Event names (spec §6).
COMPLETED: Final = "generation.completed"
FAILED: Final = "generation.failed"
CANCELLED: Final = "generation.cancelled"

#: The fields of the event envelope (spec §2), the whole strict envelope (spec §4 rule 2).
ENVELOPE_FIELDS: Final = ("id", "event", "created_at", "api_version", "webhook_id", "data")

#: How a generation names its target (spec §4 rule 1): ``webhook.url`` (inline binding),
#: ``callback_url`` (legacy flat body), ``webhook.id`` (registered webhook).
TargetKind = Literal["webhook.url", "callback_url", "webhook.id"]
TARGET_KINDS: Final[tuple[TargetKind, ...]] = ("webhook.url", "callback_url", "webhook.id")

#: The per-attempt timeout (spec §6 Behaviour): a first attempt may take this long.
ATTEMPT_TIMEOUT_SECONDS: Final = 10.0
#: Backoff before the 2nd and 3rd attempts (spec §6 Behaviour).
BACKOFF_SECONDS: Final = (1.0, 2.0)


def delivery_deadline(profile: Profile, attempts: int = 1) -> float:
    """Seconds to wait for *attempts* deliveries of one event: the generation's time
    (the profile's ``max_generation_seconds``), then per attempt the 10 s timeout and the
    backoff before it (spec §6 Behaviour), plus the timing tolerance."""
    backoff = sum(BACKOFF_SECONDS[: max(0, attempts - 1)])
    return (
        profile.sandbox.max_generation_seconds
        + attempts * ATTEMPT_TIMEOUT_SECONDS
        + backoff
        + profile.timing.tolerance_seconds
    )


def target_body(
    kind: TargetKind,
    url: str,
    *,
    webhook_id: str | None = None,
    events: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    """The delivery-target part of a generation body (spec §2 binding, §4 rule 1).

    *events* goes into the binding's ``events`` field (``webhook.*`` only: a bare
    callback_url has no events field, spec §4).
    """
    if kind == "callback_url":
        if events is not None:
            raise ValueError("a callback_url has no events field (spec §4)")
        return {"callback_url": url}
    binding: dict[str, Any]
    if kind == "webhook.url":
        binding = {"url": url}
    else:
        if webhook_id is None:
            raise ValueError("a webhook.id target needs the registered webhook's id")
        binding = {"id": webhook_id}
    if events is not None:
        binding["events"] = list(events)
    return {"webhook": binding}


def signing_secret(profile: Profile, role: str) -> Secret:
    """The per-key signing secret of *role* (spec §5.6), as the console shows it.

    A profile without it cannot check signatures: a skip (CapabilityMissing), never a
    failure.
    """
    secret = profile.key(role).signing_secret
    if secret is None:
        raise CapabilityMissing(
            f"the signing secret of key role {role!r}",
            f"set keys.{role}.signing_secret to the value the console's key detail view shows",
        )
    return secret


def other_key(profile: Profile, role: str, scope: str = "images:generate") -> KeyProfile:
    """A usable key other than *role* that holds *scope* and has a signing secret;
    preferably of the same account (so "distinct per key" is not "per account")."""
    this = profile.key(role)
    candidates = [
        key
        for key in profile.keys_with_scope(scope)
        if key.role not in (role, "low-limit") and key.signing_secret is not None
    ]
    candidates.sort(key=lambda key: key.account != this.account)
    if not candidates:
        raise CapabilityMissing(
            f"a second key with {scope} and a signing secret",
            "add another [keys.*] table with that scope and its signing_secret",
        )
    return candidates[0]


# -- registered webhooks (console) -------------------------------------------------------


@dataclass(frozen=True)
class RegisteredWebhook:
    """A webhook registered through the console, with its whsec_ secret (spec §2)."""

    id: str
    secret: Secret
    session: str


def register_webhook(
    client: ApiClient,
    url: str,
    *,
    session: str = "primary",
    events: tuple[str, ...] | None = None,
) -> RegisteredWebhook:
    """Register *url* with the console (spec §4 Console endpoints: POST /api/webhooks).

    The payload is the profile's ``[adapter.create_webhook]`` declaration; by default
    ``url`` and ``events`` in, ``id`` and ``secret`` out, which the spec does not show
    (catalog HOOK-CREATE-01): an IUT that differs from its declaration fails this set-up,
    an error.
    """
    create = declared(client.profile, "create_webhook")
    response = console_request(
        client,
        "create_webhook",
        session=session,
        url=url,
        events=None if events is None else list(events),
    )
    where = f"{create.method} {create.path}"
    if not create.accepts(response.status_code):
        raise SetupFailed(
            f"setup: {where} answered {response.status_code}, expected {create.expected}: "
            f"{client.recorder.redactor.text(response.text[:200])!r}"
        )
    try:
        answer = response.json()
    except ValueError:
        answer = None
    webhook_id, secret = create.read_id(answer, "id"), create.read(answer, "secret")
    if webhook_id is None or not isinstance(secret, str):
        raise SetupFailed(
            f"setup: {where} did not answer the webhook id at {create.where('id')} and its "
            f"secret at {create.where('secret')} (HOOK-CREATE-01; the profile's "
            "[adapter.create_webhook] declares them)"
        )
    return RegisteredWebhook(webhook_id, Secret(secret), session)


def delete_webhook(client: ApiClient, webhook: RegisteredWebhook) -> None:
    """Delete a webhook this suite registered; a failure is raised (a leftover webhook
    would receive later events). Already gone (404) is fine."""
    response = console_request(client, "delete_webhook", session=webhook.session, id=webhook.id)
    delete = declared(client.profile, "delete_webhook")
    if not (delete.accepts(response.status_code) or response.status_code == 404):
        raise SetupFailed(
            f"teardown: {delete.method} {delete.path} answered {response.status_code}, "
            f"expected {delete.expected}"
        )


# -- scenarios -------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """One generation with a delivery target, described by what matters to checks.

    ``outcome`` picks the prompt: ``"completed"`` (a plain prompt), ``"failed"`` or
    ``"cancelled"`` (the profile's sandbox prompts). ``replies`` scripts the receiver
    (e.g. ``(500, 200)``: a retry); ``count`` is how many deliveries to wait for.
    """

    kind: TargetKind = "webhook.url"
    role: str = "primary"
    path: str = "/v1/images/generate"
    outcome: Literal["completed", "failed", "cancelled"] = "completed"
    events: tuple[str, ...] | None = None
    replies: tuple[int, ...] = (200,)
    count: int = 1
    query: str = ""

    @property
    def label(self) -> str:
        words = [self.kind, self.path.rsplit("/", 2)[-2], self.outcome, self.role]
        if self.events is not None:
            words.append("events=" + "+".join(self.events))
        if self.replies != (200,):
            words.append("replies=" + "+".join(map(str, self.replies)))
        return " ".join(words)


@dataclass
class Generated:
    """What a scenario gave: the submit's answer and the deliveries that arrived."""

    scenario: Scenario
    generation_id: str
    endpoint: Endpoint
    submit_status: int
    webhook: RegisteredWebhook | None = None
    deliveries: list[Delivery] = field(default_factory=list)

    @property
    def first(self) -> Delivery:
        return self.deliveries[0]

    def body(self, index: int = 0) -> Any:
        """Delivery *index*'s body parsed as JSON; a setup error if it is not JSON."""
        try:
            return self.deliveries[index].json()
        except ValueError:
            raise SetupFailed(
                f"{self.scenario.label}: the delivery body is not JSON (DLV-BODY-01): "
                f"{self.deliveries[index].raw_body[:200]!r}"
            ) from None

    def envelope(self, index: int = 0) -> dict[str, Any]:
        """Delivery *index*'s body as a JSON object; a setup error otherwise."""
        body = self.body(index)
        if not isinstance(body, dict):
            raise SetupFailed(
                f"{self.scenario.label}: the delivery body is not a JSON object (DLV-BODY-01)"
            )
        return body

    def describe(self) -> str:
        """One line for messages: the scenario and what arrived."""
        arrived = "; ".join(d.summary(self.endpoint.created_at) for d in self.deliveries)
        return f"[{self.scenario.label}: generation {self.generation_id}; {arrived}]"


class EventLab:
    """Runs scenarios once each for a module of checks and keeps what arrived.

    Set-up requests go through its own client (recorded apart from any check). Thread
    safe: a scenario runs once even if two checks ask at the same moment.
    """

    def __init__(self, client: ApiClient, receiver: Receiver, name: str) -> None:
        self.client = client
        self.profile = client.profile
        self.receiver = receiver
        self.name = name
        self._lock = threading.Lock()
        self._started: dict[Scenario, Generated | BaseException] = {}
        self._done: dict[Scenario, Generated | BaseException] = {}
        self._webhooks: list[RegisteredWebhook] = []
        self._endpoints: list[Endpoint] = []

    def prompt(self, scenario: Scenario) -> str:
        sandbox = self.profile.sandbox
        if scenario.outcome == "failed":
            return f"{SUBMIT_PROMPT} {sandbox.fail_prompt}"
        if scenario.outcome == "cancelled":
            return f"{SUBMIT_PROMPT} {sandbox.cancel_prompt}"
        return SUBMIT_PROMPT

    def start(self, *scenarios: Scenario) -> None:
        """Submit these scenarios' generations now (without waiting for deliveries), so
        that several generations run side by side."""
        for scenario in scenarios:
            with self._lock:
                if scenario in self._started:
                    continue
                try:
                    self._started[scenario] = self._submit(scenario)
                except (SetupFailed, CapabilityMissing, httpx.HTTPError) as error:
                    self._started[scenario] = error

    def _submit(self, scenario: Scenario) -> Generated:
        endpoint = self.receiver.endpoint(f"{self.name}-{len(self._endpoints)}")
        self._endpoints.append(endpoint)
        endpoint.respond_with_statuses(list(scenario.replies))
        url = endpoint.url + (f"?{scenario.query}" if scenario.query else "")
        webhook: RegisteredWebhook | None = None
        if scenario.kind == "webhook.id":
            webhook = register_webhook(self.client, url)
            self._webhooks.append(webhook)
        body: dict[str, Any] = {"prompt": self.prompt(scenario)}
        body.update(
            target_body(
                scenario.kind,
                url,
                webhook_id=webhook.id if webhook else None,
                events=scenario.events,
            )
        )
        response = self.client.request("POST", scenario.path, role=scenario.role, json=body)
        try:
            generation_id = response.json()["id"]
        except (ValueError, KeyError, TypeError):
            generation_id = None
        if response.status_code != 202 or not isinstance(generation_id, str):
            raise SetupFailed(
                f"setup ({scenario.label}): POST {scenario.path} answered "
                f"{response.status_code}, expected 202 with an id: "
                f"{self.client.recorder.redactor.text(response.text[:200])!r}"
            )
        return Generated(scenario, generation_id, endpoint, response.status_code, webhook)

    def get(self, scenario: Scenario) -> Generated:
        """The scenario's generation with its deliveries, run on first use.

        Raises :class:`SetupFailed` (an error, not a verdict) when the submit is refused
        or fewer than ``scenario.count`` deliveries arrive by the deadline.
        """
        self.start(scenario)
        with self._lock:
            done = self._done.get(scenario)
            started = self._started[scenario]
        if done is None:
            done = self._wait(scenario, started)
            with self._lock:
                done = self._done.setdefault(scenario, done)
        if isinstance(done, BaseException):
            raise done
        return done

    def _wait(
        self, scenario: Scenario, started: Generated | BaseException
    ) -> Generated | BaseException:
        if isinstance(started, BaseException):
            return started
        timeout = delivery_deadline(self.profile, scenario.count)
        try:
            started.deliveries = started.endpoint.wait_for(scenario.count, timeout)
        except DeliveryTimeout as error:
            return SetupFailed(f"setup ({scenario.label}): {error}")
        return started

    def close(self) -> None:
        """Delete registered webhooks and stop serving the endpoints."""
        try:
            for webhook in self._webhooks:
                delete_webhook(self.client, webhook)
        finally:
            for endpoint in self._endpoints:
                endpoint.close()


@contextmanager
def event_lab(
    profile: Profile, redactor: Redactor, receiver: Receiver, name: str
) -> Iterator[EventLab]:
    """An :class:`EventLab` with its own client, for a module-scoped fixture::

    @pytest.fixture(scope="module")
    def lab(profile, redactor, receiver):
        with event_lab(profile, redactor, receiver, "envelope") as made:
            yield made
    """
    client = ApiClient(profile, Recorder(redactor))
    lab = EventLab(client, receiver, name)
    try:
        yield lab
    finally:
        try:
            lab.close()
        finally:
            client.close()


def schema_errors(schema_name: str, instance: object) -> list[str]:
    """Where *instance* breaks the named JSON Schema (``genapi_spec.validator``), one line
    per error (path: message), for assertion messages."""
    validator = genapi_spec.validator(schema_name)
    return [
        f"{'/'.join(str(p) for p in error.absolute_path) or '(body)'}: {error.message}"
        for error in sorted(
            validator.iter_errors(instance), key=lambda e: [str(p) for p in e.absolute_path]
        )
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
