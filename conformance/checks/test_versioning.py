"""Versioning of the public paths (spec §9: "Public paths are prefixed /v1"; the header
of the spec: "Public paths sit under /v1").

Every public operation of the OpenAPI document is sent to its /v1 path with the primary
key (every scope) and real ids of the primary account: it must be served there, so
neither a 404 (no such path) nor a 405 (no such method at that path). The api_version of
event envelopes (VER-ENV-*) is judged by the envelope checks.
"""

from __future__ import annotations

from typing import Any, Final

import pytest

from conformance.judge.asserts import describe
from conformance.judge.operations import Operation, OperationPaths, operations
from conformance.observe.receiver import Endpoint
from conformance.run.fixtures.labs import Labs
from conformance.target.client import ApiClient

PUBLIC: Final = [pytest.param(op, id=op.param_id) for op in operations() if op.public]
#: What a server answers for a path or method it does not serve.
NOT_SERVED: Final = frozenset({404, 405})


@pytest.fixture(scope="module")
def paths(labs: Labs) -> OperationPaths:
    """Real ids of the primary account for the operations' path parameters."""
    return labs.paths("versioning")


@pytest.mark.parametrize("op", PUBLIC)
@pytest.mark.requirement("VER-PATH-01")
def test_public_operation_is_served_under_v1(
    api: ApiClient, paths: OperationPaths, endpoint: Endpoint, op: Operation
) -> None:
    """The public operation is served at its /v1 path (not 404, not 405)."""
    if op.path.startswith("/v1/webhooks/{id}") and not api.profile.sessions:
        pytest.skip("needs console: a registered webhook's id (add [sessions.primary])")
    path = paths.path(op)
    assert path.startswith("/v1/"), f"VER-PATH-01: the document's path {op.path} is not /v1"
    body: dict[str, Any] | None = op.minimal_body()
    if body is not None:
        body["webhook"] = {"url": endpoint.url}  # the stated async form (spec §9)
    response = api.request(op.method, path, json=body)
    assert response.status_code not in NOT_SERVED, (
        f"VER-PATH-01: {op.method} {path}: expected the operation to be served under /v1, "
        f"saw {describe(response)}"
    )
