"""Console paths and their credentials (spec §4 "Console endpoints (signed-in session only;
an API key cannot call them)", §5.5 "Console-only operations need a signed-in session").

Every console operation of the OpenAPI document is sent with an API key, with nothing,
with tokens that are not valid session JWTs, and with the primary session. The webhook
operations are sent as the profile's adapter declares them (path and body; the session
token as a Bearer token or a cookie). Operations on a webhook run against a real
registered webhook of the primary account, created with the session for the check and
deleted after it, so a refusal is not just a 404. The refusal status is not shown: the
MUST checks accept any 4xx; 401 or 403 for an API key is an interpretation
(CONSOLE-KEY-06).
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Iterator

import httpx
import pytest

from conformance.judge.asserts import (
    assert_not_refused_for_auth,
    assert_refused,
    assert_status_in,
    describe,
    json_values,
)
from conformance.judge.operations import Operation, operations
from conformance.observe.receiver import Endpoint
from conformance.target.adapter_declaration import SPEC_WEBHOOK_OPERATIONS
from conformance.target.adapters import Adapter, console_request, declared
from conformance.target.client import ApiClient
from conformance.target.profile import Profile
from conformance.target.setup import SetupFailed
from conformance.target.webhooks import delete_webhook, register_webhook

#: The console operations the spec states (extensions are the reference's own).
CONSOLE_OPERATIONS = [op for op in operations() if op.console]

#: The adapter declaration's name of each console webhook operation of the spec.
_DECLARED = {(spec["method"], spec["path"]): name for name, spec in SPEC_WEBHOOK_OPERATIONS.items()}

#: Per operation: the requirement "an API key cannot call it" (spec §4 console table).
_KEY_REFUSED = {
    ("POST", "/api/webhooks"): "CONSOLE-KEY-01",
    ("GET", "/api/webhooks"): "CONSOLE-KEY-02",
    ("POST", "/api/webhooks/{id}/test"): "CONSOLE-KEY-03",
    ("DELETE", "/api/webhooks/{id}"): "CONSOLE-KEY-04",
    ("GET", "/api/tier"): "CONSOLE-KEY-05",
}


def _key_refused_cases(*, cite: bool = True) -> list[object]:
    """The console operations with an "API key refused" requirement; *cite* adds it to
    each case (a check of another requirement, e.g. an interpretation, cites its own)."""
    cases: list[object] = []
    for op in CONSOLE_OPERATIONS:
        requirement = _KEY_REFUSED.get((op.method, op.path))
        if requirement is None:
            continue  # an operation the catalog has no entry for yet: no claim made
        marks = [pytest.mark.requirement(requirement)] if cite else []
        if "{" in op.path:
            marks.append(pytest.mark.console)  # needs a real webhook, made with a session
        cases.append(pytest.param(op, id=op.param_id, marks=marks))
    return cases


def _by_op(*, console_if_id: bool) -> list[object]:
    return [
        pytest.param(
            op,
            id=op.param_id,
            marks=[pytest.mark.console] if console_if_id and "{" in op.path else [],
        )
        for op in CONSOLE_OPERATIONS
    ]


# -- set-up helpers ---------------------------------------------------------------------


@pytest.fixture
def webhook(api: ApiClient, endpoint: Endpoint, profile: Profile) -> Iterator[str]:
    """A registered webhook of the primary account (its id), pointed at the check's
    endpoint; deleted after the check. Without a console session: a made-up id."""
    if "primary" not in profile.sessions:
        yield "wh_conformance_unknown"
        return
    created = register_webhook(api, endpoint.url)
    yield created.id
    delete_webhook(api, created)


def _send(
    api: ApiClient,
    request: pytest.FixtureRequest,
    op: Operation,
    endpoint: Endpoint,
    *,
    role: str | None,
    session: str | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """Send *op* with these credentials: a webhook operation as the profile's adapter
    declares it (a creation gets a valid body, the receiver's URL; an id is a fresh
    webhook of the primary account), any other one (GET /api/tier) as the spec shows it."""
    name = _DECLARED.get((op.method, op.path))
    if name is None:
        return api.request(op.method, op.path, role=role, session=session, headers=headers)
    webhook_id = request.getfixturevalue("webhook") if "{" in op.path else None
    return console_request(
        api, name, role=role, session=session, headers=headers, id=webhook_id, url=endpoint.url
    )


def _listed(api: ApiClient) -> list[object]:
    """Every value in the primary account's webhook list, read with the session (the
    declared list request): the list's payload is not shown (§4), so an id or a URL
    counts as listed wherever it appears. A list that cannot be read is a set-up error,
    not a verdict."""
    response = console_request(api, "list_webhooks", session="primary")
    if not 200 <= response.status_code < 300:
        raise SetupFailed(f"setup: the webhook list answered {describe(response)}")
    return json_values(response)


def _cleanup_created(api: ApiClient, response: httpx.Response) -> None:
    """A webhook wrongly created by a refused credential is deleted with the session."""
    create = declared(api.profile, "create_webhook")
    if not create.matches(response.request.method, response.request.url.path):
        return
    if 200 <= response.status_code < 300 and "primary" in api.profile.sessions:
        try:
            webhook_id = create.read_id(response.json())
        except ValueError:
            return
        if webhook_id is not None:
            console_request(api, "delete_webhook", session="primary", id=webhook_id)


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _invalid_tokens(profile: Profile) -> dict[str, str]:
    """Bearer values that are not valid session JWTs; the forged ones keep the primary
    session's claims, so only the signature (or its absence) is wrong."""
    tokens = {"not-a-jwt": "not-a-session-token"}
    session = profile.sessions.get("primary")
    if session is not None and session.token is not None:
        header, _, rest = session.token.reveal().partition(".")
        payload = rest.partition(".")[0]
        tokens["bad-signature"] = f"{header}.{payload}.{_b64url(secrets.token_bytes(32))}"
        none_header = _b64url(json.dumps({"alg": "none", "typ": "JWT"}).encode())
        tokens["alg-none"] = f"{none_header}.{payload}."
    return tokens


