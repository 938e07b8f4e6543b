"""Contract fuzzing: requests drawn from the OpenAPI document, answers held to the spec.

Schemathesis draws bodies, query strings and path ids for the spec's ``/v1`` operations
(spec §4) from ``openapi/generation-api.yaml``, in positive mode (data the schemas allow)
and negative mode (data they forbid), bounded and derandomised
(:mod:`conformance.judge.fuzzing`). Each check sends its drawn requests itself through ``api``
with the primary key (whose tier is generous; no rate budget is at stake) and judges only
what the spec states:

* a 202 answer carries the generation's id (GEN-ID-01);
* an outcome filter outside the four outcomes is answered 400 (REC-HOOK-05);
* no request, valid or not, is answered 5xx (ERR-5XX-01, an interpretation: warns).

Safety: every drawn delivery target is replaced by the check's receiver endpoint or by a
URL the spec says MUST be refused, aimed at the discard port 9 (:func:`make_safe`).
Positive reads use real resources of the primary account (:class:`OperationPaths`), so
the fuzzer reaches past the 404 of an unknown id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import httpx
import pytest

from conformance.judge.fuzzing import (
    FuzzCase,
    Mode,
    coverage_cases,
    documented_schema,
    draw_cases,
    load_schema,
    send_kwargs,
)
from conformance.judge.operations import Operation, OperationPaths, operations
from conformance.observe.receiver import Endpoint
from conformance.run.fixtures.labs import Labs
from conformance.target.client import ApiClient
from conformance.target.profile import Profile
from genapi_spec import validator

#: Drawn requests per operation and mode: enough to meet every field of the small bodies
#: of spec §4 in both modes, few enough for about a second per operation.
MAX_EXAMPLES: Final = 20
#: Most coverage-phase cases per operation (each field missing, of each wrong type, each
#: bound crossed: about 60 for a submit).
MAX_COVERAGE: Final = 80
#: Spec §2, §4: the four outcome filter values; any other gives 400.
OUTCOMES: Final = frozenset({"delivered", "failed", "pending_retry", "exhausted"})
#: How many offending exchanges a failure message quotes.
QUOTED: Final = 5

V1_OPERATIONS: Final = [op for op in operations() if op.public]
SUBMITS: Final = [op for op in V1_OPERATIONS if op.submit]


@pytest.fixture(scope="module")
def fuzz_schema(profile: Profile) -> Any:
    """The Schemathesis schema of the document, aimed at the profile's base URL."""
    return load_schema(profile.base_url)


@pytest.fixture(scope="module")
def real_paths(labs: Labs) -> OperationPaths:
    """Real ids of the primary account (a generation, its delivery, a webhook)."""
    return labs.paths("contract-fuzz")


def _path_parameters(operation: Operation, paths: OperationPaths) -> dict[str, str] | None:
    """The real id for *operation*'s ``{id}``, or ``None`` when it has no parameter."""
    if "{id}" not in operation.path:
        return None
    concrete = paths.path(operation)
    prefix, _, suffix = operation.path.partition("{id}")
    return {"id": concrete.removeprefix(prefix).removesuffix(suffix)}


def _send(api: ApiClient, fuzz: FuzzCase) -> httpx.Response:
    # patient=False: a 429 is an answer like any other here (and the primary tier is
    # generous); the drawn request is sent as drawn, with the primary key.
    response: httpx.Response = api.request(
        fuzz.method, fuzz.path, patient=False, **send_kwargs(fuzz)
    )
    return response


def _shown(fuzz: FuzzCase, response: httpx.Response) -> str:
    """One offending exchange, short: request line, drawn body, status and body."""
    query = f"?{response.request.url.query.decode()}" if response.request.url.query else ""
    body = repr(fuzz.body)[:160] if fuzz.has_body else "(no body)"
    return (
        f"{fuzz.method} {fuzz.path}{query} [{fuzz.mode}] body={body} -> "
        f"{response.status_code} {response.text[:160]!r}"
    )


