"""Settings of one running reference service.

One frozen :class:`Config` is built at start-up (``python -m reference serve``) after the
listening socket is bound (so ``base_url`` is known, port 0 included) and after the store
is opened (so the master secret, kept in the database, is known). Every part of the
service (core, webhooks, netguard) reads its settings from this one object.

The test-mode settings (``allow_cidrs``, ``hosts_file``, ``dns_server``) loosen the
callback URL rules of spec §4 so that the suite's loopback receiver is reachable; they are
off by default and the service logs a loud WARNING when any is on. So does the test-mode
clock (``test_clock``), which lets a harness move the calendar of the daily limits.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from reference.store import Store

__all__ = ["VARIANT", "VARIANT_TIMER_SLACK_S", "Choices", "Config", "load_master_secret"]


@dataclass(frozen=True)
class Choices:
    """Which way the service goes wherever the spec leaves room ("not shown", two readings).

    Each field is one open choice of the requirements catalog (``choices:`` in
    ``conformance/requirements.yaml``, id = the field name with ``-`` for ``_``); its
    default is the reference's side. :data:`VARIANT` takes the other legitimate side of
    every one (``serve --variant``): the suite must judge both without a MUST failure,
    since the spec states neither.
    """

    #: Body of errors other than 429 (spec §7: not shown); 429 keeps ``detail`` (stated).
    error_body: Literal["detail", "error-object"] = "detail"
    #: Status for a missing, malformed, unknown or revoked API key (spec §7: not shown).
    bad_key_status: Literal[401, 403] = 401
    #: Status of a request body the service refuses where spec §7 does not say 400.
    invalid_body_status: Literal[400, 422] = 400
    #: Ids of generations, registered webhooks and API keys; the event (delivery) id
    #: keeps the stated form ``evt_<hex>``, with 32 or 20 hex digits.
    id_form: Literal["prefixed-hex", "uuid"] = "prefixed-hex"
    #: Console log-in and key paths and field names (spec §5.4, §5.8: not shown).
    console_api: Literal["reference", "variant"] = "reference"
    #: How a console session travels: ``Authorization: Bearer`` or a cookie.
    console_credential: Literal["bearer", "cookie"] = "bearer"
    #: The three "API key allowed" endpoints also take a signed-in session.
    session_on_key_endpoints: bool = False
    #: A submit beyond the tier's concurrent_limit: refused (429) or queued behind the
    #: generations in flight.
    concurrency: Literal["refuse", "queue"] = "refuse"
    #: The brand word of the delivery headers (spec §6 shows "Service" as a placeholder).
    header_brand: str = "Service"
    #: The HMAC key of a signing secret: its whole string as UTF-8, or the bytes after
    #: ``whsec_`` base64-decoded (Standard Webhooks); secrets are shaped to match.
    hmac_keying: Literal["utf8", "base64-after-prefix"] = "utf8"
    #: Body of GET /v1/generations/{id} (spec §4: not shown): the record, or the record
    #: wrapped in ``{"generation": ...}``.
    generation_body: Literal["record", "wrapped"] = "record"
    #: Fields of the 202 beyond ``id`` (spec §4: not shown): a summary, or none.
    accepted_body: Literal["summary", "id-only"] = "summary"
    #: An image submit without a delivery target: asynchronous (202) or answered at once
    #: with the finished generation (200); spec §6, §9 make only targeted images async.
    image_without_target: Literal["async", "sync"] = "async"
    #: Console webhook payloads beyond the request's url and events (spec §4: not shown).
    console_webhook_payloads: Literal["reference", "variant"] = "reference"
    #: ``limit`` above 100, or not a positive integer, on a webhook's delivery list.
    list_limit: Literal["refuse", "clamp"] = "refuse"
    #: Order of a delivery list (not shown): newest first or oldest first.
    list_order: Literal["newest-first", "oldest-first"] = "newest-first"
    #: Timestamps (created_at, attempt ``at``): ``+00:00`` with milliseconds, or ``Z``
    #: with whole seconds; both ISO 8601 with an offset.
    timestamp_form: Literal["offset-ms", "z-seconds"] = "offset-ms"
    #: The signature's ``t`` on retries and redeliveries: fresh per attempt, or the time
    #: the delivery was first signed (the tolerance window is not shown).
    signature_time: Literal["per-attempt", "first-signing"] = "per-attempt"
    #: X-Service-Attempt of a redelivery: continues the delivery's numbering, or starts
    #: again at 1 (the record's ``n`` continues either way).
    redelivery_attempt_header: Literal["continue", "restart"] = "continue"
    #: ``status`` recorded for an attempt that got no reply: 0, or 504 (as proxies say).
    no_reply_status: Literal[0, 504] = 0
    #: Which outcomes may be redelivered: exhausted and failed (409 otherwise), or any
    #: final one (delivered too; a delivery waiting for its retry stays 409).
    redeliverable: Literal["exhausted-or-failed", "any-final"] = "exhausted-or-failed"
    #: Case of the signature's hex digest.
    signature_hex_case: Literal["lower", "upper"] = "lower"
    #: The ``Bearer`` scheme word: any case, or exactly ``Bearer``.
    bearer_scheme_case: Literal["insensitive", "exact"] = "insensitive"
    #: A binding's ``events`` list: replaces the defaults, or adds to them.
    events_list: Literal["replaces-defaults", "adds-to-defaults"] = "replaces-defaults"
    #: An unknown event name in a binding: refused (400), or ignored.
    unknown_event_names: Literal["refuse", "ignore"] = "refuse"
    #: Targets that lose the resolution order: validated too, or not looked at.
    losing_targets: Literal["validated", "ignored"] = "validated"
    #: A ``webhook`` object with neither id nor url: refused, or taken as no target.
    empty_binding: Literal["refuse", "no-target"] = "refuse"
    #: X-RateLimit-* headers on answers other than 429.
    rate_headers_on_success: bool = True
    #: Which requests count toward the per-minute and per-day limits: every
    #: authenticated /v1 request, or generation submits only (refused ones included).
    rate_counted: Literal["every-request", "submits"] = "every-request"
    #: A submit whose price would pass the daily credit cap: refused, or admitted while
    #: the credits used are below the cap (refused once they reach it).
    credit_cap: Literal["refuse-overshoot", "refuse-at-cap"] = "refuse-overshoot"
    #: data.credits_used of a failed or cancelled generation: 0 (refunded) or the price
    #: that was charged and refunded.
    failed_credits_used: Literal["zero", "price"] = "zero"
    #: data.error_message of a cancelled generation: a sentence, or null.
    cancelled_error_message: Literal["sentence", "null"] = "sentence"
    #: Event name of a console test delivery (not shown): ``webhook.test``/``webhook.ping``.
    test_event: str = "webhook.test"
    #: Status of a generation not yet finished (the state list is not shown).
    pending_status: str = "queued"
    #: Bounds of the body fields whose values are not shown: free labels and any positive
    #: duration up to 600 s, or ``<digit>K`` sizes, ``<number>p`` resolutions, integer
    #: durations 1-60 and prompts up to 4000 characters.
    body_values: Literal["lenient", "strict"] = "lenient"
    #: Status of a submit for a model category the tier lacks (spec §2 names the field,
    #: not the refusal): 403, like a scope, or 400.
    model_category_status: Literal[403, 400] = 403
    #: Body fields the spec does not show: tolerated, or refused.
    unknown_body_fields: Literal["tolerate", "refuse"] = "tolerate"
    #: Another account's generation, webhook or delivery: 404 or 403 (webhook.id in a
    #: submit body stays 404, which spec §4 states).
    foreign_resource_status: Literal[404, 403] = 404
    #: Redeliver answer beyond outcome and status_code: the attempt too, or nothing.
    redeliver_answer: Literal["with-attempt", "minimal"] = "with-attempt"
    #: Delivery record fields beyond the five of spec §2: id, mode and times, or
    #: delivery_id and created_at only.
    record_extras: Literal["reference", "minimal"] = "reference"
    #: Bytes of a redelivery: the stored bytes, or the same JSON serialized again.
    redelivery_bytes: Literal["stored", "reserialized"] = "stored"
    #: A request body without ``Content-Type: application/json``: 415, or read as JSON.
    body_content_type: Literal["required", "assumed"] = "required"
    #: Credits per operation (spec §1: not shown): ``tiers.toml`` ``[prices]``, or
    #: ``[variant-prices]``.
    prices: Literal["prices", "variant-prices"] = "prices"

    def differing(self, other: Choices) -> list[str]:
        """Names of the choices on which ``self`` and ``other`` differ."""
        return [f.name for f in fields(self) if getattr(self, f.name) != getattr(other, f.name)]


#: How late the variant's delivery timers may fire (the choice ``timer-slack`` of the
#: catalog, ``Config.delivery_timer_slack_s``): a real client's timer, aiohttp's, fires up
#: to a second after a 10 s timeout, which still meets "Per-attempt timeout 10 s".
VARIANT_TIMER_SLACK_S = 1.0

#: The other legitimate side of every open choice (``python -m reference serve --variant``).
VARIANT = Choices(
    error_body="error-object",
    bad_key_status=403,
    invalid_body_status=422,
    id_form="uuid",
    console_api="variant",
    console_credential="cookie",
    session_on_key_endpoints=True,
    concurrency="queue",
    header_brand="Acme",
    hmac_keying="base64-after-prefix",
    generation_body="wrapped",
    accepted_body="id-only",
    image_without_target="sync",
    console_webhook_payloads="variant",
    list_limit="clamp",
    list_order="oldest-first",
    timestamp_form="z-seconds",
    signature_time="first-signing",
    redelivery_attempt_header="restart",
    no_reply_status=504,
    redeliverable="any-final",
    signature_hex_case="upper",
    bearer_scheme_case="exact",
    events_list="adds-to-defaults",
    unknown_event_names="ignore",
    losing_targets="ignored",
    empty_binding="no-target",
    rate_headers_on_success=False,
    rate_counted="submits",
    credit_cap="refuse-at-cap",
    failed_credits_used="price",
    cancelled_error_message="null",
    test_event="webhook.ping",
    pending_status="pending",
    body_values="strict",
    model_category_status=400,
    unknown_body_fields="refuse",
    foreign_resource_status=403,
    redeliver_answer="minimal",
    record_extras="minimal",
    redelivery_bytes="reserialized",
    body_content_type="assumed",
    prices="variant-prices",
)


@dataclass(frozen=True)
class Config:
    """Everything a running service needs to know; immutable once started."""

    db_path: Path
    host: str = "127.0.0.1"
    port: int = 0
    #: Absolute base of the service, e.g. ``http://127.0.0.1:8765``; set once bound.
    base_url: str = ""
    #: API keys look like ``<key_prefix>_<random>`` (spec §2, API key).
    key_prefix: str = "gk"
    #: How long a generation takes before it completes (sandbox contract).
    latency_ms: int = 200
    #: Test mode: CIDRs treated as public for callback targets (e.g. ``127.0.0.1/32``).
    allow_cidrs: tuple[str, ...] = ()
    #: Test mode: resolve callback hosts through this hosts file first.
    hosts_file: Path | None = None
    #: Test mode: resolve callback hosts through this DNS server (host, port).
    dns_server: tuple[str, int] | None = None
    #: Where deliveries may connect: ``"loopback"`` (default) or ``"any"`` (explicit flag).
    egress: str = "loopback"
    #: Per-attempt delivery timeout (spec §6: 10 s).
    delivery_timeout_s: float = 10.0
    #: Test mode: how late (at most) the delivery timer may fire, as real HTTP clients'
    #: timers do (see ``reference.webhooks.sender.timer_deadline``); 0 fires on time.
    delivery_timer_slack_s: float = 0.0
    #: Test mode: the calendar clock of the daily limits may be moved forward through
    #: ``POST /test/clock`` (``reference.clock``); off, it is the wall clock.
    test_clock: bool = False
    #: Waits before the 2nd and 3rd attempt (spec §6: 1 s, then 2 s).
    retry_backoff_s: tuple[float, ...] = (1.0, 2.0)
    #: Attempts per delivery (spec §6: 3).
    max_attempts: int = 3
    #: Names of the injected faults (see ``reference.faults``); empty in honest mode.
    faults: frozenset[str] = frozenset()
    #: Random secret kept in the database (``load_master_secret``): per-key signing
    #: secrets, console JWTs and output names derive from it, so they survive restarts.
    master_secret: str = field(default="", repr=False)
    #: Largest request body accepted (bytes); larger bodies get 413.
    max_body_bytes: int = 1024 * 1024
    #: Where the spec leaves room, which side the service takes (:data:`VARIANT`: the
    #: other side of each, ``serve --variant``).
    choices: Choices = field(default_factory=Choices)
    #: A tiers file replacing the shipped ``tiers.toml`` (``serve --tiers FILE``).
    tiers_file: Path | None = None
    #: Processes serving the one store (``serve --workers N``). Above 1 the per-minute
    #: windows live in the store, and only the process of ``process_index`` 0 runs the
    #: delivery dispatcher (the others leave their deliveries in the store for it).
    workers: int = 1
    #: Which of the ``workers`` processes this one is (0 in a single process).
    process_index: int = 0

    @property
    def test_mode(self) -> bool:
        """True when any setting loosens the callback rules (log a WARNING at start)."""
        return bool(self.allow_cidrs) or self.hosts_file is not None or self.dns_server is not None


def load_master_secret(store: Store) -> str:
    """Return the service's master secret, creating it on the first start.

    It lives in the ``meta`` table, so derived secrets (per-key webhook signing secrets of
    spec §5.6, console tokens) stay stable across restarts with the same database.
    """
    with store.transaction() as conn:
        conn.execute(
            "INSERT OR IGNORE INTO meta (name, value) VALUES ('master_secret', ?)",
            (secrets.token_hex(32),),
        )
        row = conn.execute("SELECT value FROM meta WHERE name = 'master_secret'").fetchone()
    value: str = row["value"]
    return value
