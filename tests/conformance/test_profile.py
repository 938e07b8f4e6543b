"""Profiles load from TOML, hide their secrets, and explain every problem with its fix."""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from pathlib import Path

import pytest

from conformance.secrets import Secret
from conformance.target.profile import (
    SCOPES,
    CapabilityMissing,
    Profile,
    ProfileError,
    WireProfile,
    load_profile,
    parse_profile,
    template_text,
    write_template,
)

PRIMARY_KEY = "gk_PROFILEcanary0primary0key0001"
SIGNING = "psk_PROFILEcanary0signing0000001"
TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwIn0.PROFILEcanary0token"

MINIMAL = f"""
base_url = "http://127.0.0.1:8765"
key_prefix = "gk"
[keys.primary]
key = "{PRIMARY_KEY}"
scopes = ["images:generate", "videos:generate"]
signing_secret = "{SIGNING}"
[keys.without-videos-generate]
key = "gk_other0key0value0000000000002"
scopes = ["images:generate"]
[keys.revoked]
key = "gk_revoked0key0value00000000003"
scopes = ["images:generate"]
revoked = true
[sessions.primary]
token = "{TOKEN}"
"""


def problems_of(text: str, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ProfileError) as caught:
        parse_profile(text, env=env or {})
    return caught.value.problems


def one_problem(text: str, env: dict[str, str] | None = None) -> str:
    problems = problems_of(text, env)
    assert len(problems) == 1, problems
    return problems[0]


def test_minimal_profile_loads_with_defaults() -> None:
    profile = parse_profile(MINIMAL, env={})
    assert profile.base_url == "http://127.0.0.1:8765"
    assert not profile.adapter.declared
    assert profile.api_version == "2026-08-01"
    assert profile.receiver.listen_port == 0
    assert profile.dns is None and profile.usage is None
    primary = profile.key("primary")
    assert primary.key == Secret(PRIMARY_KEY)
    assert primary.signing_secret == Secret(SIGNING)
    assert primary.account == "primary"
    assert primary.scopes == ("images:generate", "videos:generate")


def test_keys_by_scope_skip_revoked_keys() -> None:
    profile = parse_profile(MINIMAL, env={})
    assert [k.role for k in profile.keys_with_scope("images:generate")] == [
        "primary",
        "without-videos-generate",
    ]
    assert [k.role for k in profile.keys_without_scope("videos:generate")] == [
        "without-videos-generate"
    ]


def test_missing_role_and_session_are_capabilities_not_errors() -> None:
    profile = parse_profile(MINIMAL, env={})
    with pytest.raises(
        CapabilityMissing, match=r"needs key role 'foreign': add a \[keys.foreign\]"
    ):
        profile.key("foreign")
    with pytest.raises(CapabilityMissing, match=r"\[sessions.second\]"):
        profile.session("second")


def test_env_indirection_reads_secrets_from_environment() -> None:
    text = MINIMAL.replace(f'key = "{PRIMARY_KEY}"', 'key_env = "MY_KEY"').replace(
        f'signing_secret = "{SIGNING}"', 'signing_secret_env = "MY_SIGNING"'
    )
    profile = parse_profile(text, env={"MY_KEY": "gk_from_env_0000", "MY_SIGNING": "s_env"})
    assert profile.key("primary").key.reveal() == "gk_from_env_0000"
    assert profile.key("primary").signing_secret == Secret("s_env")


def test_secrets_never_in_repr_redacted_or_errors() -> None:
    profile = parse_profile(MINIMAL, env={})
    redacted = json.dumps(profile.redacted())
    for text in (
        repr(profile),
        str(profile),
        redacted,
        repr(profile.keys),
        repr(profile.redactor()),
    ):
        for secret in (PRIMARY_KEY, SIGNING, TOKEN):
            assert secret not in text
    assert profile.redacted()["keys"]["primary"]["key"] == "***"
    # A problem next to a secret does not quote the secret.
    bad = MINIMAL.replace('key_prefix = "gk"', 'key_prefix = "g k"').replace(
        f'token = "{TOKEN}"', f'token = "{TOKEN}"\npassword = ""'
    )
    with pytest.raises(ProfileError) as caught:
        parse_profile(bad, env={})
    assert PRIMARY_KEY not in str(caught.value) and TOKEN not in str(caught.value)
    assert "sessions.primary.password: a secret is not valid" in str(caught.value)


