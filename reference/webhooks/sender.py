"""One delivery attempt over HTTP (spec §6 "Delivery request", "Behaviour").

POST of the stored body bytes with the six headers of spec §6; any 2xx is success,
redirects are not followed (a 3xx is a failed attempt), and the whole attempt is bounded
by the per-attempt timeout (10 s by default), not only each socket operation. The
connection goes to the address validated earlier (``genapi.pinned_address``, honoured by
netguard's transport), never to a fresh DNS answer.

Interpretation (spec §2 types ``status`` as an integer): an attempt that got no HTTP
response (timeout, refused connection) is recorded with ``status`` 0 and an ``error``
string saying what happened; with the choice ``no_reply_status = 504`` a timed-out one is
recorded 504, as an HTTP proxy reports a silent upstream. The headers' brand word, the
signature's keying, hex case and time, and the form of ``at`` follow ``SendOptions``
(the service fills them from ``Config.choices``).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from .envelopes import new_event_id, timestamp_now
from .signing import signature_header

__all__ = ["ATTEMPT_FIELDS", "AttemptResult", "DeliveryRequest", "send_attempt"]

PINNED_ADDRESS_EXTENSION = "genapi.pinned_address"
USER_AGENT = "genapi-reference-webhooks/0.1"
#: Bounds on reading a reply body to reuse its connection (see ``finish_body``).
DRAIN_MAX_BYTES = 64 * 1024
DRAIN_S = 0.05
#: The fields of an entry of a delivery record's ``attempts``, in the order spec §2
#: lists them (an attempt's answer and the stored attempts alike show exactly these).
ATTEMPT_FIELDS = ("n", "at", "status", "ms", "error")


@dataclass(frozen=True)
class DeliveryRequest:
    """What one attempt sends; ``secret`` keys the signature and is never logged."""

    delivery_id: str
    event_type: str
    generation_id: str
    url: str
    address: str
    body: bytes
    attempt: int
    secret: str


@dataclass(frozen=True)
class AttemptResult:
    """The recorded outcome of one attempt (spec §2 attempts entry)."""

    n: int
    at: str
    status: int
    ms: int
    error: str | None
    #: Set only under a success-rule fault (SendOptions.counts_as_success).
    ok: bool | None = None

    @property
    def succeeded(self) -> bool:
        """Spec §6: success is any 2xx."""
        if self.ok is not None:
            return self.ok
        return 200 <= self.status < 300

    def view(self) -> dict[str, object]:
        """The attempt as an ``attempts`` entry (spec §2)."""
        return {name: getattr(self, name) for name in ATTEMPT_FIELDS}


@dataclass(frozen=True)
class SendOptions:
    """Fault switches that change how an attempt is sent (honest defaults)."""

    follow_redirects: bool = False
    signed_body_override: bytes | None = None
    signing_secret_override: str | None = None
    mismatched_delivery_header: bool = False
    #: Changes each attempt's request before it is sent (delivery_faults.py; None: honest).
    per_attempt: Callable[[DeliveryRequest], DeliveryRequest] | None = None
    #: Record a 200 without sending anything (fault DELIVERED_WITHOUT_SENDING).
    pretend_sent: bool = False
    #: Which replied statuses count as success, under a success-rule fault (None: any 2xx).
    counts_as_success: Callable[[int], bool] | None = None
    #: Rewrites the method and headers of an attempt (the event faults, event_faults.py).
    rewrite: Callable[[str, dict[str, str], DeliveryRequest], tuple[str, dict[str, str]]] | None = (
        None
    )
    #: Where the spec leaves room (``Config.choices``): the headers' brand word, the HMAC
    #: keying, upper-case hex, a fixed signing time (None: now), the ``at`` form and the
    #: status recorded for an attempt that timed out.
    header_brand: str = "Service"
    keying: str = "utf8"
    upper_hex: bool = False
    signed_at: int | None = None
    timestamp_form: str = "offset-ms"
    timeout_status: int = 0


def build_headers(request: DeliveryRequest, options: SendOptions) -> dict[str, str]:
    """The delivery headers of spec §6; ``t`` is fresh for every attempt unless the
    options fix it (the choice ``signature_time``)."""
    timestamp = int(time.time()) if options.signed_at is None else options.signed_at
    signed_body = (
        options.signed_body_override if options.signed_body_override is not None else request.body
    )
    secret = (
        options.signing_secret_override
        if options.signing_secret_override is not None
        else request.secret
    )
    brand = f"X-{options.header_brand}-"
    return {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        f"{brand}Event": request.event_type,
        f"{brand}Delivery": (
            new_event_id() if options.mismatched_delivery_header else request.delivery_id
        ),
        f"{brand}Attempt": str(request.attempt),
        f"{brand}Generation": request.generation_id,
        f"{brand}Signature": signature_header(
            secret, timestamp, signed_body, keying=options.keying, upper=options.upper_hex
        ),
    }


def _described(exc: BaseException) -> str:
    """The error's class and the first message along its causes: httpx reports a
    connection the target reset as a bare ``ReadError``, whose cause says what happened."""
    cause: BaseException | None = exc
    for _ in range(5):  # a bounded walk: causes may form a long chain
        if cause is None:
            break
        if str(cause):
            return f"{type(exc).__name__}: {cause}"
        cause = cause.__cause__ or cause.__context__
    return type(exc).__name__


def timer_deadline(now: float, timeout_s: float, slack_s: float) -> float:
    """When a timer of *timeout_s* set at loop time *now* fires.

    With no slack, exactly then. With slack, rounded up to the next whole second of the
    loop clock, but never more than *slack_s* late: what aiohttp does with timeouts of 5 s
    or more (its ``ClientTimeout(total=10)`` ends attempts 10.0 to 11.0 s after they
    start). The spec's "Per-attempt timeout 10 s" is met by such a client, and the test
    mode ``--timer-slack`` lets the project prove that the suite accepts it.
    """
    exact = now + timeout_s
    if slack_s <= 0:
        return exact
    return min(float(math.ceil(exact)), exact + slack_s)


async def finish_body(response: httpx.Response, deadline: float) -> None:
    """Read a small reply body to its end, so that its kept-alive connection can carry
    the next delivery to this target; then close the response. Never raises.

    Spec §6 judges by status alone, so the body is not needed: a body over
    ``DRAIN_MAX_BYTES``, or one not complete within ``DRAIN_S`` (or by the attempt's
    deadline), is left unread and its connection closed instead of reused. The status
    was already known, so draining never turns an answered attempt into a timeout.
    """
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout_at(min(deadline, loop.time() + DRAIN_S)):
            read = 0
            async for chunk in response.aiter_raw():
                read += len(chunk)
                if read > DRAIN_MAX_BYTES:
                    break
    except (TimeoutError, httpx.HTTPError, OSError):
        pass  # the connection is dropped, not reused; the attempt's result stands
    finally:
        try:
            await response.aclose()
        except (httpx.HTTPError, OSError):
            pass


async def send_attempt(
    client: httpx.AsyncClient,
    request: DeliveryRequest,
    *,
    timeout_s: float,
    timer_slack_s: float = 0.0,
    options: SendOptions | None = None,
) -> AttemptResult:
    """Send one attempt and describe its result; never raises for network failures."""
    options = options or SendOptions()
    if options.per_attempt is not None:
        request = options.per_attempt(request)
    if options.pretend_sent:
        return AttemptResult(n=request.attempt, at=timestamp_now(), status=200, ms=0, error=None)
    at = timestamp_now(form=options.timestamp_form)
    started = time.monotonic()
    answered: float | None = None
    status = 0
    error: str | None = None
    try:
        method, headers = "POST", build_headers(request, options)
        if options.rewrite is not None:
            method, headers = options.rewrite(method, headers, request)
        http_request = client.build_request(
            method,
            request.url,
            content=request.body,
            headers=headers,
            extensions={PINNED_ADDRESS_EXTENSION: request.address},
        )
        deadline = timer_deadline(asyncio.get_running_loop().time(), timeout_s, timer_slack_s)
        async with asyncio.timeout_at(deadline):
            response = await client.send(
                http_request, follow_redirects=options.follow_redirects, stream=True
            )
        answered = time.monotonic()
        await finish_body(response, deadline)
        status = response.status_code
        if 300 <= status < 400:
            error = f"target answered {status}; redirects are not followed"
        elif not 200 <= status < 300:
            error = f"target answered {status} (not 2xx)"
    except (TimeoutError, httpx.TimeoutException):
        status = options.timeout_status
        error = f"no response within {timeout_s:g} s"
    except httpx.HTTPError as exc:
        error = _described(exc)
    except OSError as exc:
        error = f"connection failed: {exc}"
    except Exception as exc:  # e.g. a URL httpx cannot send: a failed attempt, not a crash
        error = f"the attempt could not be sent: {type(exc).__name__}: {exc}"
    ms = int(((answered or time.monotonic()) - started) * 1000)
    ok: bool | None = None
    if options.counts_as_success is not None and status:
        ok = options.counts_as_success(status)
        error = None if ok else (error or f"target answered {status} (not counted as success)")
    return AttemptResult(n=request.attempt, at=at, status=status, ms=ms, error=error, ok=ok)
