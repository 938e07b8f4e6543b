"""Assertion helpers named after spec concepts, shared by the checks.

Each helper judges one spec concept and fails through :func:`conformance.findings.fail`,
which prefixes the message with the rule broken: the *rule* argument (one of the ids the
running check cites) or, when it is None, every id the check cites. The message says what
was expected and what was seen, so a failure reads on its own in a report. The helpers
only judge responses and what arrives at a delivery target; the checks send the
requests themselves. Response bodies are quoted short (the plugin redacts failure text,
and the recorder keeps the full exchange).

Add a helper here when a second check needs the same judgement: one piece of code per
idea.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Final

import httpx

from conformance.findings import fail
from conformance.observe.receiver import Delivery, DeliveryTimeout, Endpoint
from conformance.observe.timing import delivery_deadline
from conformance.observe.waits import wait_for_event
from conformance.target.adapter_declaration import DeclaredOperation, Listed
from conformance.target.client import ApiClient
from conformance.target.profile import CapabilityMissing, Profile
from conformance.target.setup import SetupFailed

__all__ = [
    "AUTH_REFUSALS",
    "DeliveryTarget",
    "accepted_generation_id",
    "answer_or_fail",
    "assert_delivered",
    "assert_delivery_list",
    "assert_not_refused_for_auth",
    "assert_refused",
    "assert_status",
    "assert_status_in",
    "assert_webhook_list",
    "credits_used_today",
    "describe",
    "error_detail",
    "generation_id_of",
    "is_json_integer",
    "json_object",
    "json_values",
    "nested_values",
    "record_in_read",
]

#: The statuses that mean "not authenticated" or "not allowed" (spec §5.3, §7).
AUTH_REFUSALS: Final = frozenset({401, 403})

#: How much of a response body a message quotes.
_QUOTED: Final = 200


def describe(response: httpx.Response) -> str:
    """``401 {"detail": "..."}``: the status and the start of the body, for messages."""
    text = response.text
    body = text[:_QUOTED] + ("..." if len(text) > _QUOTED else "")
    return f"{response.status_code} {body!r}" if body else str(response.status_code)


def _request_line(response: httpx.Response) -> str:
    request = response.request
    return f"{request.method} {request.url.path}"


def answer_or_fail(
    api: ApiClient, what: str, method: str, path: str, **request: Any
) -> httpx.Response:
    """The answer to a request whose answer the check judges. No answer at all (the
    connection ended, or nothing came within the request timeout) fails the check too,
    with *what* (the request and what was expected) in the message: where any answer is
    judged, none is a finding, not a broken check."""
    try:
        return api.request(method, path, **request)
    except httpx.TransportError as error:
        fail(f"{what}: no answer came ({error!r})")


def assert_status(response: httpx.Response, expected: int, rule: str | None = None) -> None:
    """The response has exactly the status *expected* (a status the spec states)."""
    if response.status_code != expected:
        fail(f"{_request_line(response)}: expected {expected}, saw {describe(response)}", rule=rule)


def assert_status_in(
    response: httpx.Response, expected: Collection[int], rule: str | None = None
) -> None:
    """The response status is one of *expected* (e.g. 401 or 403 for a refusal)."""
    shown = " or ".join(str(status) for status in sorted(expected))
    if response.status_code not in expected:
        fail(f"{_request_line(response)}: expected {shown}, saw {describe(response)}", rule=rule)


def assert_refused(response: httpx.Response, why: str, *, rule: str | None = None) -> None:
    """The request (sent with *why*: "no API key") is refused: a 4xx status, neither
    served (2xx, 3xx) nor a server error.

    For refusals whose status the spec does not show (an invalid API key, §7): any 4xx
    refuses; a 5xx is not a refusal but a failure to handle the request.
    """
    if not 400 <= response.status_code < 500:
        fail(
            f"{_request_line(response)} with {why}: expected a 4xx refusal, "
            f"saw {describe(response)}",
            rule=rule,
        )


def assert_not_refused_for_auth(
    response: httpx.Response, why: str, *, rule: str | None = None
) -> None:
    """The request (sent with *why*: "the primary key") is served as far as credentials
    go: not 401/403, and not a 5xx.

    Used where the request is valid for the key (in scope, well formed): any other 4xx
    (e.g. a validation detail the spec leaves unshown) says nothing about authentication,
    but a 5xx means the request was not served at all.
    """
    status = response.status_code
    if status in AUTH_REFUSALS or status >= 500:
        fail(
            f"{_request_line(response)} with {why}: expected to be served "
            f"(not 401/403, not 5xx), saw {describe(response)}",
            rule=rule,
        )


def is_json_integer(value: object) -> bool:
    """A JSON number without fraction, not a boolean (Python's bool is an int)."""
    return isinstance(value, int) and not isinstance(value, bool)


def json_object(response: httpx.Response) -> dict[str, Any] | None:
    """The response body when it is a JSON object; None otherwise (a check that needs a
    field of it judges the None)."""
    try:
        body: Any = response.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def error_detail(response: httpx.Response) -> object:
    """The ``detail`` of an error answer's JSON object (spec §7); None when there is none."""
    body = json_object(response)
    return body.get("detail") if body is not None else None


def generation_id_of(response: httpx.Response) -> object:
    """The ``id`` of a submit's JSON object answer (spec §4: the 202 carries the
    generation id); None when there is none."""
    body = json_object(response)
    return body.get("id") if body is not None else None


def accepted_generation_id(response: httpx.Response, rule: str | None = None) -> str:
    """The generation id an accepted submit's answer carries, as a string; a failure when
    it carries none (the status is the caller's to judge)."""
    generation_id = generation_id_of(response)
    if not isinstance(generation_id, str):
        fail(
            f"{_request_line(response)}: expected the accepted submit to carry the generation "
            f"id, saw {describe(response)}",
            rule=rule,
        )
    return generation_id


@dataclass(frozen=True)
class DeliveryTarget:
    """Where a check's generation delivers: a fresh endpoint on the suite's receiver, and
    the profile, whose ``[sandbox]`` and ``[timing]`` bound how soon an event arrives there
    (the ``delivery_target`` fixture)."""

    endpoint: Endpoint
    profile: Profile

    @property
    def url(self) -> str:
        """The endpoint's URL, for a submit's ``webhook.url`` or ``callback_url``."""
        return self.endpoint.url


def assert_delivered(
    target: DeliveryTarget, what: str, *, event: str | None = None, rule: str | None = None
) -> list[Delivery]:
    """An event of the generation *what* names (how it was submitted, or its id) arrives
    at *target* within the profile's delivery deadline: any event, or the *event* named
    (among the first arrivals: the spec does not order it beside others); the deliveries
    arrived. A failure names *what* and the deliveries that did arrive."""
    deadline = delivery_deadline(target.profile)
    try:
        if event is None:
            return target.endpoint.wait_for(1, deadline)
        return wait_for_event(target.endpoint, event, deadline)
    except DeliveryTimeout as missing:
        fail(f"{what}: expected {event or 'an event'} at the target: {missing}", rule=rule)


def json_values(response: httpx.Response) -> list[Any]:
    """Every value of a response's JSON body, nested ones included, the body itself first
    (none when the body is not JSON).

    How a check finds an id, a secret or a figure in a console answer whose payload the
    spec does not show (§4): wherever it sits, under whatever name.
    """
    try:
        body: Any = response.json()
    except ValueError:
        return []
    return nested_values(body)


def record_in_read(response: httpx.Response, generation_id: str) -> dict[str, Any] | None:
    """The generation record in a read: the JSON object whose id is *generation_id* (the
    body, or an object nested in it: spec §4 does not show the read body)."""
    for value in json_values(response):
        if isinstance(value, dict) and value.get("id") == generation_id:
            return value
    return None


def nested_values(document: Any) -> list[Any]:
    """Every value of a parsed JSON *document*, nested ones included, the document itself
    first (depth first, in document order)."""
    found: list[Any] = []
    pending: list[Any] = [document]
    while pending:
        value = pending.pop()
        found.append(value)
        if isinstance(value, dict):
            pending.extend(reversed(list(value.values())))
        elif isinstance(value, list):
            pending.extend(reversed(value))
    return found


def assert_webhook_list(
    response: httpx.Response, listing: DeclaredOperation, rule: str | None = None
) -> list[Listed]:
    """The webhook list answered with its expected status and an array where the profile's
    ``[adapter.list_webhooks]`` declaration (*listing*) points; returns its items (id,
    url, item).

    Console payloads are not shown (spec §4): undeclared, a JSON array or an object holding
    one under ``webhooks`` or ``data``, of items with ``id`` and ``url``, is accepted
    (CONSOLE-PAYLOAD-01).
    """
    if not listing.accepts(response.status_code):
        fail(
            f"{_request_line(response)}: expected {listing.expected}, saw {describe(response)}",
            rule=rule,
        )
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    items = listing.listed(body)
    if items is None:
        fail(
            f"expected a list of webhooks at {listing.where('list')}, saw {describe(response)}",
            rule=rule,
        )
    return items


def credits_used_today(api: ApiClient, role: str = "primary") -> int:
    """The credits used today by the account of *role*'s key, read through the profile's
    ``[usage]`` figure (spec §1: generations spend credits; how usage is shown is not).

    A profile without ``[usage]`` is a skip (:class:`CapabilityMissing`); a usage read
    that does not give an integer is a set-up error (:class:`SetupFailed`), not a verdict.
    """
    usage = api.profile.usage
    if usage is None:
        raise CapabilityMissing(
            "usage",
            "add a [usage] table (path, field) naming how the IUT shows credits used today",
        )
    response = api.request("GET", usage.path, role=role)
    if response.status_code != 200:
        raise SetupFailed(f"setup: GET {usage.path} answered {describe(response)}")
    body = json_object(response)
    value = body.get(usage.field) if body is not None else None
    if not isinstance(value, int) or isinstance(value, bool):
        raise SetupFailed(f"setup: no integer {usage.field!r} in {describe(response)}")
    return value


def assert_delivery_list(
    response: httpx.Response, rule: str | None = None
) -> tuple[list[dict[str, Any]], int]:
    """A delivery list (spec §2: an object with ``deliveries``, an array of delivery
    records, and ``total``, an integer), served with a 2xx; returns (records, total)."""
    if not 200 <= response.status_code < 300:
        fail(
            f"{_request_line(response)}: expected a 2xx delivery list, saw {describe(response)}",
            rule=rule,
        )
    body = json_object(response)
    records = body.get("deliveries") if body is not None else None
    total = body.get("total") if body is not None else None
    if not (isinstance(records, list) and all(isinstance(r, dict) for r in records)):
        fail(
            f"expected an object with deliveries (an array of records), saw {describe(response)}",
            rule=rule,
        )
    if type(total) is not int:
        fail(f"expected total, an integer, saw {total!r} in {describe(response)}", rule=rule)
    return records, total