def test_redacted_is_stable_for_hashing() -> None:
    first = parse_profile(MINIMAL, env={}).redacted()
    second = parse_profile(MINIMAL, env={}).redacted()
    digest = [
        hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest() for d in (first, second)
    ]
    assert digest[0] == digest[1]


def test_profile_redactor_knows_every_secret() -> None:
    profile = parse_profile(MINIMAL, env={})
    redactor = profile.redactor()
    masked = redactor.text(f"{PRIMARY_KEY} {SIGNING} {TOKEN} gk_revoked0key0value00000000003")
    assert "[redacted:keys.primary.key]" in masked
    assert "[redacted:keys.primary.signing_secret]" in masked
    assert "[redacted:sessions.primary.token]" in masked
    assert "[redacted:keys.revoked.key]" in masked


def test_profile_is_frozen() -> None:
    profile = parse_profile(MINIMAL, env={})
    with pytest.raises(AttributeError):
        profile.base_url = "http://elsewhere"  # type: ignore[misc]
    with pytest.raises(TypeError):
        profile.keys["x"] = profile.key("primary")  # type: ignore[index]


# -- validation errors name the field and the fix --------------------------------------


def test_missing_base_url() -> None:
    problem = one_problem(MINIMAL.replace('base_url = "http://127.0.0.1:8765"', ""))
    assert problem.startswith("base_url: missing; set base_url to")


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/", "127.0.0.1:8765", "file:///etc/passwd"])
def test_base_url_not_http(url: str) -> None:
    problem = one_problem(MINIMAL.replace("http://127.0.0.1:8765", url))
    assert problem.startswith("base_url: scheme")
    assert "set base_url to an http(s) URL" in problem


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:1", "https://localhost", "http://[::1]:8080", "http://127.9.9.9"]
)
def test_base_url_loopback_needs_no_permission(url: str) -> None:
    assert parse_profile(MINIMAL.replace("http://127.0.0.1:8765", url), env={}).base_url == url


@pytest.mark.parametrize(
    "url", ["https://api.example.com", "http://10.0.0.1:80", "http://0.0.0.0:8765", "http://[::]:1"]
)
def test_base_url_remote_needs_allow_remote(url: str) -> None:
    text = MINIMAL.replace("http://127.0.0.1:8765", url)
    problem = one_problem(text)
    assert problem.startswith("base_url: host")
    assert "not loopback" in problem and "set allow_remote = true" in problem
    allowed = parse_profile("allow_remote = true\n" + text, env={})
    assert allowed.allow_remote is True


def test_key_without_key_or_env() -> None:
    text = MINIMAL.replace(f'key = "{PRIMARY_KEY}"\n', "")
    assert one_problem(text) == (
        "keys.primary.key: missing; set it or set key_env to the name of an environment variable"
    )


def test_key_env_unset() -> None:
    text = MINIMAL.replace(f'key = "{PRIMARY_KEY}"', 'key_env = "GENAPI_TEST_UNSET_VAR"')
    problem = one_problem(text, env={"OTHER": "x"})
    assert problem.startswith("keys.primary.key_env: environment variable GENAPI_TEST_UNSET_VAR")
    assert "export GENAPI_TEST_UNSET_VAR" in problem


def test_key_and_key_env_both_set() -> None:
    text = MINIMAL.replace(f'key = "{PRIMARY_KEY}"', f'key = "{PRIMARY_KEY}"\nkey_env = "X"')
    assert "keep one" in one_problem(text, env={"X": "y"})


def test_unknown_scope_lists_the_spec_scopes() -> None:
    problem = one_problem(MINIMAL.replace('"videos:generate"]', '"video:generate"]'))
    assert problem.startswith("keys.primary.scopes.1: 'video:generate' is not valid")
    for scope in SCOPES:
        assert scope in problem


