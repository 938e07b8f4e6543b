"""The suite's HTTP client: thin, bounded, and recording every exchange redacted.

Checks send the request under test by hand through :meth:`ApiClient.request`: the
exact method, path, headers and body, so that a failure shows exactly what was sent;
helpers only set up. The client only adds what every request needs: the base URL, the API
key of a role (spec §5.1) or a console session token (spec §5.5, sent as the profile's
adapter declares: ``Authorization: Bearer`` or a cookie), timeouts, a count bound,
and patience with 429 (spec §7: wait Retry-After, back off exponentially).

A target may be broken in any way, so every exchange is bounded: it must end within the
profile's ``[timing] request_timeout_seconds`` (to the last byte: a target that drips its
answer is cut off, not waited for), its body is read into memory only up to
:data:`MAX_RESPONSE_BYTES`, a Retry-After is honoured only up to :data:`MAX_429_SECONDS`,
and redirects are never followed. Each bound, when hit, raises an ``httpx`` error that
names the misbehaviour, so the check reports it instead of hanging.

:class:`Recorder` is the single place where exchanges are recorded, and it redacts on
the way in: an :class:`Exchange` never holds a secret, so reports built from it cannot
leak one.
"""

from __future__ import annotations

import email.utils
import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from functools import cache
from typing import Any, ClassVar, Final

import httpx
import pytest

from conformance.evidence import Exchange
from conformance.secrets import Redactor, Secret, redact_logs
from conformance.target.budget import RunBudget
from conformance.target.profile import CapabilityMissing, Profile

__all__ = [
    "EXCHANGES_KEY",
    "ApiClient",
    "BudgetExceeded",
    "Recorder",
    "ResponseTooLarge",
    "parse_retry_after",
]

#: Connecting (and waiting for a pooled connection) takes at most this long.
CONNECT_SECONDS: Final = 5.0
#: The most of one answer's body read into memory: far above any answer of the spec
#: (generation records, lists, errors), far below what would exhaust a CI runner.
MAX_RESPONSE_BYTES: Final = 16 * 1024 * 1024
#: Bodies longer than this are cut in the record (reports stay readable and bounded).
MAX_RECORDED_BODY: Final = 64 * 1024
#: Patience with 429: at most this many waits, and at most this long in total.
MAX_429_WAITS: Final = 3
MAX_429_SECONDS: Final = 65.0
#: Requests one client may send (one client lives for one check).
DEFAULT_BUDGET: Final = 500


class BudgetExceeded(RuntimeError):
    """A check sent more requests than its budget: a harness error, never an IUT failure."""


class ResponseTooLarge(httpx.ReadError):
    """The target's answer is longer than :data:`MAX_RESPONSE_BYTES` (the rest is unread)."""


def _named_timeout(exc: httpx.TimeoutException, request: httpx.Request) -> httpx.TimeoutException:
    """*exc* again, saying which bound the target did not meet (httpx says "timed out")."""
    seconds = max((t for t in request.extensions.get("timeout", {}).values() if t), default=0)
    return type(exc)(
        f"the target did not answer within {seconds:g} s ([timing] request_timeout_seconds): "
        f"{type(exc).__name__}: {exc}",
        request=request,
    )


@cache
def _tls_context() -> ssl.SSLContext:
    """The TLS settings of every client of the process, made once: what httpx makes for each
    client by default (certifi's CA bundle, nothing from the environment), which costs about
    18 ms of CPU to load, and a run makes a client per check."""
    return httpx.create_ssl_context(trust_env=False)


def _timeout(seconds: float) -> httpx.Timeout:
    """Every phase of a request bounded by *seconds* (connecting by at most 5 s)."""
    connect = min(CONNECT_SECONDS, seconds)
    return httpx.Timeout(seconds, connect=connect, pool=connect)


class _BoundedBody(httpx.SyncByteStream):
    """An answer's body that ends in an error once it passes *limit* bytes or *deadline*.

    httpx's read timeout bounds the wait for each chunk, not the whole body: a target that
    sends one byte a second would hold a check forever without the deadline.
    """

    def __init__(
        self, inner: httpx.SyncByteStream, request: httpx.Request, deadline: float, limit: int
    ) -> None:
        self._inner = inner
        self._request = request
        self._deadline = deadline
        self._limit = limit

    def __iter__(self) -> Iterator[bytes]:
        received = 0
        chunks = iter(self._inner)
        while True:
            try:
                chunk = next(chunks)
            except StopIteration:
                return
            except httpx.TimeoutException as exc:
                raise _named_timeout(exc, self._request) from exc
            received += len(chunk)
            if received > self._limit:
                raise ResponseTooLarge(
                    f"the answer's body passed {self._limit} bytes, the most the suite "
                    "reads of one answer (the rest was not read)",
                    request=self._request,
                )
            if time.monotonic() > self._deadline:
                raise httpx.ReadTimeout(
                    f"the answer was not complete within the request timeout "
                    f"([timing] request_timeout_seconds): {received} bytes of its body "
                    "arrived by then (a target that drips its answer)",
                    request=self._request,
                )
            yield chunk

    def close(self) -> None:
        self._inner.close()


