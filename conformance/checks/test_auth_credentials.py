"""API-key authentication of /v1 requests (spec §4 "All /v1 endpoints take Authorization:
Bearer <API_KEY>", §5.1, §5.4, §7).

Every check runs on every /v1 operation of the OpenAPI document, against real resources
of the primary account (:class:`~conformance.judge.operations.OperationPaths`): a refusal only
means something where the same request with a good key is served, which
``test_v1_request_with_valid_key_is_served`` shows. The spec does not show the status
for a missing or invalid key (§7), so the MUST checks accept any 4xx refusal; that it is
401 is an interpretation (AUTH-STATUS-01) checked apart, so that it only warns.

The spec names the form a request carries (``Authorization: Bearer <API_KEY>``) but never
says that another credential is refused: only a request with no key, or with a key the
service never issued or has revoked, must be. The valid key in another form (AUTH-KEY-03)
and a console session in place of a key (AUTH-SESSION-01) are interpretations; on the
three endpoints the spec marks "API key allowed" a session is not judged at all.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from conformance.checks.low_limit import CHAIN_ROLES
from conformance.judge.asserts import assert_not_refused_for_auth, assert_refused, describe
from conformance.judge.operations import Operation, OperationPaths, operations
from conformance.run.fixtures.labs import Labs
from conformance.target.client import ApiClient
from conformance.target.profile import Profile

#: Every /v1 operation the spec states (extensions are not requirements).
V1_OPERATIONS = [pytest.param(op, id=op.param_id) for op in operations() if op.public]

#: The tier read: the cheapest /v1 request, for the checks that need only one.
TIER = "/v1/account/tier"


@pytest.fixture(scope="module")
def paths(labs: Labs) -> OperationPaths:
    """Real ids of the primary account for the operations' path parameters."""
    return labs.paths("auth-credentials")


def _send(api: ApiClient, paths: OperationPaths, op: Operation, **kwargs: Any) -> httpx.Response:
    """The operation's request with a valid body (a submit gets a minimal valid one)."""
    return api.request(op.method, paths.path(op), json=op.minimal_body(), **kwargs)


def _key_prefix(profile: Profile) -> str:
    """The service prefix (spec §2 "<KEY_PREFIX>_"), from the profile or the primary key."""
    if profile.key_prefix:
        return profile.key_prefix
    return profile.key("primary").key.reveal().partition("_")[0]


def _unknown_key(profile: Profile) -> str:
    """A key of the right shape that the service never issued (256 random bits)."""
    return f"{_key_prefix(profile)}_{secrets.token_urlsafe(32)}"


#: Requests that carry no API key (AUTH-KEY-01): the Authorization header each sends.
NO_KEY: dict[str, str | None] = {"no-header": None, "bearer-without-token": "Bearer"}


def _other_forms(profile: Profile) -> dict[str, str]:
    """Authorization values that carry the *valid* primary key in another form than the
    one the spec shows, "Bearer <key>" (§4, §5.1)."""
    key = profile.key("primary").key.reveal()
    basic = base64.b64encode(f"{key}:".encode()).decode("ascii")
    return {
        "basic-scheme": f"Basic {basic}",
        "bare-key": key,
        "token-scheme": f"Token {key}",
    }


OTHER_FORMS = ["basic-scheme", "bare-key", "token-scheme"]

#: The operations the spec marks "API key allowed" (§4): the key is one accepted
#: credential there, beside the console session that may be accepted too.
API_KEY_ALLOWED = frozenset(
    {
        ("GET", "/v1/generations/{id}/deliveries"),
        ("GET", "/v1/webhooks/{id}/deliveries"),
        ("POST", "/v1/webhooks/deliveries/{id}/redeliver"),
    }
)

#: The /v1 operations where the spec says nothing of another credential than the key.
KEY_ONLY_OPERATIONS = [
    pytest.param(op, id=op.param_id)
    for op in operations()
    if op.public and (op.method, op.path) not in API_KEY_ALLOWED
]


