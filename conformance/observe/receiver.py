"""The webhook receiver: one server, a clean path per check, raw capture, deadline waits.

The receiver plays the target URL of spec §6. One threaded server (pytest-httpserver on
werkzeug) serves every check of a run; each check takes its own :class:`Endpoint` (a
fresh unguessable path), so checks running side by side never see each other's
deliveries. An endpoint scripts its replies (a status sequence for the retry rules of
spec §3, a delay beyond the 10 s per-attempt timeout, a redirect that must not be
followed, spec §6 Behaviour) and captures what arrived: the raw body bytes (signatures
are verified on them, spec §6 Signature 3), the headers, and the arrival time taken with
the kernel's receive stamp of the request's first byte (:mod:`conformance.observe.arrival`:
the suite's own lateness on a loaded machine stays out of the gaps it judges), or, where
there is none, ``time.monotonic()`` on entry to the handler (pytest-httpserver logs only
after the handler returns, without arrival times).

The listeners that must never be reached live in :mod:`conformance.observe.canary`; their names
are importable from here too, beside the receiver the canary's rebind listener shares a
port with.

Nothing here sleeps to synchronise: waits are on a condition with a deadline.

A target may flood the receiver, so what it keeps is bounded: every delivery that reaches
the handler is recorded exactly once, with its raw bytes, unless a cap below is hit; then it
is refused (413 for a body over :data:`MAX_BODY_BYTES`, unread; a stray past
:data:`MAX_STRAYS` is answered 404 and not kept) and the refusal is counted by reason in
:attr:`Receiver.refused`. Header lines over 64 KiB, or more than 100 headers, are refused
(431) by the HTTP server itself before the handler runs.
"""

from __future__ import annotations

import errno
import json
import logging
import re
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Self
from urllib.parse import urlsplit

import httpx
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.serving import WSGIRequestHandler

from conformance.observe.arrival import (
    await_stamping,
    enable_stamps,
    first_byte_at,
    non_blocking,
)
from conformance.observe.canary import Canary, CanaryHit, CanaryView
from conformance.observe.serving import Serving
from conformance.target.profile import ReceiverProfile
from conformance.target.wire import WireProfile

__all__ = [
    "Canary",
    "CanaryHit",
    "CanaryView",
    "Delivery",
    "DeliveryTimeout",
    "Endpoint",
    "Receiver",
    "ReceiverError",
    "Reply",
]

#: Bound on a scripted delay: longer than the spec's 10 s per-attempt timeout (§6) with
#: room to spare, short enough that a forgotten endpoint cannot hold a thread for long.
MAX_DELAY_SECONDS: Final = 60.0
#: The largest delivery body kept: far above any event of the spec (an envelope with a
#: generation record), small enough that a flood of them cannot exhaust the run's memory.
MAX_BODY_BYTES: Final = 16 * 1024 * 1024
#: The most strays (deliveries to no open endpoint) kept for reports; more are counted.
MAX_STRAYS: Final = 1000
#: Reasons counted in :attr:`Receiver.refused`.
REFUSED_BODY_TOO_LARGE: Final = "body over MAX_BODY_BYTES"
REFUSED_STRAY_OVER_CAP: Final = "stray over MAX_STRAYS"


class DeliveryTimeout(AssertionError):
    """Fewer deliveries arrived than a check waited for (the message lists what came)."""


class ReceiverError(AssertionError):
    """The receiver's handler failed: a harness error surfaced in the check."""


@dataclass(frozen=True)
class Reply:
    """One scripted reply: a status, an optional delay before it, an optional Location."""

    status: int = 200
    delay: float = 0.0
    location: str | None = None

    def __post_init__(self) -> None:
        if not 100 <= self.status <= 599:
            raise ValueError(f"status {self.status} is not an HTTP status")
        if not 0 <= self.delay <= MAX_DELAY_SECONDS:
            raise ValueError(f"delay {self.delay} s is outside 0..{MAX_DELAY_SECONDS}")