def _quote(found: Sequence[str]) -> str:
    more = f"; and {len(found) - QUOTED} more" if len(found) > QUOTED else ""
    return "; ".join(found[:QUOTED]) + more


def _cases(
    schema: Any,
    operation: Operation,
    mode: Mode,
    safe_urls: Sequence[str],
    path_parameters: dict[str, str] | None = None,
) -> list[FuzzCase]:
    """The requests of *mode* to *operation*: drawn ones; invalid ones start with the
    coverage phase's systematic cases."""
    method, path = operation.method, operation.path
    systematic = (
        coverage_cases(
            schema,
            method,
            path,
            mode=mode,
            safe_urls=safe_urls,
            path_parameters=path_parameters,
            limit=MAX_COVERAGE,
        )
        if mode == "negative"
        else []
    )
    return systematic + draw_cases(
        schema,
        method,
        path,
        mode=mode,
        max_examples=MAX_EXAMPLES,
        safe_urls=safe_urls,
        path_parameters=path_parameters,
    )


@pytest.mark.requirement("GEN-ID-01")
@pytest.mark.parametrize("operation", SUBMITS, ids=[op.param_id for op in SUBMITS])
def test_fuzz_submit_accepted_answer_carries_generation_id(
    api: ApiClient, fuzz_schema: Any, endpoint: Endpoint, operation: Operation
) -> None:
    """Every 202 to a drawn valid submit carries the generation's id as a non-empty string."""
    schema_name = documented_schema(operation.operation_id, 202)
    assert schema_name is not None, f"the document gives no 202 body for {operation.path}"
    accepted_body = validator(schema_name)
    cases = _cases(fuzz_schema, operation, "positive", [endpoint.url])
    accepted = 0
    broken: list[str] = []
    for fuzz in cases:
        response = _send(api, fuzz)
        if response.status_code != 202:
            continue
        accepted += 1
        try:
            body = response.json()
        except ValueError:
            broken.append(_shown(fuzz, response) + " (not JSON)")
            continue
        errors = [error.message for error in accepted_body.iter_errors(body)]
        if errors:
            broken.append(_shown(fuzz, response) + f" ({'; '.join(errors)[:160]})")
    if accepted == 0:
        pytest.skip(
            f"none of {len(cases)} drawn valid submits to {operation.path} was answered 202, "
            "so no 202 body could be checked (the submit checks judge the statuses)"
        )
    assert not broken, (
        f"GEN-ID-01: expected every 202 body to carry a non-empty string id ({schema_name} "
        f"schema); {len(broken)} of {accepted} did not: {_quote(broken)}"
    )


@pytest.mark.requirement("ERR-5XX-01")
@pytest.mark.parametrize("operation", V1_OPERATIONS, ids=[op.param_id for op in V1_OPERATIONS])
def test_fuzz_operation_drawn_requests_get_no_5xx(
    api: ApiClient,
    fuzz_schema: Any,
    endpoint: Endpoint,
    real_paths: OperationPaths,
    operation: Operation,
) -> None:
    """No drawn request to a /v1 operation, valid or not, is answered with a 5xx status."""
    # Valid data aims at real resources (else every read ends at the 404 of an unknown
    # id); invalid data keeps the drawn ids, which are part of what is invalid.
    cases = _cases(
        fuzz_schema,
        operation,
        "positive",
        [endpoint.url],
        _path_parameters(operation, real_paths),
    ) + _cases(fuzz_schema, operation, "negative", [endpoint.url])
    errors: list[str] = []
    for fuzz in cases:
        response = _send(api, fuzz)
        if response.status_code >= 500:
            errors.append(_shown(fuzz, response))
    assert not errors, (
        f"ERR-5XX-01: expected no 5xx to any of {len(cases)} drawn requests; "
        f"{len(errors)} got one: {_quote(errors)}"
    )


