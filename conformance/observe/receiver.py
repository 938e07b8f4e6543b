"""The webhook receiver: one server, a clean path per check, raw capture, deadline waits.

The receiver plays the target URL of spec §6. One threaded server (pytest-httpserver on
werkzeug) serves every check of a run; each check takes its own :class:`Endpoint` (a
fresh unguessable path), so checks running side by side never see each other's
deliveries. An endpoint scripts its replies (a status sequence for the retry rules of
spec §3, a delay beyond the 10 s per-attempt timeout, a redirect that must not be
followed, spec §6 Behaviour) and captures what arrived: the raw body bytes (signatures
are verified on them, spec §6 Signature 3), the headers, and the arrival time taken with
``time.monotonic()`` inside the handler (pytest-httpserver logs only after the handler
returns, without arrival times).

:class:`Canary` listeners catch connections that must never happen: a dual-stack socket
on ``[::]`` on its own port sees 127.0.0.2, 0.0.0.0, ::1 and mapped forms; a listener on
127.0.0.2 at the receiver's port sees a name rebound to 127.0.0.2 (a test allowlist of
127.0.0.1/32 legitimately admits every spelling of 127.0.0.1, so the rejection vectors and
canaries use 127.0.0.2 instead).

Nothing here sleeps to synchronise: waits are on a condition with a deadline.
"""

from __future__ import annotations

import errno
import json
import logging
import re
import secrets
import select
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

import httpx
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

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
    arrived_at: float  # time.monotonic() on entry to the handler
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
        deadline = time.monotonic() + timeout
        with self._condition:
            while len(self._deliveries) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise DeliveryTimeout(
                        f"endpoint {self.name!r} ({self.path}): expected {count} "
                        f"deliveries within {timeout:g} s, {self._describe(self._deliveries)}"
                    )
                self._condition.wait(remaining)
            return list(self._deliveries)

    def assert_quiet(self, for_seconds: float) -> None:
        """Assert that nothing beyond what already arrived arrives within *for_seconds*.

        Costs the whole window when it passes: use sparingly (e.g. "no 4th attempt").
        """
        if not 0 < for_seconds <= MAX_DELAY_SECONDS:
            raise ValueError(f"for_seconds must be in (0, {MAX_DELAY_SECONDS}]")
        deadline = time.monotonic() + for_seconds
        with self._condition:
            seen = len(self._deliveries)
            while len(self._deliveries) == seen:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._condition.wait(remaining)
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
            reply = self._script[min(len(self._deliveries), len(self._script) - 1)]
            delivery = delivery_of(reply)
            self._deliveries.append(delivery)
            self._condition.notify_all()
        return delivery

    def __repr__(self) -> str:
        return f"Endpoint({self.name!r}, {self.path!r}, {len(self.deliveries)} deliveries)"


class _Server(HTTPServer):
    """pytest-httpserver with one dispatcher and no unbounded request log."""

    def __init__(self, host: str, port: int, dispatch: Callable[[Request], Response]) -> None:
        super().__init__(host=host, port=port, threaded=True)
        self._dispatch_to = dispatch

    def application(self, request: Request) -> Response:
        # The base class appends every (request, response) to self.log, which grows for
        # the whole run; the receiver keeps its own per-endpoint captures instead.
        return self._dispatch_to(request)


class Receiver:
    """The run's webhook receiver, bound as the profile's ``[receiver]`` says; deliveries
    read their headers under the profile's ``[wire]`` brand word."""

    def __init__(
        self, config: ReceiverProfile | None = None, wire: WireProfile | None = None
    ) -> None:
        self.config = config or ReceiverProfile()
        self.wire = wire or WireProfile()
        self._lock = threading.Lock()
        self._endpoints: dict[str, Endpoint] = {}
        self._stopping = threading.Event()
        self.strays: list[Delivery] = []
        self.errors: list[str] = []
        self._server = _Server(self.config.listen_host, self.config.listen_port, self._handle)

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> Receiver:
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

    def __enter__(self) -> Receiver:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

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
        arrived_at = time.monotonic()  # first thing: the arrival time (spec §3 backoff)
        endpoint: Endpoint | None = None
        try:
            path = self._path_of(request)
            raw_body = request.get_data(cache=True)
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
                    self.strays.append(stray)
                return Response("no such endpoint\n", status=404, mimetype="text/plain")
            delivery = endpoint._arrive(delivery_of)
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