@dataclass(frozen=True)
class Delivery:
    """One request that reached an endpoint, as received.

    *wire* is how the deployment names its delivery headers (the profile's ``[wire]``,
    given to the receiver): :meth:`header` reads them by their own name.
    """

    raw_body: bytes
    headers: httpx.Headers  # a case-insensitive Mapping[str, str]
    arrived_at: float  # time.monotonic() of its first byte (see the module's docstring)
    path: str
    method: str
    query: str = ""
    remote_addr: str | None = None
    replied: Reply = field(default_factory=Reply)
    wire: WireProfile = field(default_factory=WireProfile, repr=False)

    def header(self, name: str) -> str | None:
        """The delivery header *name* (``"Event"``, ``"Delivery"``, ``"Attempt"``,
        ``"Generation"``, ``"Signature"``) under the deployment's brand word, if sent."""
        value: str | None = self.headers.get(self.wire.header(name))
        return value

    def json(self) -> Any:
        """The body parsed as JSON (after signature checks, which use :attr:`raw_body`)."""
        return json.loads(self.raw_body)

    def summary(self, origin: float) -> str:
        """One line for failure messages: time, method, event headers, our reply."""
        parts = [f"+{self.arrived_at - origin:.2f}s {self.method}"]
        for name in ("Event", "Attempt", "Delivery"):
            value = self.header(name)
            if value is not None:
                parts.append(f"{self.wire.header(name)}={value}")
        parts.append(f"{len(self.raw_body)} bytes, replied {self.replied.status}")
        return " ".join(parts)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "endpoint"


class Endpoint:
    """A fresh path on the receiver for one check; scripts replies and captures deliveries.

    The script is a sequence of :class:`Reply`; delivery *n* gets reply *n*, and the last
    reply repeats. By default every delivery gets 200.
    """

    def __init__(self, receiver: Receiver, name: str) -> None:
        self.receiver = receiver
        self.name = name
        self.path = f"/hooks/{_slug(name)}-{secrets.token_hex(8)}"
        self.created_at = time.monotonic()
        self._condition = threading.Condition()
        self._deliveries: list[Delivery] = []
        self._taken = 0  # handed over by take(): the reply script counts them too
        self._script: list[Reply] = [Reply(200)]
        self.errors: list[str] = []

    @property
    def url(self) -> str:
        """The URL the IUT is given (the profile's public_url when set)."""
        return self.receiver.url_for(self.path)

    # -- scripting -------------------------------------------------------------------

    def respond_with(self, replies: Sequence[Reply]) -> Endpoint:
        if not replies:
            raise ValueError("give at least one reply")
        with self._condition:
            self._script = list(replies)
        return self

    def respond_with_statuses(self, statuses: Sequence[int]) -> Endpoint:
        """Reply with these statuses in turn (the last repeats), e.g. ``[500, 500, 200]``."""
        return self.respond_with([Reply(status) for status in statuses])

    def respond_with_delay(self, seconds: float, then_status: int = 200) -> Endpoint:
        """Hold every reply *seconds* before answering *then_status* (a slow target)."""
        return self.respond_with([Reply(then_status, delay=seconds)])

    def redirect_to(self, target: Endpoint | str, status: int = 302) -> Endpoint:
        """Answer every delivery with a redirect to *target* (spec §6: not followed)."""
        if not 300 <= status <= 399:
            raise ValueError(f"{status} is not a redirect status")
        location = target.url if isinstance(target, Endpoint) else target
        return self.respond_with([Reply(status, location=location)])

    # -- reading ---------------------------------------------------------------------

    @property
    def deliveries(self) -> list[Delivery]:
        """What arrived so far, in arrival order (a copy)."""
        with self._condition:
            return list(self._deliveries)

    def take(self, timeout: float = 0.0) -> list[Delivery]:
        """Hand over what arrived since the last take, and forget it (a long listener's
        memory stays bounded); waits at most *timeout* s for something to arrive.

        Counts in :meth:`wait_for` and :meth:`assert_quiet` start again after a take.
        """
        with self._condition:
            if timeout > 0:
                self._condition.wait_for(lambda: bool(self._deliveries), timeout)
            taken, self._deliveries = self._deliveries, []
            self._taken += len(taken)
        return taken

    def _describe(self, deliveries: Sequence[Delivery]) -> str:
        if not deliveries:
            return "nothing arrived"
        lines = [d.summary(self.created_at) for d in deliveries]
        return f"{len(deliveries)} arrived: " + "; ".join(lines)

    def wait_for(self, count: int, timeout: float) -> list[Delivery]:
        """Wait until *count* deliveries arrived (at most *timeout* s); all arrived so far.

        Raises :class:`DeliveryTimeout` naming what did arrive when the deadline passes.
        """
        if count < 1 or timeout <= 0:
            raise ValueError("count must be >= 1 and timeout > 0")
        with self._condition:
            if not self._condition.wait_for(lambda: len(self._deliveries) >= count, timeout):
                raise DeliveryTimeout(
                    f"endpoint {self.name!r} ({self.path}): expected {count} "
                    f"deliveries within {timeout:g} s, {self._describe(self._deliveries)}"
                )
            return list(self._deliveries)

    def assert_quiet(self, for_seconds: float) -> None:
        """Assert that nothing beyond what already arrived arrives within *for_seconds*.

        Costs the whole window when it passes: use sparingly (e.g. "no 4th attempt").
        """
        if not 0 < for_seconds <= MAX_DELAY_SECONDS:
            raise ValueError(f"for_seconds must be in (0, {MAX_DELAY_SECONDS}]")
        with self._condition:
            seen = len(self._deliveries)
            if not self._condition.wait_for(lambda: len(self._deliveries) != seen, for_seconds):
                return
            extra = self._deliveries[seen:]
        raise AssertionError(
            f"endpoint {self.name!r}: expected no further delivery within {for_seconds:g} s "
            f"after {seen}, but {self._describe(extra)}"
        )

    def check(self) -> None:
        """Raise :class:`ReceiverError` if the handler failed for this endpoint."""
        with self._condition:
            errors = list(self.errors)
        if errors:
            raise ReceiverError(f"receiver handler failed for {self.path}: " + "; ".join(errors))

    def close(self) -> None:
        """Stop serving this path; later arrivals (late retries) count as strays."""
        self.receiver._forget(self)

    # -- called by the receiver's handler thread -------------------------------------

    def _arrive(self, delivery_of: Callable[[Reply], Delivery]) -> Delivery:
        with self._condition:
            received = self._taken + len(self._deliveries)
            reply = self._script[min(received, len(self._script) - 1)]
            delivery = delivery_of(reply)
            self._deliveries.append(delivery)
            self._condition.notify_all()
        return delivery

    def __repr__(self) -> str:
        return f"Endpoint({self.name!r}, {self.path!r}, {len(self.deliveries)} deliveries)"


