"""Declared adapters: the declaration renders and reads what it says, the declared adapter
performs any console described that way, adapter classes load from the entry-point group,
and the suite's key and console checks pass against the reference through a declaration
that is not the preset.

The last test starts the reference: run this module through ``bash scripts/test``.
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomli_w
from profiles import LOCAL, profile_text
from pytest_httpserver import HTTPServer
from suite_run import run_suite
from werkzeug import Request, Response

from conformance.judge.asserts import assert_webhook_list
from conformance.run.cli import EXIT_OK
from conformance.run.launcher import EmbeddedReference
from conformance.target.adapter_declaration import (
    ENTRY_POINT_GROUP,
    OPERATIONS,
    DeclaredOperation,
    parse_declaration,
    preset_names,
    preset_table,
)
from conformance.target.adapters import (
    AdapterError,
    CapabilityMissing,
    DeclaredAdapter,
    adapter_class,
    console_request,
    declared,
    make_adapter,
)
from conformance.target.client import ApiClient, Recorder
from conformance.target.profile import Profile, ProfileError, load_profile, parse_profile
from conformance.target.webhooks import delete_webhook, register_webhook

TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwIn0.ADAPTERcanary0token"
PASSWORD = "ADAPTERcanary password/+&="
CREATED = "gk_ADAPTERcanary0created0key00004"
CREATED_SIGNING = "psk_ADAPTERcanary0created0signing5"
COOKIE = "ADAPTERcanary0session0cookie0006"
WHSEC = "ADAPTERcanary0hook0signing0secret7"  # no whsec_ prefix: no shape masks it
SECRETS = (TOKEN, PASSWORD, CREATED, CREATED_SIGNING, COOKIE, WHSEC)

LOGIN = f'[sessions.login]\nemail = "user@example.test"\npassword = "{PASSWORD}"\n'
BASE = profile_text("gk_ADAPTERcanary0primary0key00001", TOKEN, tables=LOGIN)


def profile_with(adapter: str) -> Profile:
    return parse_profile(BASE + adapter, env={})


def client_for(profile: Profile, handler: Any) -> tuple[ApiClient, Recorder]:
    recorder = Recorder(profile.redactor())
    return ApiClient(profile, recorder, transport=httpx.MockTransport(handler)), recorder


def leaks(recorder: Recorder) -> list[str]:
    texts = [json.dumps(e.to_dict()) + e.as_curl() for e in recorder.exchanges]
    return [secret for secret in SECRETS for text in texts if secret in text]


# -- the declaration: rendering and reading ---------------------------------------------


def operation(**fields: Any) -> DeclaredOperation:
    pointers = {k: tuple(v) for k, v in fields.pop("pointers", {}).items()}
    return DeclaredOperation(
        name="create_key", method="POST", path="/x", pointers=pointers, **fields
    )


def test_body_template_takes_whole_placeholders_with_their_type_and_leaves_out_empty_ones() -> None:
    body = {
        "data": {"label": "{name}", "grants": "{scopes}", "hooks": ["{events}", "fixed"]},
        "note": "made for {name} with {scopes}",
        "count": 3,
    }
    rendered = operation(body=body).render_body({"name": "n1", "scopes": ["a", "b"]})
    assert rendered == {
        "data": {"label": "n1", "grants": ["a", "b"], "hooks": ["fixed"]},
        "note": "made for n1 with ['a', 'b']",
        "count": 3,
    }
    assert operation().render_body({"name": "n"}) is None


def test_path_placeholders_are_url_quoted() -> None:
    key = DeclaredOperation(name="key_detail", method="GET", path="/keys/{id}/view?x=1")
    assert key.render_path({"id": "a/b c"}) == "/keys/a%2Fb%20c/view?x=1"
    with pytest.raises(ValueError, match=r"no value for \{id\}"):
        key.render_path({})


def test_pointers_follow_rfc_6901_and_the_first_that_resolves_wins() -> None:
    answer = {"a/b": {"m~n": [{"id": 7}, {"id": "k_2"}]}, "list": {"not": "an array"}}
    read = operation(
        pointers={
            "id": ["/missing", "/a~1b/m~0n/1/id"],
            "key": ["/a~1b/m~0n/0/id"],
            "list": ["/list", "/a~1b/m~0n", ""],
        }
    )
    assert read.read_id(answer, "id") == "k_2"
    assert read.read_id(answer, "key") == "7"  # an integer id, written out
    assert read.read(answer, "list") == [{"id": 7}, {"id": "k_2"}]  # only an array counts
    assert read.read(answer, "name") is None  # not declared
    assert read.where("id") == "'/missing' or '/a~1b/m~0n/1/id'"


def test_declared_path_matches_requests_under_a_base_path() -> None:
    detail = DeclaredOperation(name="key_detail", method="GET", path="/api/keys/{id}?view=1")
    assert detail.matches("GET", "/api/keys/key_1")
    assert detail.matches("get", "/tenant/7/api/keys/key_1")
    assert not detail.matches("GET", "/api/keys/key_1/extra")
    assert not detail.matches("DELETE", "/api/keys/key_1")
    assert not detail.matches("GET", "/xapi/keys/key_1")


def test_every_preset_is_a_complete_valid_declaration() -> None:
    assert "reference" in preset_names()
    for name in preset_names():
        profile = profile_with(f'[adapter]\npreset = "{name}"\n')
        assert profile.adapter.declared
        assert set(profile.adapter.operations) == set(OPERATIONS), name
        # The preset file is a profile fragment: pasted into a profile it loads alone.
        pasted = profile_with(tomli_w.dumps({"adapter": dict(preset_table(name))}))
        assert pasted.adapter.operations == profile.adapter.operations


def test_without_adapter_the_webhook_operations_are_the_specs() -> None:
    declaration, problems = parse_declaration(None)
    assert not problems and not declaration.declared
    assert {n: (o.method, o.path) for n, o in declaration.operations.items()} == {
        "create_webhook": ("POST", "/api/webhooks"),
        "list_webhooks": ("GET", "/api/webhooks"),
        "test_webhook": ("POST", "/api/webhooks/{id}/test"),
        "delete_webhook": ("DELETE", "/api/webhooks/{id}"),
    }


def test_profile_fields_override_the_preset_field_by_field() -> None:
    profile = profile_with(
        '[adapter]\npreset = "reference"\n'
        '[adapter.create_key]\npath = "/console/keys"\nkey = ["/data/key", "/key"]\n'
    )
    create = profile.adapter.operations["create_key"]
    assert (create.method, create.path, create.status) == ("POST", "/console/keys", (201,))
    assert create.pointers == {"id": ("/id",), "key": ("/data/key", "/key")}
    assert profile.adapter.preset == "reference"
    assert profile.redacted()["adapter"]["operations"]["create_key"]["path"] == "/console/keys"


# -- the declared adapter on the reference preset (a fake of the reference's console) ------


class FakeReferenceConsole:
    """The reference's console paths as ARCHITECTURE.md describes them."""

    def __init__(self) -> None:
        self.revoked: list[str] = []
        self.authorizations: list[str | None] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.authorizations.append(request.headers.get("authorization"))
        path, method = request.url.path, request.method
        if (method, path) == ("POST", "/api/session"):
            if json.loads(request.content)["password"] != PASSWORD:
                return httpx.Response(401, json={"detail": "wrong password"})
            return httpx.Response(200, json={"token": TOKEN + "x", "expires_at": "later"})
        if request.headers.get("authorization") not in (f"Bearer {TOKEN}", f"Bearer {TOKEN}x"):
            return httpx.Response(401, json={"detail": "log in"})
        if (method, path) == ("POST", "/api/keys"):
            body = json.loads(request.content)
            if not body["scopes"]:
                return httpx.Response(400, json={"detail": "no scope"})
            created = {"id": "key_9", "name": body["name"], "scopes": body["scopes"]}
            return httpx.Response(201, json={**created, "key": CREATED})
        if (method, path) == ("GET", "/api/keys"):
            return httpx.Response(200, json={"keys": [{"id": "key_9"}, {"id": "key_1"}]})
        if (method, path) == ("GET", "/api/keys/key_9"):
            detail = {"name": "temp", "scopes": ["images:generate"]}
            return httpx.Response(200, json={**detail, "signing_secret": CREATED_SIGNING})
        if (method, path) == ("DELETE", "/api/keys/key_9"):
            self.revoked.append("key_9")
            return httpx.Response(204)
        return httpx.Response(404, json={"detail": f"no {method} {path}"})