INVALID_TOKEN_FORMS = ["not-a-jwt", "bad-signature", "alg-none"]


# -- an API key cannot call console operations ------------------------------------------


@pytest.mark.parametrize("op", _key_refused_cases())
def test_console_operation_with_api_key_is_refused(
    api: ApiClient, endpoint: Endpoint, request: pytest.FixtureRequest, op: Operation
) -> None:
    """A console operation called with a valid API key (no session) is refused, with no
    effect (no webhook created, nothing sent, nothing deleted)."""
    requirement = _KEY_REFUSED[(op.method, op.path)]
    response = _send(api, request, op, endpoint, role=None)
    try:
        assert_refused(response, "the primary API key and no session", rule=requirement)
    finally:
        _cleanup_created(api, response)
    if "primary" not in api.profile.sessions:
        return  # the effects are read with a session
    name = _DECLARED.get((op.method, op.path))
    if name == "create_webhook":
        assert endpoint.url not in _listed(api), (
            f"{requirement}: expected no webhook at {endpoint.url} after the refused "
            "create; the console lists one"
        )
    elif name == "test_webhook":
        endpoint.assert_quiet(1.0)  # a refused test sends nothing (CONSOLE-KEY-03)
    elif name == "delete_webhook":
        assert request.getfixturevalue("webhook") in _listed(api), (
            f"{requirement}: expected the webhook to survive the refused delete; "
            "the console no longer lists it"
        )


@pytest.mark.parametrize("op", _key_refused_cases(cite=False))
@pytest.mark.requirement("CONSOLE-KEY-06")
def test_console_operation_with_api_key_returns_401_or_403(
    api: ApiClient, endpoint: Endpoint, request: pytest.FixtureRequest, op: Operation
) -> None:
    """A console operation refuses an API key with 401 or 403."""
    response = _send(api, request, op, endpoint, role=None)
    try:
        assert_status_in(response, {401, 403})
    finally:
        _cleanup_created(api, response)


# -- a signed-in session is needed ------------------------------------------------------


@pytest.mark.requirement("CONSOLE-SESSION-01")
@pytest.mark.parametrize("op", _by_op(console_if_id=False))
def test_console_operation_without_credentials_is_refused(
    api: ApiClient, endpoint: Endpoint, request: pytest.FixtureRequest, op: Operation
) -> None:
    """A console operation with no credentials (no Authorization header, no cookie) is
    refused."""
    response = _send(api, request, op, endpoint, role="none")
    try:
        assert_refused(response, "no credentials")
    finally:
        _cleanup_created(api, response)


@pytest.mark.requirement("CONSOLE-SESSION-02")
@pytest.mark.parametrize("form", INVALID_TOKEN_FORMS)
@pytest.mark.parametrize("op", _by_op(console_if_id=False))
def test_console_operation_with_invalid_session_token_is_refused(
    api: ApiClient,
    profile: Profile,
    endpoint: Endpoint,
    request: pytest.FixtureRequest,
    op: Operation,
    form: str,
) -> None:
    """A console operation with a token that is not a valid session JWT (garbage, the
    primary session's claims with a forged signature, or with alg "none") is refused."""
    tokens = _invalid_tokens(profile)
    if form not in tokens:
        pytest.skip("needs console: set sessions.primary.token in the profile (to forge from)")
    credential = profile.adapter.credential
    response = _send(
        api, request, op, endpoint, role="none", headers=credential.headers(tokens[form])
    )
    try:
        assert_refused(response, f"an invalid session token ({form})")
    finally:
        _cleanup_created(api, response)


@pytest.mark.console
@pytest.mark.requirement("CONSOLE-SESSION-03")
@pytest.mark.parametrize("op", _by_op(console_if_id=True))
def test_console_operation_with_session_is_served(
    api: ApiClient, endpoint: Endpoint, request: pytest.FixtureRequest, op: Operation
) -> None:
    """A console operation with the primary account's session is served."""
    response = _send(api, request, op, endpoint, role="none", session="primary")
    try:
        assert_not_refused_for_auth(response, "the primary session")
        assert 200 <= response.status_code < 300, (
            f"CONSOLE-SESSION-03: {op.method} {op.path} with the primary session: expected "
            f"2xx, saw {describe(response)}"
        )
    finally:
        _cleanup_created(api, response)


@pytest.mark.console
@pytest.mark.requirement("CONSOLE-LOGIN-01")
def test_console_session_from_login_is_served(api: ApiClient, adapter: Adapter) -> None:
    """A session obtained through the declared login, sent as the profile declares (the
    reference's preset: "Authorization: Bearer <JWT>"; a cookie where declared), is
    served on a console path."""
    adapter.login("primary")  # skips without sessions.primary email and password
    response = api.request("GET", "/api/tier", role="none", session="primary")
    assert_not_refused_for_auth(response, "the session from the login")