#: Where :class:`_StampingHandler` leaves a request's arrival time in its WSGI environ.
_ARRIVED_AT: Final = "conformance.arrived_at"


class _StampingHandler(WSGIRequestHandler):
    """werkzeug's request handler that first notes when each request's first byte reached
    the machine (:func:`~conformance.observe.arrival.first_byte_at`)."""

    def setup(self) -> None:
        super().setup()
        self._stamped = enable_stamps(self.connection)

    def handle_one_request(self) -> None:
        self._first_byte_at = (
            first_byte_at(self.connection, self._read_ahead) if self._stamped else None
        )
        super().handle_one_request()

    def _read_ahead(self) -> bool:
        """Whether the reader already holds bytes (asked when the socket holds none): a
        non-blocking peek returns only what is buffered."""
        try:
            with non_blocking(self.connection):
                return bool(self.rfile.peek(1))  # type: ignore[attr-defined]
        except OSError:
            return False

    def make_environ(self) -> dict[str, Any]:
        environ = super().make_environ()
        environ[_ARRIVED_AT] = self._first_byte_at
        return environ


class _Server(HTTPServer):
    """pytest-httpserver with one dispatcher, no unbounded request log, and arrival
    times from the kernel."""

    def __init__(self, host: str, port: int, dispatch: Callable[[Request], Response]) -> None:
        super().__init__(host=host, port=port, threaded=True)
        self._dispatch_to = dispatch

    def start(self) -> None:
        super().start()
        # pytest-httpserver does not pass a handler class to werkzeug; the server reads
        # this attribute per connection. One that came before this line (nobody knows the
        # port yet) is timed on entry to the handler instead.
        assert self.server is not None
        self.server.RequestHandlerClass = _StampingHandler
        # On the listener: accepted connections inherit it, and a request's first bytes,
        # which may come before its handler runs, are stamped as they arrive; from the
        # first one on, once the kernel has turned stamping on (arrival.py says why).
        if enable_stamps(self.server.socket):
            await_stamping()

    def application(self, request: Request) -> Response:
        # The base class appends every (request, response) to self.log, which grows for
        # the whole run; the receiver keeps its own per-endpoint captures instead.
        return self._dispatch_to(request)