@pytest.mark.parametrize(
    ("typo", "suggestion"),
    [("[reciever]", "receiver"), ("[sandbox_]", "sandbox"), ("[budget]", "budgets")],
)
def test_unknown_top_level_table_suggests_the_name(typo: str, suggestion: str) -> None:
    problem = one_problem(f"{MINIMAL}\n{typo}\n")
    assert problem == f"{typo.strip('[]')}: unknown field; did you mean {suggestion!r}?"


def test_unknown_field_inside_a_key() -> None:
    problem = one_problem(MINIMAL.replace("revoked = true", "revokd = true"))
    assert problem == "keys.revoked.revokd: unknown field; did you mean 'revoked'?"


@pytest.mark.parametrize("port", ["70000", "-1", '"8080"'])
def test_bad_receiver_port(port: str) -> None:
    problem = one_problem(f"{MINIMAL}\n[receiver]\nlisten_port = {port}\n")
    assert problem.startswith("receiver.listen_port:")
    assert "set listen_port to a TCP port between 1 and 65535, or 0 for a free port" in problem


def test_bad_public_url() -> None:
    problem = one_problem(f'{MINIMAL}\n[receiver]\npublic_url = "tunnel.example.net"\n')
    assert problem.startswith("receiver.public_url:") and "http(s) URL" in problem


def test_dns_must_be_loopback_and_complete() -> None:
    assert "dns.domain: missing" in one_problem(f'{MINIMAL}\n[dns]\nserver = "127.0.0.1:53"\n')
    remote = f'{MINIMAL}\n[dns]\nserver = "10.0.0.1:53"\ndomain = "x.test"\n'
    assert one_problem(remote).startswith("dns.server: '10.0.0.1' is not loopback")
    ok = parse_profile(f'{MINIMAL}\n[dns]\nserver = "[::1]:5353"\ndomain = "X.Test"\n', env={})
    assert ok.dns is not None and (ok.dns.host, ok.dns.port, ok.dns.domain) == (
        "::1",
        5353,
        "x.test",
    )


def test_dns_zone_dir_is_optional_and_absolute() -> None:
    """``zone_dir`` names the zone of a DNS server already serving the run (the embedded
    run writes it); without it the run's pytest processes serve the zone themselves."""
    dns = '[dns]\nserver = "127.0.0.1:5353"\ndomain = "x.test"\n'
    plain = parse_profile(f"{MINIMAL}\n{dns}", env={})
    assert plain.dns is not None and plain.dns.zone_dir is None
    assert plain.redacted()["dns"]["zone_dir"] is None
    given = parse_profile(f'{MINIMAL}\n{dns}zone_dir = "/tmp/run/dns-zone"\n', env={})
    assert given.dns is not None and given.dns.zone_dir == Path("/tmp/run/dns-zone")
    assert given.redacted()["dns"]["zone_dir"] == "/tmp/run/dns-zone"
    problem = one_problem(f'{MINIMAL}\n{dns}zone_dir = "relative/zone"\n')
    assert problem.startswith("dns.zone_dir:") and "absolute path" in problem


def test_every_problem_is_reported_at_once() -> None:
    text = MINIMAL.replace("http://127.0.0.1:8765", "ftp://x").replace(
        f'key = "{PRIMARY_KEY}"\n', ""
    )
    problems = problems_of(f"{text}\n[reciever]\n")
    fields = sorted(p.split(":")[0] for p in problems)
    assert fields == ["base_url", "keys.primary.key", "reciever"]


def test_not_toml() -> None:
    assert one_problem("base_url = ").startswith("not valid TOML:")


# -- [wire] and [rate]: the deployment's choices where the spec leaves a word -------------


def test_wire_and_rate_default_to_the_spec_reading() -> None:
    profile = parse_profile(MINIMAL, env={})
    assert profile.wire == WireProfile(header_brand="Service", secret_keying="utf8")
    assert profile.rate.request == "reads"
    assert profile.wire.header("Signature") == "X-Service-Signature"
    assert profile.redacted()["wire"] == {"header_brand": "Service", "secret_keying": "utf8"}
    assert profile.redacted()["rate"] == {"request": "reads"}


