"""The scope matrix: every key the profile declares by every scoped endpoint (spec §4 "Scope:"
lines, §5.2, §5.3 "A call to an endpoint outside the key's scopes returns 403", §7).

Cases are generated from the profile at collection, so the matrix follows the keys a
target declares: a key lacking an endpoint's scope must get 403; a key holding it must
not be refused (not 401/403). Keys with the same scopes prove the same thing, so the
"inside" half sends one request per distinct scope set (submits spend credits). Two
roles stay out: ``low-limit`` (its rate and credit budget belongs to the rate checks)
and, for the "inside" half, ``restricted-models`` (its tier may refuse a model
category, a refusal that has nothing to do with scopes). The audio and agent endpoints
are the reference's extensions (their paths are not shown, §4 Other operations), so
their cases need the adapter and only warn. Last, a refusal for scope is looked behind:
the target the refused submit named gets no delivery.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import pytest

from conformance.checks.low_limit import CHAIN_ROLES
from conformance.findings import fail
from conformance.judge.asserts import AUTH_REFUSALS, assert_not_refused_for_auth, describe
from conformance.judge.operations import Operation, OperationPaths, operations
from conformance.observe.deliveries import submit_with_target
from conformance.observe.receiver import DeliveryTimeout, Endpoint
from conformance.observe.timing import delivery_deadline
from conformance.run.fixtures import run_profile
from conformance.run.fixtures.labs import Labs
from conformance.target.client import ApiClient
from conformance.target.profile import KeyProfile, Profile
from conformance.target.setup import EDIT_PATH, IMAGES_PATH, SUBMIT_PROMPT, SetupFailed

#: The scope of the image submit, the one the refused submit below lacks.
IMAGES_SCOPE: Final = "images:generate"

#: Requirement ids per scope: (outside the scope → 403, inside → not refused).
_IDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "images:generate": (("SCOPE-DENY-01", "SCOPE-IMAGES-01"), ("SCOPE-IMAGES-02",)),
    "images:edit": (("SCOPE-DENY-01", "SCOPE-EDIT-01"), ("SCOPE-EDIT-02",)),
    "videos:generate": (("SCOPE-DENY-01", "SCOPE-VIDEO-01"), ("SCOPE-VIDEO-02",)),
    "audio:generate": (("SCOPE-AUDIO-01",), ("SCOPE-AUDIO-01",)),
    "agent:run": (("SCOPE-AGENT-01",), ("SCOPE-AGENT-01",)),
}

#: Roles whose budgets belong to other checks (the rate chains of ``low_limit.py``).
_NEVER = CHAIN_ROLES
#: Roles whose tier may refuse a model category (a 403 that is not about scopes).
_NOT_INSIDE = frozenset({"restricted-models"})
#: Operations whose request body the spec shows only in part ("The rest of the request
#: body: not shown", §4): the suite's body is a guess, and which the service judges first,
#: the body or the scope, is not stated.
_BODY_NOT_SHOWN = frozenset({("POST", EDIT_PATH)})


def _scoped_operations() -> list[Operation]:
    return [op for op in operations(extensions=True) if op.public and op.scope in _IDS]


def _distinct_scope_sets(keys: list[KeyProfile]) -> list[KeyProfile]:
    """The first key of each distinct scope set, in profile order."""
    seen: set[frozenset[str]] = set()
    chosen: list[KeyProfile] = []
    for key in keys:
        scopes = frozenset(key.scopes)
        if scopes not in seen:
            seen.add(scopes)
            chosen.append(key)
    return chosen


def _case(op: Operation, role: str, expected: str, cited: tuple[str, ...] = ()) -> object:
    """One cell of the matrix: *op* sent with *role*'s key, *expected* ("403" or
    "served") in its id, citing *cited* (the endpoint's ids; none: the check's own)."""
    marks = [pytest.mark.requirement(*cited)] if cited else []
    return pytest.param(op, role, id=f"{op.param_id}-{role}-{expected}", marks=marks)


def _outside_cases(profile: Profile) -> list[object]:
    cases: list[object] = []
    for op in _scoped_operations():
        assert op.scope is not None
        for key in profile.keys_without_scope(op.scope):
            if key.role not in _NEVER:
                cases.append(_case(op, key.role, "403", _IDS[op.scope][0]))
    return cases


def _inside_cases(profile: Profile) -> list[object]:
    cases: list[object] = []
    for op in _scoped_operations():
        assert op.scope is not None
        usable = [
            k
            for k in profile.keys_with_scope(op.scope)
            if k.role not in _NEVER and k.role not in _NOT_INSIDE
        ]
        for key in _distinct_scope_sets(usable):
            cases.append(_case(op, key.role, "served", _IDS[op.scope][1]))
    return cases


def _unscoped_cases(profile: Profile) -> list[object]:
    usable = [k for k in profile.keys.values() if not k.revoked and k.role not in _NEVER]
    return [
        _case(op, key.role, "served")
        for op in operations()
        if op.public and op.scope is None
        for key in _distinct_scope_sets(usable)
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Build the matrix from the run's profile (none given: no cases, pytest says why)."""
    if "role" not in metafunc.fixturenames:
        return
    profile = run_profile(metafunc.config)
    build = {
        "test_scoped_endpoint_with_key_lacking_scope_returns_403": _outside_cases,
        "test_scoped_endpoint_with_key_holding_scope_is_served": _inside_cases,
        "test_unscoped_endpoint_with_any_valid_key_is_served": _unscoped_cases,
    }[metafunc.function.__name__]
    cases = [] if profile is None else build(profile)
    if not cases:
        # No profile at collection (or no key for one half): one case that says so, citing
        # what the matrix would have checked, so the verdicts show a skip with the reason.
        # Every id the half may cite with keys, so that the index of checks
        # (`requirements` without a profile) counts them as checked.
        half = {
            "test_scoped_endpoint_with_key_lacking_scope_returns_403": 0,
            "test_scoped_endpoint_with_key_holding_scope_is_served": 1,
        }.get(metafunc.function.__name__)
        cited = () if half is None else tuple(sorted({i for p in _IDS.values() for i in p[half]}))
        reason = (
            "needs a profile at collection (--profile or GENAPI_PROFILE) with keys for the "
            "scope matrix: the primary key and one key per scope it lacks"
        )
        marks = [pytest.mark.skip(reason=reason)]
        if cited:
            marks.append(pytest.mark.requirement(*cited))
        cases = [pytest.param(None, None, id="no-keys", marks=marks)]
    metafunc.parametrize(("op", "role"), cases)