REFERENCE = '[adapter]\npreset = "reference"\n'


def test_preset_adapter_creates_reads_lists_and_revokes_keys() -> None:
    console = FakeReferenceConsole()
    client, recorder = client_for(profile_with(REFERENCE), console)
    adapter = make_adapter(client)
    assert type(adapter) is DeclaredAdapter
    created = adapter.create_key("primary", "temp", ["images:generate"])
    assert (created.id, created.key.reveal()) == ("key_9", CREATED)
    detail = adapter.key_detail("primary", created.id)
    assert (detail.name, detail.scopes) == ("temp", ["images:generate"])
    assert detail.signing_secret is not None and detail.signing_secret.reveal() == CREATED_SIGNING
    assert adapter.list_keys("primary").ids == ("key_9", "key_1")
    adapter.revoke_key("primary", created.id)
    assert console.revoked == ["key_9"]
    assert not leaks(recorder)


def test_preset_adapter_logs_in_with_the_session_credentials_first() -> None:
    console = FakeReferenceConsole()
    client, recorder = client_for(profile_with(REFERENCE), console)
    make_adapter(client).create_key("login", "via-login", ["images:generate"])
    assert console.authorizations[:2] == [None, f"Bearer {TOKEN}x"]
    assert not leaks(recorder)
    assert "[redacted:sessions.login.password]" in recorder.exchanges[0].request_body