def _key_for(profile: Profile, op: Operation) -> str:
    """A usable key role holding the operation's scope (the primary key when it does)."""
    primary = profile.key("primary")
    if op.scope is None or primary.has_scope(op.scope):
        return "primary"
    holders = [k.role for k in profile.keys_with_scope(op.scope) if k.role not in CHAIN_ROLES]
    if not holders:
        pytest.skip(f"needs a key with {op.scope}: add one to the profile")
    return holders[0]


# -- MUST: refused (any 4xx) -----------------------------------------------------------


@pytest.mark.requirement("AUTH-KEY-01")
@pytest.mark.parametrize("form", list(NO_KEY))
@pytest.mark.parametrize("op", V1_OPERATIONS)
def test_v1_request_without_key_is_refused(
    api: ApiClient, paths: OperationPaths, op: Operation, form: str
) -> None:
    """A /v1 request that carries no API key (no Authorization header, or "Bearer" with
    no token) is refused with a 4xx status."""
    header = NO_KEY[form]
    headers = {} if header is None else {"Authorization": header}
    response = _send(api, paths, op, role="none", headers=headers)
    assert_refused(response, f"no API key ({form})")


@pytest.mark.requirement("AUTH-KEY-02")
@pytest.mark.parametrize("op", V1_OPERATIONS)
def test_v1_request_with_unknown_key_is_refused(
    api: ApiClient, profile: Profile, paths: OperationPaths, op: Operation
) -> None:
    """A /v1 request whose bearer token has the key shape but was never issued is refused."""
    response = _send(
        api, paths, op, role="none", headers={"Authorization": f"Bearer {_unknown_key(profile)}"}
    )
    assert_refused(response, "an unknown key of the right shape")


@pytest.mark.requirement("KEY-REVOKE-02")
@pytest.mark.parametrize("op", V1_OPERATIONS)
def test_v1_request_with_revoked_key_is_refused(
    api: ApiClient, profile: Profile, paths: OperationPaths, op: Operation
) -> None:
    """The profile's revoked key is refused on every /v1 operation."""
    if not profile.key("revoked").revoked:
        pytest.skip("needs a revoked key: set revoked = true in [keys.revoked]")
    response = _send(api, paths, op, role="revoked")
    assert_refused(response, "the revoked key")


@pytest.mark.requirement("AUTH-BEARER-01")
@pytest.mark.parametrize("op", V1_OPERATIONS)
def test_v1_request_with_valid_key_is_served(
    api: ApiClient, profile: Profile, paths: OperationPaths, op: Operation
) -> None:
    """A /v1 request with "Authorization: Bearer <key>" of a key holding the operation's
    scope is served (not 401/403, not 5xx)."""
    role = _key_for(profile, op)
    response = _send(api, paths, op, role=role)
    assert_not_refused_for_auth(response, f"the valid key {role!r}")


# -- INTERPRETATION: other credentials than "Bearer <key>" are refused --------------------


@pytest.mark.requirement("AUTH-KEY-03")
@pytest.mark.parametrize("form", OTHER_FORMS)
@pytest.mark.parametrize("op", V1_OPERATIONS)
def test_v1_request_with_key_in_other_authorization_form_is_refused(
    api: ApiClient, profile: Profile, paths: OperationPaths, op: Operation, form: str
) -> None:
    """A /v1 request whose Authorization header holds the valid key in another form than
    "Bearer <key>" is refused (an interpretation: the spec shows only that form)."""
    header = _other_forms(profile)[form]
    response = _send(api, paths, op, role="none", headers={"Authorization": header})
    assert_refused(response, f"the valid key in another form ({form})")


@pytest.mark.console
@pytest.mark.requirement("AUTH-SESSION-01")
@pytest.mark.parametrize("op", KEY_ONLY_OPERATIONS)
def test_v1_request_with_console_session_token_is_refused(
    api: ApiClient, paths: OperationPaths, op: Operation
) -> None:
    """A /v1 operation not marked "API key allowed" refuses a valid console session token
    sent instead of a key (an interpretation: the spec never says a session is refused)."""
    response = _send(api, paths, op, role="none", session="primary")
    assert_refused(response, "the primary console session token (a JWT)")