def test_wire_names_every_delivery_header_with_the_brand_word() -> None:
    text = f'{MINIMAL}\n[wire]\nheader_brand = "Acme"\nsecret_keying = "base64-after-prefix"\n'
    profile = parse_profile(f'{text}[rate]\nrequest = "submits"\n', env={})
    assert profile.wire.header("Signature") == "X-Acme-Signature"
    assert profile.wire.delivery_headers == (
        "X-Acme-Event",
        "X-Acme-Delivery",
        "X-Acme-Attempt",
        "X-Acme-Generation",
        "X-Acme-Signature",
    )
    assert profile.wire.secret_keying == "base64-after-prefix"
    assert profile.rate.request == "submits"
    assert profile.redacted()["wire"]["header_brand"] == "Acme"
    assert WireProfile(header_brand="Big-Co").header("Event") == "X-Big-Co-Event"
    with pytest.raises(ValueError, match="not a delivery header"):
        profile.wire.header("signature")


@pytest.mark.parametrize("brand", ['"X-Acme"', '"x-acme"', '"Acme Corp"', '""', '"-Acme"', "7"])
def test_bad_header_brand_names_the_field_and_fix(brand: str) -> None:
    problem = one_problem(f"{MINIMAL}\n[wire]\nheader_brand = {brand}\n")
    assert problem.startswith("wire.header_brand:")
    assert 'e.g. "Acme" for X-Acme-Signature' in problem


@pytest.mark.parametrize(
    ("field", "bad", "choices"),
    [
        pytest.param("wire.secret_keying", "base64", ("utf8", "base64-after-prefix"), id="keying"),
        pytest.param("rate.request", "writes", ("reads", "submits"), id="request"),
    ],
)
def test_bad_choice_lists_the_valid_ones(field: str, bad: str, choices: tuple[str, str]) -> None:
    table, name = field.split(".")
    problem = one_problem(f'{MINIMAL}\n[{table}]\n{name} = "{bad}"\n')
    assert problem.startswith(f"{field}: {bad!r} is not valid")
    assert all(f'"{choice}"' in problem for choice in choices)


def test_wire_typo_suggests_the_field() -> None:
    problem = one_problem(f'{MINIMAL}\n[wire]\nheader_brnad = "Acme"\n')
    assert problem == "wire.header_brnad: unknown field; did you mean 'header_brand'?"


def test_load_profile_missing_file_says_how_to_create_one(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="genapi-conformance init-profile"):
        load_profile(tmp_path / "absent.toml")


# -- the template ---------------------------------------------------------------------


def template_env() -> dict[str, str]:
    names = sorted(set(re.findall(r'^\w+_env = "([A-Z0-9_]+)"', template_text(), flags=re.M)))
    assert "GENAPI_KEY_PRIMARY" in names
    return {name: f"value-of-{name.lower()}-0123456789" for name in names}


def test_template_loads_once_filled_in_through_env(tmp_path: Path) -> None:
    path = write_template(tmp_path / "profiles" / "mine.toml")
    profile = load_profile(path, env=template_env())
    assert isinstance(profile, Profile)
    assert profile.key("primary").scopes == SCOPES
    assert profile.key("primary").key.reveal() == "value-of-genapi_key_primary-0123456789"
    assert profile.key("revoked").revoked
    assert profile.key("foreign").account != profile.key("primary").account
    assert profile.key("low-limit").account not in {"primary", "second"}
    assert {"primary", "second"} <= set(profile.sessions)
    # the scope matrix: a key lacking images:generate exists
    assert profile.keys_without_scope("images:generate")
    # the wire and rate tables state the defaults
    assert profile.wire == WireProfile() and profile.rate.request == "reads"


def test_template_unfilled_names_each_variable(tmp_path: Path) -> None:
    path = write_template(tmp_path / "t.toml")
    with pytest.raises(ProfileError) as caught:
        load_profile(path, env={})
    assert len(caught.value.problems) == len(template_env())