def test_preset_adapter_reports_unexpected_answers_with_their_status() -> None:
    client, _ = client_for(profile_with(REFERENCE), FakeReferenceConsole())
    adapter = make_adapter(client)
    with pytest.raises(AdapterError, match=r"revoke a key: DELETE /api/keys/key_0 answered 404"):
        adapter.revoke_key("primary", "key_0")
    with pytest.raises(AdapterError) as refused:
        adapter.create_key("primary", "none", [])
    assert refused.value.status == 400
    with pytest.raises(CapabilityMissing, match="credentials for console session 'primary'"):
        adapter.login("primary")


def test_undeclared_key_operations_are_skips_with_the_fix() -> None:
    client, _ = client_for(profile_with(""), FakeReferenceConsole())
    adapter = make_adapter(client)
    calls = {
        "login": lambda: adapter.login("login"),
        "create key": lambda: adapter.create_key("primary", "n", ["images:generate"]),
        "revoke key": lambda: adapter.revoke_key("primary", "k"),
        "key detail": lambda: adapter.key_detail("primary", "k"),
        "list keys": lambda: adapter.list_keys("primary"),
    }
    for operation_name, call in calls.items():
        with pytest.raises(
            CapabilityMissing, match=rf'^needs adapter: {operation_name}: .*preset = "reference"'
        ):
            call()


# -- a console unlike the reference's, driven by a declaration ------------------------------

