"""Schemathesis against the running reference: every operation of the OpenAPI document.

Every path of ``openapi/generation-api.yaml`` (the spec's, the reference's x-extension
ones and the console ones) gets drawn requests in positive and negative mode, sent with
the credential its ``security`` names (the primary API key, the primary console session,
or none), and Schemathesis' checks judge each answer against the document: no 5xx
(``not_a_server_error``), a documented status (``status_code_conformance``), a body that
matches the documented schema (``response_schema_conformance``) and a documented media
type (``content_type_conformance``). For the reference the document is its public
surface, so any mismatch is a bug of one or the other.

The service is one of its own (``start_reference``), not the shared ``reference_server``:
drawn POST /api/keys bodies create keys up to the account's limit of 10 (spec §8), which
would disturb the tests that share that server. Positive reads aim at real resources
(``OperationPaths``: a generation, its exhausted delivery, a registered webhook); deletes
keep their drawn ids, so the resources of the other operations survive. Every delivery
target is the test's receiver endpoint or a URL the reference must refuse
(``conformance.judge.fuzzing.make_safe``). Run through ``bash scripts/test`` (loopback only).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import httpx
import pytest
from running_reference import RunningReference, start_reference
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core.failures import FailureGroup

import genapi_spec
from conformance.judge.fuzzing import MODES, Mode, draw_cases, load_schema, send_kwargs
from conformance.judge.operations import Operation, OperationPaths, operation_paths, operations
from conformance.observe.receiver import Endpoint, Receiver
from conformance.secrets import Redactor
from conformance.target.profile import load_profile

#: Drawn requests per operation and mode.
MAX_EXAMPLES: Final = 25
CHECKS: Final = (
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    content_type_conformance,
)
ALL_OPERATIONS: Final = operations(extensions=True)
#: Operations whose real resource a positive request would destroy for the others.
KEEP_DRAWN_IDS: Final = frozenset({"deleteWebhook", "revokeApiKey"})


def _security(operation: Operation) -> str | None:
    """The scheme the operation's ``security`` names: apiKey, consoleSession or None."""
    document = genapi_spec.openapi_document()
    definition = document["paths"][operation.path][operation.method.lower()]
    requirements = definition.get("security", document.get("security", []))
    return next(iter(requirements[0]), None) if requirements else None


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningReference]:
    with start_reference(tmp_path_factory.mktemp("fuzz-reference")) as running:
        yield running


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with Receiver() as started:
        yield started


@pytest.fixture(scope="module")
def endpoint(receiver: Receiver) -> Iterator[Endpoint]:
    created = receiver.endpoint("fuzz-reference")
    yield created
    created.close()
    created.check()


@pytest.fixture(scope="module")
def redactor(service: RunningReference) -> Redactor:
    """Masks the service's secrets, and those its answers show once, in failure text."""
    return load_profile(service.directory / "profile.toml").redactor()


@pytest.fixture(scope="module")
def real_paths(
    service: RunningReference, receiver: Receiver, redactor: Redactor
) -> Iterator[OperationPaths]:
    profile = load_profile(service.directory / "profile.toml")
    with operation_paths(profile, redactor, receiver, "fuzz-reference-setup") as paths:
        yield paths


@pytest.fixture(scope="module")
def schema(service: RunningReference) -> Any:
    return load_schema(service.base_url)


def _path_parameters(
    operation: Operation, paths: OperationPaths, service: RunningReference
) -> dict[str, str] | None:
    if "{" not in operation.path or operation.operation_id in KEEP_DRAWN_IDS:
        return None
    if operation.path.startswith("/api/keys/"):
        return {"id": service.key_id("without-images-generate")}
    if operation.path.startswith("/outputs/"):
        return None
    concrete = paths.path(operation)
    prefix, _, suffix = operation.path.partition("{id}")
    return {"id": concrete.removeprefix(prefix).removesuffix(suffix)}


def _titles(group: FailureGroup) -> str:
    """What Schemathesis found, without its "Reproduce with: curl ..." line (which would
    print the Authorization header, a secret)."""
    return "; ".join(
        f"{getattr(e, 'title', type(e).__name__)}: {str(getattr(e, 'message', e))[:300]}"
        for e in group.exceptions
    )


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("operation", ALL_OPERATIONS, ids=[op.param_id for op in ALL_OPERATIONS])
def test_reference_answers_drawn_requests_as_documented(
    service: RunningReference,
    schema: Any,
    endpoint: Endpoint,
    real_paths: OperationPaths,
    redactor: Redactor,
    operation: Operation,
    mode: Mode,
) -> None:
    """Drawn requests get a documented status, media type and body, and never a 5xx."""
    path_parameters = (
        _path_parameters(operation, real_paths, service) if mode == "positive" else None
    )
    cases = draw_cases(
        schema,
        operation.method,
        operation.path,
        mode=mode,
        max_examples=MAX_EXAMPLES,
        safe_urls=[endpoint.url],
        path_parameters=path_parameters,
    )
    if not cases:
        pytest.skip(f"no {mode} data exists for {operation.method} {operation.path}")
    credential = {
        "apiKey": f"Bearer {service.key('primary')}",
        "consoleSession": f"Bearer {service.session('primary')}",
    }.get(_security(operation) or "")
    failures: list[str] = []
    with httpx.Client(base_url=service.base_url, timeout=10.0, trust_env=False) as client:
        for fuzz in cases:
            kwargs = send_kwargs(fuzz)
            if credential is not None:
                kwargs["headers"]["Authorization"] = credential
            response = client.request(fuzz.method, fuzz.path, **kwargs)
            try:
                redactor.learn_from_json(response.json())  # a created key, a whsec_ secret
            except ValueError:
                pass
            try:
                fuzz.case.validate_response(response, checks=CHECKS)
            except FailureGroup as failure:
                body = repr(fuzz.body)[:200] if fuzz.has_body else "(no body)"
                failures.append(
                    f"{fuzz.method} {response.request.url.raw_path.decode()[:200]} body={body}"
                    f" -> {response.status_code} {response.text[:200]!r}: " + _titles(failure)
                )
    shown = redactor.text("\n\n".join(failures[:5]))
    assert not failures, f"{len(failures)} of {len(cases)} answers:\n{shown}"


def test_every_operation_is_fuzzed() -> None:
    """The parametrisation covers every method and path of the document."""
    document = genapi_spec.openapi_document()
    declared = {
        (method.upper(), path)
        for path, item in document["paths"].items()
        for method in item
        if method in ("get", "post", "put", "patch", "delete")
    }
    assert declared == {(op.method, op.path) for op in ALL_OPERATIONS}
