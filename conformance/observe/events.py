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

import json
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import httpx

from conformance.findings import fail
from conformance.observe.receiver import Delivery, DeliveryTimeout, Endpoint, Receiver
from conformance.observe.timing import delivery_deadline
from conformance.secrets import Secret
from conformance.target.client import ApiClient
from conformance.target.profile import CHAIN_ROLES, CapabilityMissing, KeyProfile, Profile
from conformance.target.setup import (
    IMAGES_PATH,
    GenerationOutcome,
    SetupFailed,
    outcome_prompt,
    submit_generation,
)
from conformance.target.webhooks import RegisteredWebhook, delete_webhook, register_webhook

__all__ = [
    "CANCELLED",
    "COMPLETED",
    "ENVELOPE_FIELDS",
    "FAILED",
    "FINAL_EVENTS",
    "MAX_LOGGED_EVENTS",
    "SAME_PRESENCE",
    "SAME_VALUE",
    "TARGET_KINDS",
    "Disagreement",
    "EventLab",
    "FinalEvent",
    "FinalEventLog",
    "Generated",
    "Scenario",
    "TargetKind",
    "disagreements",
    "final_event",
    "final_state",
    "foreign_key",
    "other_key",
    "per_key_label",
    "per_key_secrets",
    "read_final_events",
    "signing_secret",
    "target_body",
]

#: Event names (spec §6).
COMPLETED: Final = "generation.completed"
FAILED: Final = "generation.failed"
CANCELLED: Final = "generation.cancelled"
#: The events that tell a generation's final state (spec §3: completed, failed, cancelled).
FINAL_EVENTS: Final = frozenset({COMPLETED, FAILED, CANCELLED})

#: The fields of the event envelope (spec §2), the whole strict envelope (spec §4 rule 2).
ENVELOPE_FIELDS: Final = ("id", "event", "created_at", "api_version", "webhook_id", "data")

#: How a generation names its target (spec §4 rule 1): ``webhook.url`` (inline binding),
#: ``callback_url`` (legacy flat body), ``webhook.id`` (registered webhook).
TargetKind = Literal["webhook.url", "callback_url", "webhook.id"]
TARGET_KINDS: Final[tuple[TargetKind, ...]] = ("webhook.url", "callback_url", "webhook.id")


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


def per_key_label(role: str) -> str:
    """How messages name the per-key signing secret of *role*."""
    return f"the per-key secret of key role {role!r}"


def per_key_secrets(profile: Profile, *, but: str | None = None) -> dict[str, Secret]:
    """The per-key signing secrets the profile gives, by label, of every key role but
    *but*: what explains a delivery signed with another key's secret."""
    return {
        per_key_label(role): key.signing_secret
        for role, key in profile.keys.items()
        if role != but and key.signing_secret is not None
    }


def foreign_key(profile: Profile, role: str = "primary") -> KeyProfile:
    """A usable key of another account than *role*'s (the cross-account checks), none
    a chain exhausts; a profile without one cannot run them: a skip (CapabilityMissing),
    never a failure."""
    home = profile.key(role).account
    for key in profile.keys.values():
        if key.account != home and not key.revoked and key.role not in CHAIN_ROLES:
            return key
    raise CapabilityMissing(
        "a key of a second account", "add a [keys.foreign] table with another account"
    )


def other_key(profile: Profile, role: str, scope: str = "images:generate") -> KeyProfile:
    """A usable key other than *role*, none a chain exhausts, that holds *scope* and has
    a signing secret; preferably of the same account (so "distinct per key" is not "per
    account")."""
    this = profile.key(role)
    candidates = [
        key
        for key in profile.keys_with_scope(scope)
        if key.role != role and key.role not in CHAIN_ROLES and key.signing_secret is not None
    ]
    candidates.sort(key=lambda key: key.account != this.account)
    if not candidates:
        raise CapabilityMissing(
            f"a second key with {scope} and a signing secret",
            "add another [keys.*] table with that scope and its signing_secret",
        )
    return candidates[0]


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
    path: str = IMAGES_PATH
    outcome: GenerationOutcome = "completed"
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
    """What a scenario gave: the accepted generation and the deliveries that arrived."""

    scenario: Scenario
    generation_id: str
    endpoint: Endpoint
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

    def field(self, path: str) -> Any:
        """The value at *path* (``"created_at"``, ``"data.status"``) in the first
        delivery's envelope. A field missing on the way, or a value on the way that is no
        JSON object, fails the check's cited rule: the rule states the field."""
        value: Any = self.envelope()
        walked: list[str] = []
        for name in path.split("."):
            where = ".".join(walked) or "the envelope"
            if not isinstance(value, dict):
                fail(
                    f"expected {where} to be a JSON object holding {name}, saw "
                    f"{value!r:.200} {self.describe()}"
                )
            if name not in value:
                fail(
                    f"expected {where} to carry {name!r}, saw the fields {sorted(value)} "
                    f"{self.describe()}"
                )
            walked.append(name)
            value = value[name]
        return value

    def expect(self, path: str, holds: Callable[[Any], bool], wanted: str) -> Any:
        """The value at *path* (:meth:`field`) when *holds* is true of it; else the check's
        cited rule fails, saying what was *wanted* (``"'completed'"``, ``"a string"``)."""
        value = self.field(path)
        if not holds(value):
            fail(f"expected {path} {wanted}, saw {value!r:.200} {self.describe()}")
        return value

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
        target = target_body(
            scenario.kind, url, webhook_id=webhook.id if webhook else None, events=scenario.events
        )
        body = {"prompt": outcome_prompt(self.profile, scenario.outcome), **target}
        generation_id = submit_generation(
            self.client, scenario.path, body, role=scenario.role, context=scenario.label
        )
        return Generated(scenario, generation_id, endpoint, webhook)

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