#: Another deployment's console: other paths and field names, a cookie session, a login
#: that answers no token in its body, statuses of its own.
OTHER_CONSOLE = """
[adapter.credential]
scheme = "cookie"
cookie = "console_sid"

[adapter.login]
path = "/console/v2/sessions"
body = { user = { login = "{email}", secret = "{password}" } }
status = 204

[adapter.create_key]
path = "/console/v2/credentials"
body = { data = { label = "{name}", grants = "{scopes}", kind = "api" } }
status = 200
id = "/data/credential_id"
key = "/data/secret_value"

[adapter.key_detail]
path = "/console/v2/credentials/{id}"
name = "/data/label"
scopes = "/data/grants"
signing_secret = "/data/webhook_hmac"

[adapter.revoke_key]
method = "POST"
path = "/console/v2/credentials/{id}/revocation"
status = 202

[adapter.list_keys]
path = "/console/v2/credentials"
list = "/result/items"
item_id = "/ref/credential_id"

[adapter.create_webhook]
path = "/console/v2/hooks"
body = { target = "{url}", subscribe = "{events}" }
id = "/hook/hook_id"
secret = "/hook/signing"

[adapter.list_webhooks]
path = "/console/v2/hooks"
list = "/result/hooks"
item_id = "/hook_id"
item_url = "/target"

[adapter.test_webhook]
path = "/console/v2/hooks/{id}/ping"

[adapter.delete_webhook]
path = "/console/v2/hooks/{id}"
"""


class OtherConsole:
    """A fake deployment serving OTHER_CONSOLE over a real socket."""

    def __init__(self) -> None:
        self.keys: dict[str, dict[str, Any]] = {}
        self.hooks: dict[str, dict[str, Any]] = {}
        self.seen: list[tuple[str, str, Any]] = []

    def __call__(self, request: Request) -> Response:
        body = request.get_json(silent=True)
        self.seen.append((request.method, request.path, body))
        route = (request.method, request.path)
        if route == ("POST", "/console/v2/sessions"):
            ok = body == {"user": {"login": "user@example.test", "secret": PASSWORD}}
            response = Response(status=204 if ok else 401)
            if ok:
                response.set_cookie("console_sid", COOKIE, httponly=True)
            return response
        if request.cookies.get("console_sid") != COOKIE:
            return self.json({"error": "sign in"}, 401)
        if route == ("POST", "/console/v2/credentials"):
            self.keys["41"] = {"label": body["data"]["label"], "grants": body["data"]["grants"]}
            return self.json({"data": {"credential_id": 41, "secret_value": CREATED}}, 200)
        if route == ("GET", "/console/v2/credentials"):
            items = [{"ref": {"credential_id": int(k)}} for k in self.keys]
            return self.json({"result": {"items": items}}, 200)
        if route == ("GET", "/console/v2/credentials/41"):
            return self.json({"data": {**self.keys["41"], "webhook_hmac": CREATED_SIGNING}}, 200)
        if route == ("POST", "/console/v2/credentials/41/revocation"):
            self.keys.pop("41")
            return self.json({"revoked": True}, 202)
        if route == ("POST", "/console/v2/hooks"):
            self.hooks["h1"] = {"hook_id": "h1", "target": body["target"]}
            return self.json({"hook": {"hook_id": "h1", "signing": WHSEC}}, 201)
        if route == ("GET", "/console/v2/hooks"):
            return self.json({"result": {"hooks": list(self.hooks.values())}}, 200)
        if route == ("POST", "/console/v2/hooks/h1/ping"):
            return self.json({"sent": True}, 200)
        if route == ("DELETE", "/console/v2/hooks/h1"):
            self.hooks.pop("h1")
            return Response(status=204)
        return self.json({"error": f"no {request.method} {request.path}"}, 404)

    @staticmethod
    def json(value: Any, status: int) -> Response:
        return Response(json.dumps(value), status=status, content_type="application/json")


@pytest.fixture
def other_console(httpserver: HTTPServer) -> Iterator[tuple[OtherConsole, ApiClient, Recorder]]:
    console = OtherConsole()
    httpserver.expect_request(re.compile("/.*")).respond_with_handler(console)
    text = (BASE + OTHER_CONSOLE).replace(LOCAL, httpserver.url_for("").rstrip("/"))
    profile = parse_profile(text, env={})
    recorder = Recorder(profile.redactor())
    with ApiClient(profile, recorder) as client:
        yield console, client, recorder