@pytest.fixture(scope="module")
def paths(labs: Labs) -> OperationPaths:
    """Real ids of the primary account for the unscoped operations' path parameters."""
    return labs.paths("scope-matrix")


# Requirement ids come with each case (per endpoint); see _IDS.
def test_scoped_endpoint_with_key_lacking_scope_returns_403(
    api: ApiClient, op: Operation, role: str
) -> None:
    """A key without the endpoint's scope gets 403 (a valid body, so only the scope is
    wrong; where the spec does not show the whole body, a refusal of the suite's body
    leaves the scope unjudged)."""
    response = api.request(op.method, op.path, role=role, json=op.minimal_body())
    status = response.status_code
    body_refused = 400 <= status < 500 and status not in AUTH_REFUSALS
    if body_refused and (op.method, op.path) in _BODY_NOT_SHOWN:
        pytest.skip(
            f"{op.method} {op.path} refused the suite's body ({describe(response)}) before "
            "its scope showed: the rest of its body is not shown (spec §4)"
        )
    if status != 403:
        # One rule stated twice (§4 "Scope:" line, §5.3): a wrong status breaks every id
        # cited.
        fail(
            f"{op.method} {op.path} with key {role!r}, which lacks {op.scope}: expected "
            f"403, saw {describe(response)}"
        )


# Requirement ids come with each case (per endpoint); see _IDS.
def test_scoped_endpoint_with_key_holding_scope_is_served(
    api: ApiClient, op: Operation, role: str
) -> None:
    """A key holding the endpoint's scope (and lacking others) is not refused."""
    response = api.request(op.method, op.path, role=role, json=op.minimal_body())
    assert_not_refused_for_auth(response, f"key {role!r} holding {op.scope}")


@pytest.mark.requirement("SCOPE-FREE-01")
def test_unscoped_endpoint_with_any_valid_key_is_served(
    api: ApiClient, paths: OperationPaths, op: Operation, role: str
) -> None:
    """An endpoint that lists no scope serves a valid key whatever scopes it holds."""
    response = api.request(op.method, paths.path(op), role=role, json=op.minimal_body())
    assert_not_refused_for_auth(response, f"key {role!r}")


@pytest.mark.requirement("SCOPE-DENY-02")
def test_submit_refused_for_its_scope_delivers_nothing(
    api: ApiClient, profile: Profile, make_endpoint: Callable[..., Endpoint]
) -> None:
    """An image submit refused with 403 for its scope sends nothing to the target it
    named: once a generation submitted after it has been delivered, and the profile's
    tolerance has passed, that target has seen no delivery (an interpretation; the
    credits and the generation itself are not observed here)."""
    role = next(
        (k.role for k in profile.keys_without_scope(IMAGES_SCOPE) if k.role not in _NEVER),
        None,
    )
    if role is None:
        pytest.skip(f"needs a key without {IMAGES_SCOPE}: add one to the profile's [keys]")
    refused_at, control = make_endpoint("scope-refused"), make_endpoint("scope-control")
    body = {"prompt": SUBMIT_PROMPT, "webhook": {"url": refused_at.url}}
    response = api.request("POST", IMAGES_PATH, role=role, json=body)
    if response.status_code != 403:
        pytest.skip(
            f"POST {IMAGES_PATH} with key {role!r} was answered {describe(response)}, not "
            "403 (SCOPE-IMAGES-01 judges that): no refusal to look behind"
        )
    submit_with_target(api, control.url)
    try:
        control.wait_for(1, delivery_deadline(profile))
    except DeliveryTimeout as missing:  # deliveries are judged by their own checks
        raise SetupFailed(f"setup: the later generation was never delivered: {missing}") from None
    try:
        arrived = refused_at.wait_for(1, profile.timing.tolerance_seconds)
    except DeliveryTimeout:
        return
    fail(
        f"POST {IMAGES_PATH} with key {role!r}, answered 403 for its scope, still delivered "
        f"to the target it named: {arrived[0].summary(arrived[0].arrived_at)}"
    )