# -- the two channels of a result (GEN-CONSIST-01) --------------------------------------

#: The event data fields the read must show with the same value, and those it must show
#: set or unset alike (spec §2: output_url null on failure, error_message null on success).
SAME_VALUE: Final = ("status", "credits_used")
SAME_PRESENCE: Final = ("output_url", "error_message")
#: The most final events one process logs for the run-wide comparison: far above a full
#: run's generations, small enough that a flooding target cannot fill the disk.
MAX_LOGGED_EVENTS: Final = 5000


def _present(value: object) -> bool:
    return value is not None and value != ""


def final_state(data: Mapping[str, Any]) -> dict[str, Any]:
    """What the two channels must agree on, from event data or a read record: the
    :data:`SAME_VALUE` fields' values and whether each :data:`SAME_PRESENCE` field is set
    (only presence: an output URL need not be kept to be compared)."""
    state: dict[str, Any] = {name: data.get(name) for name in SAME_VALUE}
    state.update({name: _present(data.get(name)) for name in SAME_PRESENCE})
    return state


@dataclass(frozen=True)
class Disagreement:
    """One field on which the webhook and GET /v1/generations/{id} differ."""

    generation_id: str
    field: str
    webhook: object
    read: object

    def describe(self) -> str:
        """``gen_1: credits_used 0 by webhook, 4 by GET``; presence as set / not set."""

        def shown(value: object) -> str:
            if self.field in SAME_PRESENCE and isinstance(value, bool):
                return "set" if value else "not set"
            return repr(value)

        return (
            f"{self.generation_id}: {self.field} {shown(self.webhook)} by webhook, "
            f"{shown(self.read)} by GET"
        )


def disagreements(
    generation_id: str, event: Mapping[str, Any], record: Mapping[str, Any] | None
) -> list[Disagreement]:
    """Where the read *record* (a :func:`final_state`; None: the read held no record of
    the generation) differs from the *event*'s :func:`final_state`."""
    if record is None:
        return [Disagreement(generation_id, "record", "sent", "no object with this id")]
    return [
        Disagreement(generation_id, name, event.get(name), record.get(name))
        for name in (*SAME_VALUE, *SAME_PRESENCE)
        if event.get(name) != record.get(name)
    ]


@dataclass(frozen=True)
class FinalEvent:
    """A final event as the receiver got it: the generation, the event name and the
    :func:`final_state` its data carried."""

    generation_id: str
    event: str
    state: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"generation_id": self.generation_id, "event": self.event, "state": self.state}


def final_event(delivery: Delivery) -> FinalEvent | None:
    """The final event a delivery carries (:data:`FINAL_EVENTS`, a data object naming its
    generation by ``data.generation_id`` or the Generation header), else None: other
    events, bodies that are no envelope and tests of a webhook are not results."""
    try:
        body = delivery.json()
    except (ValueError, RecursionError):
        return None
    if not isinstance(body, dict) or body.get("event") not in FINAL_EVENTS:
        return None
    data = body.get("data")
    if not isinstance(data, dict):
        return None
    generation_id = data.get("generation_id") or delivery.header("Generation")
    if not isinstance(generation_id, str) or not generation_id:
        return None
    return FinalEvent(generation_id, str(body["event"]), final_state(data))


class FinalEventLog:
    """Appends the final events one process receives to a JSON-lines file, one line per
    event as it arrives (so a reader in another process sees them without waiting for
    this one to end); at most *limit* lines. Thread safe; never raises into the
    receiver's handler (a line it cannot write is counted in :attr:`lost`)."""

    def __init__(self, path: Path, limit: int = MAX_LOGGED_EVENTS) -> None:
        self.path = path
        self.limit = limit
        self.logged = 0
        self.lost = 0
        self._lock = threading.Lock()

    def add(self, delivery: Delivery) -> None:
        """Log *delivery*'s final event, if it carries one."""
        found = final_event(delivery)
        if found is None:
            return
        line = json.dumps(found.to_dict(), sort_keys=True) + "\n"
        with self._lock:
            if self.logged >= self.limit:
                self.lost += 1
                return
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as out:
                    out.write(line)
            except OSError:
                self.lost += 1
                return
            self.logged += 1


def _lines(folder: Path) -> Iterator[str]:
    for path in sorted(folder.glob("*.jsonl")):
        try:
            yield from path.read_text(encoding="utf-8").splitlines()
        except OSError:
            continue


def read_final_events(folder: Path) -> list[FinalEvent]:
    """Every final event the run's processes logged in *folder* (:class:`FinalEventLog`),
    each distinct (generation, event, state) once, in the order read. A torn last line
    (a writer still busy) is skipped."""
    seen: dict[str, FinalEvent] = {}
    for line in _lines(folder):
        try:
            item = json.loads(line)
            found = FinalEvent(str(item["generation_id"]), str(item["event"]), item["state"])
        except (ValueError, KeyError, TypeError):
            continue
        if isinstance(found.state, dict):
            seen.setdefault(json.dumps(found.to_dict(), sort_keys=True), found)
    return list(seen.values())