def test_template_is_commented_line_by_line() -> None:
    for number, line in enumerate(template_text().splitlines(), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and "=" in stripped:
            if "#" not in stripped:
                previous = template_text().splitlines()[number - 2].strip()
                assert previous.startswith("#"), f"line {number} lacks a comment"


def test_template_commented_optional_tables_are_valid_when_enabled() -> None:
    text = re.sub(
        r"^# (\[dns\]|\[usage\]|server|domain|zone_dir|path = \"/v1|field)",
        r"\1",
        template_text(),
        flags=re.M,
    )
    document = tomllib.loads(text)
    assert "dns" in document and "usage" in document
    profile = parse_profile(text, env=template_env())
    assert profile.dns is not None and profile.usage is not None
    assert profile.dns.zone_dir is not None


def test_write_template_refuses_to_overwrite(tmp_path: Path) -> None:
    path = write_template(tmp_path / "p.toml")
    path.write_text("mine", encoding="utf-8")
    with pytest.raises(FileExistsError):
        write_template(path)
    assert path.read_text(encoding="utf-8") == "mine"
    write_template(path, overwrite=True)
    assert path.read_text(encoding="utf-8") == template_text()


def test_missing_keys_table() -> None:
    text = MINIMAL.split("[keys.primary]")[0]
    assert one_problem(text) == (
        "keys: missing; add at least a [keys.primary] table with key (or key_env) and scopes"
    )


def test_session_without_any_credential() -> None:
    text = MINIMAL.replace(f'token = "{TOKEN}"', 'email_typo = "x"')
    problems = problems_of(text)
    assert "sessions.primary.email_typo: unknown field; did you mean 'email'?" in problems
    assert any(
        p.startswith("sessions.primary.token: missing; set token (or token_env)") for p in problems
    )


def test_session_with_credentials_for_the_adapter() -> None:
    text = MINIMAL.replace(f'token = "{TOKEN}"', 'email = "a@b.test"\npassword_env = "PW"')
    session = parse_profile(text, env={"PW": "hunter2-hunter2"}).session("primary")
    assert session.token is None and session.email == "a@b.test"
    assert session.password == Secret("hunter2-hunter2")


# -- [adapter] -----------------------------------------------------------------------------


def adapter_problems(table: str) -> list[str]:
    return problems_of(MINIMAL + table)


def test_adapter_short_forms_name_a_preset_or_nothing() -> None:
    reference = parse_profile(
        MINIMAL.replace("[keys.primary]", 'adapter = "reference"\n[keys.primary]')
    )
    assert reference.adapter.preset == "reference" and reference.adapter.declared
    none = parse_profile(MINIMAL.replace("[keys.primary]", 'adapter = "none"\n[keys.primary]'))
    assert not none.adapter.declared and "create_webhook" in none.adapter.operations


def test_adapter_short_form_typo_names_the_table_form() -> None:
    text = MINIMAL.replace("[keys.primary]", 'adapter = "refrence"\n[keys.primary]')
    assert one_problem(text).startswith(
        'adapter: expected object, got str; write an [adapter] table: preset = "reference"'
    )


def test_adapter_unknown_operation_and_field_suggest_the_name() -> None:
    problems = adapter_problems(
        '[adapter.create_keys]\npath = "/k"\n[adapter.key_detail]\npth = "/k/{id}"\n'
    )
    assert "adapter.create_keys: unknown field; did you mean 'create_key'?" in problems
    assert "adapter.key_detail.pth: unknown field; did you mean 'path'?" in problems


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        (
            '[adapter.login]\npath = "/s"\ntoken = "token"\n',
            "adapter.login.token: 'token' is not valid (pattern); write an RFC 6901 JSON "
            'pointer: "" for the whole answer, or "/member/0/field"; or a list of them, '
            "tried in order",
        ),
        (
            '[adapter.revoke_key]\npath = "/k/{id}"\nstatus = 99\n',
            "adapter.revoke_key.status: 99 is not valid (minimum); set status to the expected "
            "HTTP status (e.g. 201) or a list of them (e.g. [200, 204])",
        ),
        (
            '[adapter.revoke_key]\npath = "/k/{id}"\nmethod = "delete"\n',
            "adapter.revoke_key.method: 'delete' is not valid (enum); set method to GET, POST, "
            "PUT, PATCH or DELETE (upper case)",
        ),
        (
            '[adapter.revoke_key]\npath = "k/{id}"\n',
            "adapter.revoke_key.path: 'k/{id}' is not valid (pattern); set path to a path from "
            'the base URL, starting with "/", with {id} where an id goes, e.g. "/api/keys/{id}"',
        ),
        (
            '[adapter.revoke_key]\npath = "/k"\n',
            "adapter.revoke_key.path: no {id}; put the placeholder where the id goes, e.g. "
            '"/api/keys/{id}"',
        ),
        (
            '[adapter.login]\npath = "/s"\nbody = { user = "{username}" }\ntoken = "/t"\n',
            "adapter.login.body: unknown placeholder {username}; this operation offers "
            "{email}, {password}",
        ),
        (
            '[adapter.create_webhook]\nbody = { events = "all of {events}" }\n',
            "adapter.create_webhook.body: {events} is an array; write it as a whole string "
            'value, e.g. events = "{events}"',
        ),
        (
            '[adapter.create_key]\npath = "/k"\nkey = "/key"\n',
            "adapter.create_key.id: missing; set it to the RFC 6901 JSON pointer to the new "
            'key\'s id in the answer, e.g. "/id" (or set preset = "reference")',
        ),
        (
            '[adapter.list_keys]\nlist = "/keys"\nitem_id = "/id"\n',
            "adapter.list_keys.path: missing; set path to the console path of this operation, "
            'e.g. "/api/keys/{id}" (or set preset = "reference")',
        ),
        (
            '[adapter.credential]\nscheme = "cookie"\n',
            'adapter.credential.cookie: missing; name the session cookie, e.g. cookie = "session"',
        ),
        (
            '[adapter]\npreset = "acme"\n',
            "adapter.preset: no preset 'acme'; known: reference",
        ),
    ],
    ids=[
        "pointer-syntax",
        "status-range",
        "method-case",
        "path-relative",
        "path-without-id",
        "unknown-placeholder",
        "array-placeholder-in-text",
        "pointer-missing",
        "path-missing",
        "cookie-unnamed",
        "unknown-preset",
    ],
)
def test_bad_adapter_declaration_names_the_field_and_the_fix(table: str, expected: str) -> None:
    assert adapter_problems(table) == [expected]