# -- INTERPRETATION: the status is 401 -------------------------------------------------


def _invalid_credentials(
    api: ApiClient, profile: Profile
) -> dict[str, Callable[[ApiClient, OperationPaths, Operation], httpx.Response]]:
    """Each kind of invalid credential, as a way to send an operation with it."""

    def with_header(value: str) -> Callable[[ApiClient, OperationPaths, Operation], httpx.Response]:
        return lambda a, p, o: _send(a, p, o, role="none", headers={"Authorization": value})

    kinds: dict[str, Callable[[ApiClient, OperationPaths, Operation], httpx.Response]] = {
        "missing": lambda a, p, o: _send(a, p, o, role="none"),
        "bearer-without-token": with_header("Bearer"),
        "unknown-key": with_header(f"Bearer {_unknown_key(profile)}"),
    }
    for form, value in _other_forms(profile).items():
        kinds[form] = with_header(value)
    if "revoked" in profile.keys and profile.keys["revoked"].revoked:
        kinds["revoked-key"] = lambda a, p, o: _send(a, p, o, role="revoked")
    return kinds


@pytest.mark.requirement("AUTH-STATUS-01")
@pytest.mark.parametrize("op", V1_OPERATIONS)
def test_v1_request_refused_for_its_key_returns_401(
    api: ApiClient, profile: Profile, paths: OperationPaths, op: Operation
) -> None:
    """A request refused for a missing, malformed, unknown or revoked key gets 401.

    Only refusals are judged here: whether such a request is refused at all is judged by
    the checks above, each for its own credential.
    """
    seen = {kind: send(api, paths, op) for kind, send in _invalid_credentials(api, profile).items()}
    wrong = {
        kind: describe(response)
        for kind, response in seen.items()
        if response.status_code != 401 and not 200 <= response.status_code < 400
    }
    assert not wrong, (
        f"AUTH-STATUS-01: {op.method} {op.path}: expected refusals of an invalid key with "
        f"401; saw {wrong}"
    )


@pytest.mark.requirement("KEY-REVOKE-03")
def test_revoked_key_is_refused_with_status_of_unknown_key(
    api: ApiClient, profile: Profile
) -> None:
    """A revoked key gets the same status as a key the service never issued."""
    if not profile.key("revoked").revoked:
        pytest.skip("needs a revoked key: set revoked = true in [keys.revoked]")
    revoked = api.request("GET", TIER, role="revoked")
    unknown = api.request(
        "GET", TIER, role="none", headers={"Authorization": f"Bearer {_unknown_key(profile)}"}
    )
    assert revoked.status_code == unknown.status_code, (
        f"KEY-REVOKE-03: expected the revoked key to be refused like an unknown key; "
        f"revoked: {describe(revoked)}, unknown: {describe(unknown)}"
    )


@pytest.mark.requirement("AUTH-KEY-04")
def test_v1_bearer_scheme_in_lower_case_is_accepted(api: ApiClient, profile: Profile) -> None:
    """ "bearer <key>" (scheme in lower case, RFC 9110 §11.1) is served like "Bearer <key>"."""
    key = profile.key("primary").key.reveal()
    response = api.request("GET", TIER, role="none", headers={"Authorization": f"bearer {key}"})
    assert_not_refused_for_auth(response, 'the scheme spelled "bearer"')


@pytest.mark.requirement("AUTH-KEY-05")
@pytest.mark.parametrize("carrier", ["query-api_key", "query-key", "cookie"])
def test_v1_key_outside_authorization_header_is_refused(
    api: ApiClient, profile: Profile, carrier: str
) -> None:
    """A valid key in a query parameter or a cookie, with no Authorization header, is
    refused like a request without a key."""
    key = profile.key("primary").key.reveal()
    if carrier == "cookie":
        response = api.request("GET", TIER, role="none", headers={"Cookie": f"api_key={key}"})
    else:
        name = carrier.removeprefix("query-")
        response = api.request("GET", TIER, role="none", params={name: key})
    assert_refused(response, f"the primary key as {carrier} only")