class Receiver(Serving):
    """The run's webhook receiver, bound as the profile's ``[receiver]`` says; deliveries
    read their headers under the profile's ``[wire]`` brand word."""

    def __init__(
        self,
        config: ReceiverProfile | None = None,
        wire: WireProfile | None = None,
        on_delivery: Callable[[Delivery], None] | None = None,
    ) -> None:
        self.config = config or ReceiverProfile()
        self.wire = wire or WireProfile()
        #: Called with every delivery kept (an endpoint's or a stray), in the handler
        #: thread: the run's log of final events (GEN-CONSIST-01) sees every generation.
        self.on_delivery = on_delivery
        self._lock = threading.Lock()
        self._endpoints: dict[str, Endpoint] = {}
        self._stopping = threading.Event()
        self.strays: list[Delivery] = []
        self.errors: list[str] = []
        #: Deliveries refused by a cap, by reason (see the module's docstring).
        self.refused: Counter[str] = Counter()
        self._server = _Server(self.config.listen_host, self.config.listen_port, self._handle)

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> Self:
        # werkzeug logs one line per request to stderr; the captures are the record.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        try:
            self._server.start()
        except SystemExit:
            # werkzeug exits the process when it cannot bind; a check must see an error.
            raise OSError(
                errno.EADDRINUSE,
                f"cannot listen on {self.config.listen_host}:{self.config.listen_port}",
            ) from None
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes delayed replies
        if self._server.is_running():
            self._server.stop()

    @property
    def host(self) -> str:
        return str(self.config.listen_host)

    @property
    def port(self) -> int:
        return int(self._server.port)

    def url_for(self, path: str) -> str:
        """The URL of *path* as the IUT reaches it (public_url when the profile sets one)."""
        if self.config.public_url:
            return self.config.public_url.rstrip("/") + path
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{path}"

    # -- endpoints -------------------------------------------------------------------

    def endpoint(self, name: str | None = None) -> Endpoint:
        """A fresh endpoint with its own unguessable path."""
        created = Endpoint(self, name or "endpoint")
        with self._lock:
            self._endpoints[created.path] = created
        return created

    def _forget(self, endpoint: Endpoint) -> None:
        with self._lock:
            self._endpoints.pop(endpoint.path, None)

    def check(self) -> None:
        """Raise :class:`ReceiverError` if the handler failed outside any endpoint."""
        with self._lock:
            errors = list(self.errors)
        if errors:
            raise ReceiverError("receiver handler failed: " + "; ".join(errors))

    # -- the handler (server threads) ------------------------------------------------

    def _path_of(self, request: Request) -> str:
        # With a public_url that has a base path (a tunnel), strip it back off.
        base = urlsplit(self.config.public_url).path.rstrip("/") if self.config.public_url else ""
        path = str(request.path)
        return path[len(base) :] if base and path.startswith(base + "/") else path

    def _handle(self, request: Request) -> Response:
        arrived_at = request.environ.get(_ARRIVED_AT) or time.monotonic()  # spec §3 backoff
        endpoint: Endpoint | None = None
        try:
            path = self._path_of(request)
            # A body past the cap is refused: declared, unread; chunked, werkzeug stops
            # reading at the limit (silently), so one byte more than the cap tells.
            request.max_content_length = MAX_BODY_BYTES + 1
            try:
                raw_body = request.get_data(cache=True)
            except RequestEntityTooLarge:
                raw_body = None
            if raw_body is None or len(raw_body) > MAX_BODY_BYTES:
                with self._lock:
                    self.refused[REFUSED_BODY_TOO_LARGE] += 1
                return Response("body too large\n", status=413, mimetype="text/plain")
            headers = httpx.Headers(list(request.headers.items()))

            def delivery_of(reply: Reply) -> Delivery:
                return Delivery(
                    raw_body=raw_body,
                    headers=headers,
                    arrived_at=arrived_at,
                    path=path,
                    method=str(request.method),
                    query=request.query_string.decode("latin-1"),
                    remote_addr=request.remote_addr,
                    replied=reply,
                    wire=self.wire,
                )

            with self._lock:
                endpoint = self._endpoints.get(path)
            if endpoint is None:
                # A late retry for a finished check, or a request nobody asked for.
                stray = delivery_of(Reply(404))
                with self._lock:
                    kept = len(self.strays) < MAX_STRAYS
                    if kept:
                        self.strays.append(stray)
                    else:
                        self.refused[REFUSED_STRAY_OVER_CAP] += 1
                if kept and self.on_delivery is not None:
                    self.on_delivery(stray)
                return Response("no such endpoint\n", status=404, mimetype="text/plain")
            delivery = endpoint._arrive(delivery_of)
            if self.on_delivery is not None:
                self.on_delivery(delivery)
            reply = delivery.replied
            if reply.delay:
                self._stopping.wait(reply.delay)
            headers_out = {"Location": reply.location} if reply.location else {}
            return Response("ok\n", status=reply.status, headers=headers_out, mimetype="text/plain")
        except Exception as exc:  # surfaced in the check through Endpoint.check()
            message = f"{type(exc).__name__}: {exc}"
            if endpoint is not None:
                with endpoint._condition:
                    endpoint.errors.append(message)
            else:
                with self._lock:
                    self.errors.append(message)
            return Response("receiver error\n", status=500, mimetype="text/plain")
