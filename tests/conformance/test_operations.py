"""The operations read from the OpenAPI document, and the real paths the checks fill in."""

from __future__ import annotations

import json
import re

import httpx
import pytest
from profiles import profile_text

import genapi_spec
from conformance.judge.operations import Operation, OperationPaths, operations
from conformance.observe.receiver import Receiver
from conformance.target.client import ApiClient, Recorder
from conformance.target.profile import Profile, parse_profile
from conformance.target.setup import SetupFailed

PROFILE = profile_text("gk_OPScanary0primary0key0000000001", "OPScanary.session.token")


def test_every_spec_endpoint_of_section_4_is_an_operation() -> None:
    """The spec's §4 headings and console table name exactly the non-extension paths."""
    spec = genapi_spec.spec_text()
    stated = set(re.findall(r"^### (GET|POST|DELETE) (/v1/\S+)$", spec, flags=re.M))
    stated |= set(re.findall(r"^\| (GET|POST|DELETE) \| (/api/\S+) \|", spec, flags=re.M))
    found = {(op.method, op.path) for op in operations()}
    assert stated and found == stated


def test_extensions_are_left_out_unless_asked() -> None:
    plain = operations()
    everything = operations(extensions=True)
    assert not any(op.extension for op in plain)
    assert {op.path for op in everything if op.extension} >= {"/v1/audio/generate", "/api/keys"}


def test_scoped_submits_carry_their_scope_and_a_minimal_body() -> None:
    scopes = {op.path: op.scope for op in operations() if op.submit}
    assert scopes == {
        "/v1/images/generate": "images:generate",
        "/v1/images/edit": "images:edit",
        "/v1/videos/generate": "videos:generate",
    }
    for op in operations(extensions=True):
        body = op.minimal_body()
        assert (body is not None) == op.submit
        assert body is None or set(body) == {"prompt"}  # no delivery target


def test_param_ids_are_unique_and_readable() -> None:
    ids = [op.param_id for op in operations(extensions=True)]
    assert len(ids) == len(set(ids))
    assert "post-v1-webhooks-deliveries-id-redeliver" in ids


def test_url_fills_parameters_and_refuses_a_missing_one() -> None:
    op = Operation("GET", "/v1/generations/{id}", "getGeneration", None, False, False)
    assert op.url(id="gen_1") == "/v1/generations/gen_1"
    with pytest.raises(KeyError):
        op.url()


def paths_with(
    handler: httpx.MockTransport, receiver: Receiver, profile: Profile
) -> OperationPaths:
    client = ApiClient(profile, Recorder(profile.redactor()), transport=handler)
    return OperationPaths(client, receiver.endpoint("ops"), delivery_timeout=1.0)


def test_paths_use_one_generation_and_one_webhook_and_delete_the_webhook(
    receiver: Receiver,
) -> None:
    sent: list[tuple[str, str]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append((request.method, request.url.path))
        if request.url.path == "/v1/images/generate":
            target = json.loads(request.content)["webhook"]["url"]
            assert target.startswith(f"http://127.0.0.1:{receiver.port}/hooks/")
            return httpx.Response(202, json={"id": "gen_1"})
        if request.method == "POST" and request.url.path == "/api/webhooks":
            return httpx.Response(201, json={"id": "wh_1", "secret": "whsec_OPScanary"})
        return httpx.Response(204)

    profile = parse_profile(PROFILE, env={})
    paths = paths_with(httpx.MockTransport(handle), receiver, profile)
    by_path = {op.path: op for op in operations()}
    assert paths.path(by_path["/v1/generations/{id}"]) == "/v1/generations/gen_1"
    assert (
        paths.path(by_path["/v1/generations/{id}/deliveries"]) == "/v1/generations/gen_1/deliveries"
    )
    assert paths.path(by_path["/v1/webhooks/{id}/deliveries"]) == "/v1/webhooks/wh_1/deliveries"
    assert paths.path(by_path["/v1/account/tier"]) == "/v1/account/tier"
    paths.close()
    assert sent == [
        ("POST", "/v1/images/generate"),
        ("POST", "/api/webhooks"),
        ("DELETE", "/api/webhooks/wh_1"),
    ]


def test_paths_report_a_refused_setup_submit_as_setup_failure(receiver: Receiver) -> None:
    profile = parse_profile(PROFILE, env={})
    refuse = httpx.MockTransport(lambda request: httpx.Response(401, json={"detail": "no"}))
    paths = paths_with(refuse, receiver, profile)
    generation = next(op for op in operations() if op.path == "/v1/generations/{id}")
    with pytest.raises(SetupFailed, match="answered 401, expected 202"):
        paths.path(generation)


def test_paths_without_a_console_session_use_a_made_up_webhook_id(receiver: Receiver) -> None:
    profile = parse_profile(PROFILE.split("[sessions.primary]")[0], env={})
    nothing = httpx.MockTransport(lambda request: httpx.Response(500))
    paths = paths_with(nothing, receiver, profile)
    assert paths.webhook_id == OperationPaths.UNKNOWN_WEBHOOK_ID