def test_declaration_drives_a_console_with_other_paths_and_field_names(
    other_console: tuple[OtherConsole, ApiClient, Recorder],
) -> None:
    console, client, recorder = other_console
    adapter = make_adapter(client)
    token = adapter.login("login")  # from the Set-Cookie: the login answers no body
    assert token.reveal() == COOKIE
    created = adapter.create_key("login", "n-1", ["images:generate", "videos:generate"])
    assert (created.id, created.key.reveal()) == ("41", CREATED)
    assert console.seen[-1][2] == {
        "data": {"label": "n-1", "grants": ["images:generate", "videos:generate"], "kind": "api"}
    }
    detail = adapter.key_detail("login", created.id)
    assert (detail.name, detail.scopes) == ("n-1", ["images:generate", "videos:generate"])
    assert detail.signing_secret is not None
    assert detail.signing_secret.reveal() == CREATED_SIGNING
    assert adapter.list_keys("login").ids == ("41",)
    adapter.revoke_key("login", created.id)
    assert adapter.list_keys("login").ids == ()
    assert not leaks(recorder)
    assert "[redacted:adapter.create_key.key]" in recorder.exchanges[1].response_body
    assert "[redacted:adapter.key_detail.signing_secret]" in recorder.exchanges[2].response_body


def test_declaration_drives_the_webhook_operations_of_that_console(
    other_console: tuple[OtherConsole, ApiClient, Recorder],
) -> None:
    console, client, recorder = other_console
    make_adapter(client).login("login")
    webhook = register_webhook(client, "http://127.0.0.1:7/hook", session="login")
    assert (webhook.id, webhook.secret.reveal()) == ("h1", WHSEC)
    assert console.seen[-1][2] == {"target": "http://127.0.0.1:7/hook"}  # no events: left out
    listing = console_request(client, "list_webhooks", session="login")
    items = assert_webhook_list(listing, declared(client.profile, "list_webhooks"))
    assert [(item.id, item.url) for item in items] == [("h1", "http://127.0.0.1:7/hook")]
    pinged = console_request(client, "test_webhook", session="login", id=webhook.id)
    assert pinged.status_code == 200 and console.seen[-1][1] == "/console/v2/hooks/h1/ping"
    delete_webhook(client, webhook)
    assert not console.hooks
    assert not leaks(recorder)


# -- adapter classes from the entry-point group ---------------------------------------------

TEST_ADAPTER = '''
from conformance.target.adapters import DeclaredAdapter, KeyList


class ListingAdapter(DeclaredAdapter):
    """Declared operations, but a list of keys that needs code."""

    def list_keys(self, session):
        return KeyList(ids=("from-code",), body=[])


NOT_AN_ADAPTER = object()
'''


@pytest.fixture
def installed_adapter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A package registering two entry points, importable from a folder on sys.path."""
    (tmp_path / "genapi_test_adapter.py").write_text(TEST_ADAPTER, encoding="utf-8")
    info = tmp_path / "genapi_test_adapter-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: genapi-test-adapter\nVersion: 1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\n"
        "listing = genapi_test_adapter:ListingAdapter\n"
        "broken = genapi_test_adapter:NOT_AN_ADAPTER\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "genapi_test_adapter", raising=False)


@pytest.mark.usefixtures("installed_adapter")
def test_profile_names_an_adapter_class_registered_under_the_entry_point_group() -> None:
    profile = profile_with('[adapter]\npreset = "reference"\nentry_point = "listing"\n')
    client, _ = client_for(profile, FakeReferenceConsole())
    adapter = make_adapter(client)
    assert type(adapter).__name__ == "ListingAdapter" and isinstance(adapter, DeclaredAdapter)
    assert adapter.list_keys("primary").ids == ("from-code",)  # its code
    assert adapter.create_key("primary", "t", ["images:generate"]).id == "key_9"  # declared
    with pytest.raises(AdapterError, match=r"'broken' .* is not a subclass of"):
        adapter_class("broken")


@pytest.mark.usefixtures("installed_adapter")
def test_unregistered_entry_point_is_refused_at_profile_load() -> None:
    with pytest.raises(ProfileError) as refused:
        profile_with('[adapter]\nentry_point = "acme"\n')
    (problem,) = refused.value.problems
    assert problem.startswith("adapter.entry_point: no adapter 'acme' is registered under the ")
    assert "broken, declared, listing" in problem and "install the package" in problem


def test_the_suites_own_declared_adapter_is_registered() -> None:
    """The installed distribution's metadata carries the group (pyproject.toml)."""
    assert adapter_class("declared") is DeclaredAdapter
    profile = profile_with('[adapter]\npreset = "reference"\nentry_point = "declared"\n')
    client, _ = client_for(profile, FakeReferenceConsole())
    assert type(make_adapter(client)) is DeclaredAdapter