class _BoundedTransport(httpx.BaseTransport):
    """Wraps a transport so that every answer is bounded in size and in time."""

    def __init__(self, inner: httpx.BaseTransport, limit: int = MAX_RESPONSE_BYTES) -> None:
        self._inner = inner
        self._limit = limit

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = request.extensions.get("timeout", {})
        seconds = max((t for t in timeouts.values() if t is not None), default=None)
        deadline = time.monotonic() + seconds if seconds is not None else float("inf")
        try:
            response = self._inner.handle_request(request)
        except httpx.TimeoutException as exc:
            raise _named_timeout(exc, request) from exc
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self._limit:
            response.close()
            raise ResponseTooLarge(
                f"the answer declares a body of {declared} bytes (Content-Length), more "
                f"than the {self._limit} bytes the suite reads of one answer",
                request=request,
            )
        assert isinstance(response.stream, httpx.SyncByteStream)
        response.stream = _BoundedBody(response.stream, request, deadline, self._limit)
        return response

    def close(self) -> None:
        self._inner.close()


#: Where the plugin finds the exchanges a check recorded (``item.stash[EXCHANGES_KEY]``).
EXCHANGES_KEY: Final = pytest.StashKey[list[Exchange]]()


class Recorder:
    """Records exchanges, redacted by *redactor*: the one place where that happens."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        redact_logs(redactor)  # httpx logs request URLs at INFO
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()

    def _body(self, content: bytes, content_type: str) -> str:
        if not content:
            return ""
        if "json" in content_type.lower():
            try:
                # Learn secrets shown once (a created key, a whsec_ secret) before masking.
                self.redactor.learn_from_json(json.loads(content))
            except ValueError:
                pass
        cut = content[:MAX_RECORDED_BODY]
        text = self.redactor.bytes(cut).decode("utf-8", errors="replace")
        if len(content) > MAX_RECORDED_BODY:
            text += f"\n[... {len(content) - MAX_RECORDED_BODY} more bytes not recorded]"
        return text

    def record(
        self,
        request: httpx.Request,
        response: httpx.Response | None,
        *,
        elapsed_ms: float,
        started_at: float,
        error: BaseException | None = None,
    ) -> Exchange:
        """Redact and keep one exchange (a response, or the error that replaced it)."""
        redact = self.redactor
        request_body = self._body(
            request.content if _has_content(request) else b"",
            request.headers.get("content-type", ""),
        )
        response_body = ""
        response_headers: tuple[tuple[str, str], ...] = ()
        if response is not None:
            response_body = self._body(response.content, response.headers.get("content-type", ""))
            response_headers = tuple(redact.headers(response.headers.multi_items()))
        exchange = Exchange(
            method=request.method,
            url=redact.text(str(request.url)),
            request_headers=tuple(redact.headers(request.headers.multi_items())),
            request_body=request_body,
            status=None if response is None else response.status_code,
            response_headers=response_headers,
            response_body=response_body,
            elapsed_ms=round(elapsed_ms, 1),
            error=None if error is None else redact.text(f"{type(error).__name__}: {error}"),
            started_at=started_at,
        )
        with self._lock:
            self.exchanges.append(exchange)
        return exchange


def _has_content(request: httpx.Request) -> bool:
    try:
        request.content  # noqa: B018 (raises when the body is a stream not read yet)
    except httpx.RequestNotRead:
        return False
    return True


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After value (RFC 9110: seconds or an HTTP-date)."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class ApiClient:
    """Sends requests to the IUT of *profile*, recording every exchange in *recorder*.

    ``role`` picks the API key (``None``: the ``primary`` role; ``"none"``: no
    Authorization header); ``session`` picks a console session token instead. Explicit
    *headers* override both (so a check can send a malformed Authorization header).
    """

    #: The run's budget (``run --budget-requests``, ``--budget-credits``), set by the
    #: plugin for the whole process: every client spends from it, wherever a check or
    #: helper made it, since every request any of them sends is the run's traffic.
    run_budget: ClassVar[RunBudget | None] = None

    def __init__(
        self,
        profile: Profile,
        recorder: Recorder,
        *,
        budget: int = DEFAULT_BUDGET,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.profile = profile
        self.recorder = recorder
        self.budget = budget
        self.sent = 0
        self._sleep = sleep
        self._session_tokens: dict[str, Secret] = {}
        self._lock = threading.Lock()
        self._timeout = _timeout(profile.timing.request_timeout_seconds)
        self._http = httpx.Client(
            base_url=profile.base_url,
            timeout=self._timeout,
            # never a proxy from the environment (the loopback rule)
            transport=_BoundedTransport(
                transport or httpx.HTTPTransport(verify=_tls_context(), trust_env=False)
            ),
            follow_redirects=False,  # a check sees the redirect itself
            trust_env=False,  # never a proxy from the environment (the loopback rule)
        )

    # -- credentials -----------------------------------------------------------------

    def set_session_token(self, name: str, token: Secret) -> None:
        """Use *token* for ``session=name`` (e.g. after the adapter logged in)."""
        self.recorder.redactor.add(token, label=f"sessions.{name}.token")
        self._session_tokens[name] = token

    def session_token(self, name: str) -> Secret | None:
        """The token ``session=name`` sends: one set by a login, else the profile's."""
        return self._session_tokens.get(name) or self.profile.session(name).token

    def _credentials(self, role: str | None, session: str | None) -> dict[str, str]:
        """The headers of the credential asked for: the role's API key, or the console
        session's token the way the profile's adapter declares (Bearer or a cookie)."""
        if session is not None:
            if role not in (None, "none"):
                raise ValueError("give role or session, not both")
            token = self.session_token(session)
            if token is None:
                raise CapabilityMissing(
                    f"a token for console session {session!r}",
                    f"set sessions.{session}.token (or token_env) in the profile",
                )
            return self.profile.adapter.credential.headers(token.reveal())
        if role == "none":
            return {}
        key = self.profile.key(role or "primary")
        return {"Authorization": f"Bearer {key.key.reveal()}"}

    # -- requests --------------------------------------------------------------------

    def _send_once(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            if self.sent >= self.budget:
                raise BudgetExceeded(
                    f"this check's budget of {self.budget} requests is spent; "
                    "a check that needs more must say so (ApiClient(budget=...))"
                )
            budget = ApiClient.run_budget
            charge = 0 if budget is None else budget.charge_of(request.method, request.url.path)
            if budget is not None:
                budget.spend(charge)
            self.sent += 1
        started_at = time.time()
        start = time.monotonic()
        try:
            response = self._http.send(request)
            response.read()
            if budget is not None and not 200 <= response.status_code < 300:
                budget.refund(charge)  # a refused submit spends nothing (spec §4)
            # Only what a check asks for is a credential: a cookie set by one answer is
            # never sent with the next request.
            self._http.cookies.clear()
        except httpx.HTTPError as exc:
            self.recorder.record(
                request,
                None,
                elapsed_ms=(time.monotonic() - start) * 1000,
                started_at=started_at,
                error=exc,
            )
            raise
        # Secrets where the adapter declaration points (a created key under a field name
        # the redactor does not know, a session cookie) are learned before recording.
        for label, value in self.profile.adapter.secrets_in(
            request.method,
            request.url.path,
            response.content,
            response.headers.get_list("set-cookie"),
        ):
            self.recorder.redactor.add(value, label=label)
        self.recorder.record(
            request, response, elapsed_ms=(time.monotonic() - start) * 1000, started_at=started_at
        )
        return response

    def request(
        self,
        method: str,
        path: str,
        *,
        role: str | None = None,
        session: str | None = None,
        json: Any = None,
        content: bytes | str | None = None,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str | int] | None = None,
        patient: bool = True,
        timeout: float | None = None,
    ) -> httpx.Response:
        """Send one request (repeated on 429 when *patient*) and return the last response.

        With *patient* (the default) a 429 is waited out as spec §7 tells clients:
        Retry-After seconds, doubling for repeated 429s, at most 3 waits and 65 s in
        total; after that the 429 is returned. Checks of rate limits pass
        ``patient=False``.
        """
        if not path.startswith("/"):
            raise ValueError(f"path must start with '/': {path!r} (the base URL is the profile's)")
        merged = self._credentials(role, session)
        merged.update(headers or {})
        waited = 0.0
        for attempt in range(MAX_429_WAITS + 1):
            request = self._http.build_request(
                method,
                path,
                json=json,
                content=content,
                headers=merged,
                params=params,
                timeout=self._timeout if timeout is None else _timeout(timeout),
            )
            response = self._send_once(request)
            if response.status_code != 429 or not patient or attempt == MAX_429_WAITS:
                return response
            retry_after = parse_retry_after(response.headers.get("retry-after"))
            wait = max(retry_after if retry_after is not None else 1.0, float(2**attempt))
            if waited + wait > MAX_429_SECONDS:
                return response
            self._sleep(wait)
            waited += wait
        raise AssertionError("unreachable: the loop returns")  # pragma: no cover

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("DELETE", path, **kwargs)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