# -- canaries ------------------------------------------------------------------------


@dataclass(frozen=True)
class CanaryHit:
    """A connection to a canary: a callback that should have been refused was dialled."""

    listener: str  # "dual-stack" or "rebind"
    peer: str
    local: str
    arrived_at: float
    request_line: str | None = None  # None until (unless) an HTTP request line was read


_CANARY_REPLY: Final = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 7\r\n"
    b"Connection: close\r\n\r\ncanary\n"
)


def _bound(family: int, address: tuple[str, int], *, dual_stack: bool = False) -> socket.socket:
    """A listening TCP socket on *address*, closed again if binding fails."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if dual_stack:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(address)
        sock.listen(16)
    except OSError:
        sock.close()
        raise
    return sock


#: Connections a listener reads at once; beyond that a hit is recorded and closed at once.
_MAX_CANARY_READERS: Final = 8


class _Listener:
    """One listening socket: one accept thread, at most 8 short-lived reader threads.

    Connections are accepted (and recorded) only under ``_accept_lock``, so that
    :meth:`settle` can guarantee that every connection completed before it was called
    is recorded when it returns: either the accept thread recorded it, or it still waits
    in the backlog and ``settle`` accepts it itself.
    """

    def __init__(self, canary: Canary, label: str, sock: socket.socket) -> None:
        self.canary = canary
        self.label = label
        self.sock = sock
        self.sock.setblocking(False)
        self.thread = threading.Thread(target=self._run, name=f"canary-{label}", daemon=True)
        self._readers = threading.BoundedSemaphore(_MAX_CANARY_READERS)
        self._accept_lock = threading.Lock()

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def _run(self) -> None:
        while not self.canary._stopping.is_set():
            try:
                # The loop checks for stop at this period.
                readable, _, _ = select.select([self.sock], [], [], 0.1)
            except (OSError, ValueError):
                return  # closed by stop()
            if readable:
                with self._accept_lock:
                    self._accept_one()

    def settle(self) -> None:
        """Record every connection waiting in the backlog (bounded)."""
        with self._accept_lock:
            for _ in range(1000):
                if not self._accept_one():
                    return

    def _accept_one(self) -> bool:
        """Accept and record one waiting connection; False when none waits."""
        try:
            conn, peer = self.sock.accept()
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return False  # closed by stop()
        # Recorded on accept: a connection is the violation, whatever it sends.
        index = self.canary._record(
            CanaryHit(
                listener=self.label,
                peer=str(peer[0]),
                local=str(conn.getsockname()[0]),
                arrived_at=time.monotonic(),
            )
        )
        if self._readers.acquire(blocking=False):
            reader = threading.Thread(
                target=self._read, args=(conn, index), name=f"canary-{self.label}-read"
            )
            reader.daemon = True
            reader.start()
        else:
            conn.close()
        return True

    def _read(self, conn: socket.socket, index: int) -> None:
        """Read the request line (for the report) and answer, within 2 s."""
        try:
            with conn:
                conn.settimeout(2.0)
                data = b""
                while b"\r\n" not in data and len(data) < 8192:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                if b"\r\n" in data:
                    line = data.split(b"\r\n", 1)[0].decode("latin-1")[:300]
                    self.canary._complete(index, line)
                    conn.sendall(_CANARY_REPLY)
        except OSError:
            pass  # the peer went away or was silent; the hit is recorded already
        finally:
            self._readers.release()


class Canary:
    """Listeners that must never be reached; :attr:`hits` must stay empty.

    * ``dual-stack``: ``[::]`` with IPV6_V6ONLY off, on its own port, so 127.0.0.2,
      0.0.0.0, ::1 and IPv4-mapped forms all land here (:meth:`url`).
    * ``rebind``: 127.0.0.2 at the receiver's port (:meth:`rebind_url`), for a callback
      host that is later rebound from the receiver's address to 127.0.0.2.
    """

    def __init__(self, rebind_port: int | None = None, rebind_host: str = "127.0.0.2") -> None:
        self._lock = threading.Condition()
        self._stopping = threading.Event()
        self._hits: list[CanaryHit] = []
        self._listeners: list[_Listener] = []
        self.rebind_host = rebind_host
        self._rebind_port = rebind_port
        self.dual_stack_v6 = True

    def start(self) -> Canary:
        try:
            sock = _bound(socket.AF_INET6, ("::", 0), dual_stack=True)
        except OSError:
            # No IPv6 on this host: IPv4 wildcard still catches 127.0.0.2 and 0.0.0.0.
            self.dual_stack_v6 = False
            sock = _bound(socket.AF_INET, ("0.0.0.0", 0))  # noqa: S104 (every local address)
        self._listeners.append(_Listener(self, "dual-stack", sock))
        if self._rebind_port is not None:
            try:
                rebind = _bound(socket.AF_INET, (self.rebind_host, self._rebind_port))
            except OSError:
                sock.close()
                raise
            self._listeners.append(_Listener(self, "rebind", rebind))
        for listener in self._listeners:
            listener.thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        for listener in self._listeners:
            listener.sock.close()
        for listener in self._listeners:
            listener.thread.join(timeout=5)

    def __enter__(self) -> Canary:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The dual-stack listener's port."""
        return self._listeners[0].port

    @property
    def rebind_port(self) -> int | None:
        return self._listeners[1].port if len(self._listeners) > 1 else None

    def url(self, host: str = "127.0.0.2", path: str = "/canary") -> str:
        """A URL on the dual-stack listener through *host* (e.g. ``127.0.0.2``, ``::1``)."""
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.port}{path}"

    def rebind_url(self, path: str = "/canary") -> str:
        if self.rebind_port is None:
            raise RuntimeError("this canary has no rebind listener (no receiver port given)")
        return f"http://{self.rebind_host}:{self.rebind_port}{path}"

    # -- hits ------------------------------------------------------------------------

    def _record(self, hit: CanaryHit) -> int:
        with self._lock:
            self._hits.append(hit)
            self._lock.notify_all()
            return len(self._hits) - 1

    def _complete(self, index: int, request_line: str) -> None:
        with self._lock:
            hit = self._hits[index]
            self._hits[index] = CanaryHit(
                hit.listener, hit.peer, hit.local, hit.arrived_at, request_line
            )

    def settle(self) -> None:
        """Record the connections still waiting in the listeners' backlogs.

        A connection completes in the kernel before it is accepted; without this, a
        check could read the hits between an IUT's connect and the accept.
        """
        for listener in self._listeners:
            listener.settle()

    @property
    def hits(self) -> list[CanaryHit]:
        self.settle()
        with self._lock:
            return list(self._hits)

    def mark(self) -> int:
        """A position in the hit list; :meth:`hits_since` gives what came after it."""
        with self._lock:
            return len(self._hits)

    def hits_since(self, mark: int) -> list[CanaryHit]:
        self.settle()
        with self._lock:
            return list(self._hits[mark:])

    def view(self) -> CanaryView:
        """This canary as one check sees it: only the hits from now on."""
        return CanaryView(self, self.mark())

    def wait_for_hits(self, count: int, timeout: float, *, since: int = 0) -> list[CanaryHit]:
        """Wait (with a deadline) until *count* hits arrived after *since*."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self._hits) - since < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"expected {count} canary hits within {timeout:g} s, "
                        f"got {len(self._hits) - since}"
                    )
                self._lock.wait(remaining)
            return list(self._hits[since:])


class CanaryView:
    """The run's canary as seen by one check: :attr:`hits` counts from the check's start."""

    def __init__(self, canary: Canary, since: int) -> None:
        self.canary = canary
        self.since = since

    @property
    def hits(self) -> list[CanaryHit]:
        return self.canary.hits_since(self.since)

    @property
    def port(self) -> int:
        return self.canary.port

    @property
    def rebind_port(self) -> int | None:
        return self.canary.rebind_port

    def url(self, host: str = "127.0.0.2", path: str = "/canary") -> str:
        return self.canary.url(host, path)

    def rebind_url(self, path: str = "/canary") -> str:
        return self.canary.rebind_url(path)

    def wait_for_hits(self, count: int, timeout: float) -> list[CanaryHit]:
        return self.canary.wait_for_hits(count, timeout, since=self.since)

    def assert_no_hits(self) -> None:
        """Fail naming every connection a canary saw since the check started."""
        hits = self.hits
        if hits:
            seen = "; ".join(
                f"{h.listener} from {h.peer} to {h.local}: {h.request_line or '(no request)'}"
                for h in hits
            )
            raise AssertionError(f"a canary was reached ({len(hits)} connections): {seen}")