def test_adapter_declaration_accepts_a_complete_other_console() -> None:
    profile = parse_profile(
        MINIMAL
        + '[adapter.credential]\nscheme = "cookie"\ncookie = "sid"\n'
        + '[adapter.login]\npath = "/console/login"\nbody = { u = "{email}", p = "{password}" }\n'
        + '[adapter.key_detail]\npath = "/console/keys/{id}"\nname = "/n"\n'
        + 'scopes = ["/s", "/data/s"]\nsigning_secret = "/hmac"\n'
    )
    declaration = profile.adapter
    assert declaration.declared and declaration.credential.headers("t") == {"Cookie": "sid=t"}
    assert declaration.operations["login"].pointers == {}  # its Set-Cookie gives the token
    assert declaration.operations["key_detail"].pointers["scopes"] == ("/s", "/data/s")
    assert "create_key" not in declaration.operations


def test_template_commented_adapter_tables_are_valid_when_enabled() -> None:
    template = template_text()
    start, end = template.index("[adapter]"), template.index("[receiver]")
    section = re.sub(
        r"^# (\[adapter\.|[a-z_]+ = )", r"\1", template[start:end], flags=re.M
    ).replace('entry_point = "acme"', "")
    text = template[:start] + section + template[end:]
    declaration = parse_profile(text, env=template_env()).adapter
    assert declaration.preset == "reference"
    assert declaration.operations["key_detail"].path == "/api/keys/{id}"
    assert declaration.operations["list_webhooks"].pointers["list"] == ("/webhooks",)


def test_public_surface() -> None:
    import conformance.target.profile as module

    assert all(hasattr(module, name) for name in module.__all__)
    assert {
        "Profile",
        "KeyProfile",
        "ProfileError",
        "CapabilityMissing",
        "load_profile",
        "write_template",
    } <= set(module.__all__)