@pytest.mark.console
@pytest.mark.requirement("REC-HOOK-05")
def test_fuzz_webhook_deliveries_unknown_outcome_answers_400(
    api: ApiClient, fuzz_schema: Any, real_paths: OperationPaths
) -> None:
    """Every drawn outcome filter outside delivered, failed, pending_retry, exhausted gets 400."""
    (operation,) = [op for op in V1_OPERATIONS if op.operation_id == "listWebhookDeliveries"]
    cases = _cases(fuzz_schema, operation, "negative", [], _path_parameters(operation, real_paths))
    judged = 0
    wrong: list[str] = []
    for fuzz in cases:
        sent = send_kwargs(fuzz).get("params", {}).get("outcome")
        if not isinstance(sent, str) or sent in OUTCOMES or sent == "":
            # No outcome, a repeated one, a valid one, or an empty one (which may read as
            # no filter, REC-HOOK-12): not this rule.
            continue
        judged += 1
        response = _send(api, fuzz)
        if response.status_code != 400:
            wrong.append(_shown(fuzz, response))
    if judged == 0:
        raise RuntimeError(
            f"harness: none of {len(cases)} drawn requests had an unknown outcome value"
        )
    assert not wrong, (
        f"REC-HOOK-05: expected 400 for every unknown outcome filter value; "
        f"{len(wrong)} of {judged} got another status: {_quote(wrong)}"
    )


def _lacks_prompt(body: Any) -> bool:
    """lacks prompt"""
    return isinstance(body, dict) and "prompt" not in body


def _prompt_not_string(body: Any) -> bool:
    """has a prompt that is not a string"""
    return isinstance(body, dict) and "prompt" in body and not isinstance(body["prompt"], str)


def _duration_not_number(body: Any) -> bool:
    """has a duration that is not a number"""
    # An explicit null is left out: for an optional field it commonly reads as "not
    # given", and the spec does not say otherwise.
    duration = body.get("duration") if isinstance(body, dict) else None
    if duration is None:
        return False
    return isinstance(duration, bool) or not isinstance(duration, int | float)


def _rule(operation_id: str, breaks_rule: Any, requirement: str, case_id: str) -> Any:
    return pytest.param(
        operation_id,
        breaks_rule,
        requirement,
        marks=pytest.mark.requirement(requirement),
        id=case_id,
    )


#: Spec §4 body tables: prompt is required and a string; duration is a number. Each rule:
#: the operation, which bodies break it, and the requirement their 4xx proves.
BODY_RULES: Final = [
    _rule("generateImage", _lacks_prompt, "GEN-IMAGE-01", "image-without-prompt-4xx"),
    _rule("generateImage", _prompt_not_string, "GEN-IMAGE-02", "image-prompt-not-string-4xx"),
    _rule("generateVideo", _lacks_prompt, "GEN-VIDEO-01", "video-without-prompt-4xx"),
    _rule("generateVideo", _duration_not_number, "GEN-VIDEO-04", "video-duration-not-number-4xx"),
]


@pytest.mark.parametrize(("operation_id", "breaks_rule", "requirement"), BODY_RULES)
def test_fuzz_submit_body_breaking_stated_field_rule_is_refused_4xx(
    api: ApiClient,
    fuzz_schema: Any,
    endpoint: Endpoint,
    operation_id: str,
    breaks_rule: Any,
    requirement: str,
) -> None:
    """Every invalid submit body that lacks prompt, or has a wrong-typed prompt or
    duration, is answered with a 4xx status (never 202)."""
    (operation,) = [op for op in SUBMITS if op.operation_id == operation_id]
    cases = [
        fuzz
        for fuzz in _cases(fuzz_schema, operation, "negative", [endpoint.url])
        if fuzz.has_body and "json" in (fuzz.media_type or "") and breaks_rule(fuzz.body)
    ]
    if not cases:
        raise RuntimeError(f"harness: no drawn body to {operation.path} breaks the rule")
    wrong: list[str] = []
    for fuzz in cases:
        response = _send(api, fuzz)
        if not 400 <= response.status_code < 500:
            wrong.append(_shown(fuzz, response))
    rule = breaks_rule.__doc__
    assert not wrong, (
        f"{requirement}: {operation.path}, body that {rule}: expected a 4xx for every one; "
        f"{len(wrong)} of {len(cases)} got another status: {_quote(wrong)}"
    )