# -- the reference through a declaration that is not the preset ------------------------------


def spelled_out_reference() -> dict[str, Any]:
    """The reference's console, written out here in full (not read from the preset)."""
    return {
        "credential": {"scheme": "bearer"},
        "login": {
            "method": "POST",
            "path": "/api/session",
            "body": {"email": "{email}", "password": "{password}"},
            "status": 200,
            "token": "/token",
        },
        "create_key": {
            "method": "POST",
            "path": "/api/keys",
            "body": {"name": "{name}", "scopes": "{scopes}"},
            "status": 201,
            "id": "/id",
            "key": "/key",
        },
        "key_detail": {
            "method": "GET",
            "path": "/api/keys/{id}",
            "status": 200,
            "name": "/name",
            "scopes": "/scopes",
            "signing_secret": "/signing_secret",
        },
        "revoke_key": {"method": "DELETE", "path": "/api/keys/{id}", "status": 204},
        "list_keys": {
            "method": "GET",
            "path": "/api/keys",
            "status": 200,
            "list": "/keys",
            "item_id": "/id",
        },
        "create_webhook": {
            "method": "POST",
            "path": "/api/webhooks",
            "body": {"url": "{url}", "events": "{events}"},
            "status": 201,
            "id": "/id",
            "secret": "/secret",
        },
        "list_webhooks": {
            "method": "GET",
            "path": "/api/webhooks",
            "status": 200,
            "list": "/webhooks",
            "item_id": "/id",
            "item_url": "/url",
        },
        "test_webhook": {"method": "POST", "path": "/api/webhooks/{id}/test", "status": 200},
        "delete_webhook": {"method": "DELETE", "path": "/api/webhooks/{id}", "status": 204},
    }


@pytest.mark.timeout(900)
def test_key_and_console_checks_pass_against_the_reference_through_a_declaration(
    tmp_path: Path,
) -> None:
    with EmbeddedReference(dns=False) as provisioned:
        document = tomllib.loads(provisioned.read_text(encoding="utf-8"))
        assert document["adapter"] == {"preset": "reference"}
        document["adapter"] = spelled_out_reference()
        profile_path = tmp_path / "declared.toml"
        profile_path.write_text(tomli_w.dumps(document), encoding="utf-8")
        loaded = load_profile(profile_path, env={})
        reference = profile_with(REFERENCE).adapter
        assert loaded.adapter.preset is None
        assert loaded.adapter.operations == reference.operations
        areas = ("--area", "KEY", "--area", "CONSOLE")
        run = run_suite(tmp_path / "report", "--profile", str(profile_path), *areas, timeout=840)
    assert run.returncode == EXIT_OK, run.describe()
    verdicts = run.verdicts()
    checks = run.results["checks"] if run.results else []
    outcomes = {c["outcome"] for c in checks}
    assert outcomes == {"passed"}, [c for c in checks if c["outcome"] != "passed"]
    through_the_adapter = (
        "KEY-CREATE-01", "KEY-VIEW-01", "KEY-NAME-01", "KEY-ONCE-02", "KEY-REVOKE-01",
        "KEY-LIMIT-01", "KEY-LIMIT-03", "CONSOLE-HOOK-01", "CONSOLE-HOOK-07",
        "CONSOLE-LOGIN-01", "CONSOLE-PAYLOAD-01",
    )  # fmt: skip
    assert {i: verdicts[i] for i in through_the_adapter} == dict.fromkeys(
        through_the_adapter, "pass"
    )
