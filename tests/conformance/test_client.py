"""The client authenticates by role, bounds its requests, waits out 429 and records redacted."""

from __future__ import annotations

import json
import logging
import re
import shlex
import subprocess
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
from profiles import LOCAL, profile_text
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from conformance.evidence import Exchange, default_env_var
from conformance.target.adapters import AdapterError, make_adapter
from conformance.target.client import (
    EXCHANGES_KEY,
    MAX_429_SECONDS,
    MAX_RESPONSE_BYTES,
    ApiClient,
    BudgetExceeded,
    Recorder,
    ResponseTooLarge,
    parse_retry_after,
)
from conformance.target.profile import CapabilityMissing, Profile, parse_profile

PRIMARY = "gk_CLIENTcanary0primary0key000001"
LIMITED = "gk_CLIENTcanary0limited0key000002"
SIGNING = "psk_CLIENTcanary0signing000000003"
TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwIn0.CLIENTcanary0token"
PASSWORD = "CLIENTcanary password/+&="
CREATED = "gk_CLIENTcanary0created0key000004"
CREATED_SIGNING = "psk_CLIENTcanary0created0signing05"
ALL_SECRETS = (PRIMARY, LIMITED, SIGNING, TOKEN, PASSWORD, CREATED, CREATED_SIGNING)

PROFILE = profile_text(
    PRIMARY,
    TOKEN,
    key_fields=f'signing_secret = "{SIGNING}"\n',
    tables=f'''[keys.low-limit]
key = "{LIMITED}"
account = "low-limit"
scopes = ["images:generate"]
[sessions.login]
email = "user@example.test"
password = "{PASSWORD}"
''',
)

Handler = Callable[[httpx.Request], httpx.Response]


def make_client(
    profile: Profile, handler: Handler, **kwargs: object
) -> tuple[ApiClient, Recorder, list[float]]:
    recorder = Recorder(profile.redactor())
    slept: list[float] = []
    client = ApiClient(
        profile,
        recorder,
        transport=httpx.MockTransport(handler),
        sleep=slept.append,
        **kwargs,  # type: ignore[arg-type]
    )
    return client, recorder, slept


def echo(request: httpx.Request) -> httpx.Response:
    return httpx.Response(
        200,
        json={"authorization": request.headers.get("authorization"), "path": request.url.path},
    )


def leaks(recorder: Recorder) -> list[str]:
    """Every canary secret found anywhere in the record (fields, dicts, curl lines)."""
    found = []
    for exchange in recorder.exchanges:
        texts = [repr(exchange), json.dumps(exchange.to_dict()), exchange.as_curl()]
        found += [s for s in ALL_SECRETS for t in texts if s in t]
    return found


def test_role_selects_the_key(profile: Profile) -> None:
    client, recorder, _ = make_client(profile, echo)
    assert client.get("/v1/x").json()["authorization"] == f"Bearer {PRIMARY}"
    assert client.get("/v1/x", role="low-limit").json()["authorization"] == f"Bearer {LIMITED}"
    assert client.get("/v1/x", role="none").json()["authorization"] is None
    assert client.get("/api/x", session="primary").json()["authorization"] == f"Bearer {TOKEN}"
    explicit = client.get("/v1/x", headers={"Authorization": "Bearer gk_forged"})
    assert explicit.json()["authorization"] == "Bearer gk_forged"
    assert len(recorder.exchanges) == 5
    assert not leaks(recorder)


COOKIE_PROFILE = (
    PROFILE
    + """
[adapter.credential]
scheme = "cookie"
cookie = "console_sid"
[adapter.create_key]
path = "/console/credentials"
body = { label = "{name}" }
id = "/data/ref"
key = "/data/value"
"""
)


def test_session_travels_as_the_declared_cookie(profile: Profile) -> None:
    cookie_profile = parse_profile(COOKIE_PROFILE, env={})

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            json={
                "cookie": request.headers.get("cookie"),
                "auth": request.headers.get("authorization"),
            },
        )

    client, recorder, _ = make_client(cookie_profile, handler)
    assert client.get("/api/x", session="primary").json() == {
        "cookie": f"console_sid={TOKEN}",
        "auth": None,
    }
    assert client.get("/v1/x").json()["auth"] == f"Bearer {PRIMARY}"  # keys stay Bearer
    bearer_client, _, _ = make_client(profile, handler)
    assert bearer_client.get("/api/x", session="primary").json()["auth"] == f"Bearer {TOKEN}"
    assert not leaks(recorder)


def test_a_cookie_set_by_one_answer_is_never_sent_with_the_next(profile: Profile) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            json={"cookie": request.headers.get("cookie")},
            headers={"Set-Cookie": "console_sid=CLIENTcanary0setcookie; Path=/"},
        )

    client, _, _ = make_client(profile, handler)
    client.get("/api/first", role="none")
    assert client.get("/api/second", role="none").json()["cookie"] is None


def test_secrets_where_the_declaration_points_are_masked_in_the_record() -> None:
    """A key under a field name the redactor does not know, and the session cookie, are
    learned before the exchange is recorded."""
    cookie_profile = parse_profile(COOKIE_PROFILE, env={})
    unusual = "CLIENTcanary0unusual0field0name07"
    cookie = "CLIENTcanary0session0cookie00008"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            201,
            json={"data": {"ref": "c_1", "value": unusual}},
            headers={"Set-Cookie": f"console_sid={cookie}; HttpOnly"},
        )

    client, recorder, _ = make_client(cookie_profile, handler)
    client.post("/base/console/credentials", session="primary", json={"label": "n"})
    client.get("/v1/echo", headers={"X-Echo": f"{unusual} {cookie}"})
    texts = [json.dumps(e.to_dict()) for e in recorder.exchanges]
    assert not [t for t in texts if unusual in t or cookie in t]
    assert "[redacted:adapter.create_key.key]" in texts[0]
    assert "[redacted:adapter.credential.console_sid]" in texts[0]


def test_missing_role_or_session_token_is_a_capability(profile: Profile) -> None:
    client, _, _ = make_client(profile, echo)
    with pytest.raises(CapabilityMissing, match="key role 'foreign'"):
        client.get("/v1/x", role="foreign")
    with pytest.raises(CapabilityMissing, match="console session 'absent'"):
        client.get("/api/x", session="absent")
    with pytest.raises(CapabilityMissing, match="a token for console session 'login'"):
        client.get("/api/x", session="login")
    with pytest.raises(ValueError, match="not both"):
        client.get("/api/x", session="primary", role="primary")
    with pytest.raises(ValueError, match="must start with '/'"):
        client.get("http://elsewhere.example/v1/x")


def test_exchange_records_what_was_sent_and_received(profile: Profile) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            202, json={"id": "gen_1", "echo": json.loads(request.content)}, headers={"X-A": "1"}
        )

    client, recorder, _ = make_client(profile, handler)
    client.post("/v1/images/generate", json={"prompt": "a cat"}, params={"q": "1"})
    (exchange,) = recorder.exchanges
    assert exchange.method == "POST"
    assert exchange.url == "http://127.0.0.1:9/v1/images/generate?q=1"
    assert ("authorization", "Bearer [redacted:keys.primary.key]") in exchange.request_headers
    assert json.loads(exchange.request_body) == {"prompt": "a cat"}
    assert exchange.status == 202
    assert ("x-a", "1") in exchange.response_headers
    assert json.loads(exchange.response_body)["id"] == "gen_1"
    assert exchange.elapsed_ms >= 0 and exchange.started_at <= time.time()


def test_secrets_in_bodies_urls_and_responses_are_masked(profile: Profile) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        # A careless IUT echoing secrets back, and a key shown once.
        return httpx.Response(
            201,
            json={"echo": request.url.query.decode(), "key": CREATED, "sig": SIGNING},
            headers={"X-Echo": request.headers["authorization"]},
        )

    client, recorder, _ = make_client(profile, handler)
    client.post(
        "/v1/x", params={"api_key": PRIMARY}, json={"secret": SIGNING, "note": f"t={TOKEN}"}
    )
    client.post("/v1/x", content=f"raw {LIMITED} body".encode(), headers={"X-Key": LIMITED})
    client.get("/v1/x", headers={"Authorization": f"Bearer {CREATED}"})
    assert not leaks(recorder)
    # the created key was learned from the first response and masked in the later request
    assert ("authorization", "Bearer [redacted:learned.key]") in recorder.exchanges[
        2
    ].request_headers
    assert '"${GENAPI_SECRET_LEARNED_KEY}"' in recorder.exchanges[2].as_curl()


def test_transport_errors_are_recorded_and_raised(profile: Profile) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"refused for {request.headers['authorization']}")

    client, recorder, _ = make_client(profile, handler)
    with pytest.raises(httpx.ConnectError):
        client.get("/v1/x")
    (exchange,) = recorder.exchanges
    assert exchange.status is None
    assert exchange.error is not None and exchange.error.startswith("ConnectError: refused")
    assert not leaks(recorder)


def test_budget_bounds_requests(profile: Profile) -> None:
    client, recorder, _ = make_client(profile, echo, budget=3)
    for _ in range(3):
        client.get("/v1/x")
    with pytest.raises(BudgetExceeded, match="budget of 3 requests"):
        client.get("/v1/x")
    assert len(recorder.exchanges) == 3


def rate_limited(statuses: list[int], retry_after: str | None = "2") -> Handler:
    remaining = list(statuses)

    def handler(request: httpx.Request) -> httpx.Response:
        status = remaining.pop(0)
        headers = {"Retry-After": retry_after} if status == 429 and retry_after else {}
        return httpx.Response(status, json={"detail": "slow down"}, headers=headers)

    return handler


def test_patient_client_waits_retry_after_then_retries(profile: Profile) -> None:
    client, recorder, slept = make_client(profile, rate_limited([429, 429, 200]))
    assert client.get("/v1/x").status_code == 200
    assert slept == [2.0, 2.0]  # Retry-After 2, then max(2, backoff 2)
    assert [e.status for e in recorder.exchanges] == [429, 429, 200]


def test_patient_client_backs_off_exponentially_and_gives_up(profile: Profile) -> None:
    client, recorder, slept = make_client(profile, rate_limited([429] * 10, retry_after=None))
    assert client.get("/v1/x").status_code == 429
    assert slept == [1.0, 2.0, 4.0]  # at most 3 waits
    assert len(recorder.exchanges) == 4


def test_patient_client_total_wait_is_bounded(profile: Profile) -> None:
    client, recorder, slept = make_client(profile, rate_limited([429] * 10, retry_after="40"))
    assert client.get("/v1/x").status_code == 429
    assert slept == [40.0]  # a second 40 s wait would pass the 65 s bound
    assert sum(slept) <= MAX_429_SECONDS
    assert len(recorder.exchanges) == 2


def test_impatient_client_returns_the_first_429(profile: Profile) -> None:
    client, recorder, slept = make_client(profile, rate_limited([429, 200]))
    assert client.get("/v1/x", patient=False).status_code == 429
    assert slept == [] and len(recorder.exchanges) == 1


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("5", 5.0),
        (" 0 ", 0.0),
        ("Wed, 21 Oct 2015 07:28:10 GMT", 10.0),
        ("Wed, 21 Oct 2015 07:27:00 GMT", 0.0),  # in the past: do not wait
        ("-1", None),
        ("soon", None),
        (None, None),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert parse_retry_after(value, now=now) == expected


def test_curl_line_reproduces_the_request_with_env_vars(profile: Profile) -> None:
    client, recorder, _ = make_client(profile, echo)
    client.post("/v1/images/generate?x=1", json={"prompt": "it's a $HOME `cat`"})
    line = recorder.exchanges[0].as_curl()
    assert PRIMARY not in line
    assert '"${GENAPI_KEY_PRIMARY}"' in line
    words = shlex.split(line)
    assert words[:6] == [
        "curl",
        "-sS",
        "-i",
        "-X",
        "POST",
        "http://127.0.0.1:9/v1/images/generate?x=1",
    ]
    assert "Authorization: Bearer ${GENAPI_KEY_PRIMARY}".lower() in [w.lower() for w in words]
    assert json.loads(words[words.index("--data-binary") + 1]) == {"prompt": "it's a $HOME `cat`"}
    assert not any(w.lower().startswith(("host:", "content-length:")) for w in words)


def test_curl_line_expands_in_a_real_shell(profile: Profile) -> None:
    client, recorder, _ = make_client(profile, echo)
    client.post("/v1/x", json={"prompt": 'q\'uote "d" $(no) \\n'})
    line = recorder.exchanges[0].as_curl().replace("curl", "printf '%s\\n'", 1)
    out = subprocess.run(  # noqa: S603 (a fixed argv, no network: printf only)
        ["/bin/sh", "-c", line],
        env={"GENAPI_KEY_PRIMARY": "from-env"},
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    ).stdout.splitlines()
    assert "authorization: Bearer from-env" in [w.lower().replace("bearer", "Bearer") for w in out]
    assert json.loads(out[out.index("--data-binary") + 1]) == {"prompt": 'q\'uote "d" $(no) \\n'}


@pytest.mark.parametrize(
    ("label", "var"),
    [
        ("keys.primary.key", "GENAPI_KEY_PRIMARY"),
        ("keys.without-images-generate.key", "GENAPI_KEY_WITHOUT_IMAGES_GENERATE"),
        ("keys.foreign.signing_secret", "GENAPI_SIGNING_SECRET_FOREIGN"),
        ("sessions.second.token", "GENAPI_SESSION_SECOND"),
        ("learned.key", "GENAPI_SECRET_LEARNED_KEY"),
    ],
)
def test_default_env_var(label: str, var: str) -> None:
    assert default_env_var(label) == var


def test_long_bodies_are_cut(profile: Profile) -> None:
    client, recorder, _ = make_client(
        profile, lambda r: httpx.Response(200, content=b"x" * 100_000)
    )
    client.get("/v1/x")
    body = recorder.exchanges[0].response_body
    assert len(body) < 70_000 and body.endswith("more bytes not recorded]")


def test_a_retry_after_of_a_day_is_not_waited(profile: Profile) -> None:
    client, recorder, slept = make_client(profile, rate_limited([429] * 10, retry_after="86400"))
    assert client.get("/v1/x").status_code == 429
    assert slept == [] and len(recorder.exchanges) == 1


def test_a_declared_body_over_the_cap_is_refused_unread(profile: Profile) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Length": str(100 * 2**20)}, content=b"")

    client, recorder, _ = make_client(profile, handler)
    with pytest.raises(ResponseTooLarge, match="declares a body of 104857600 bytes"):
        client.get("/v1/x")
    assert recorder.exchanges[0].error is not None


def test_a_streamed_body_over_the_cap_is_cut_off(profile: Profile) -> None:
    read: list[int] = []

    def endless() -> Iterator[bytes]:
        for _ in range(100):
            read.append(1)
            yield b"x" * 2**20

    client, _, _ = make_client(profile, lambda r: httpx.Response(200, content=endless()))
    with pytest.raises(ResponseTooLarge, match=f"passed {MAX_RESPONSE_BYTES} bytes"):
        client.get("/v1/x")
    assert len(read) == MAX_RESPONSE_BYTES // 2**20 + 1  # not one chunk more


def test_a_body_that_drips_past_the_timeout_is_cut_off() -> None:
    profile = parse_profile(PROFILE + "[timing]\nrequest_timeout_seconds = 1\n", env={})
    clock = [0.0]

    def drip() -> Iterator[bytes]:
        for _ in range(100):
            clock[0] += 0.4  # each byte "arrives" 0.4 s after the last
            yield b" "

    client, _, _ = make_client(profile, lambda r: httpx.Response(200, content=drip()))
    real = time.monotonic
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(time, "monotonic", lambda: real() + clock[0])
        with pytest.raises(httpx.ReadTimeout, match="drips its answer"):
            client.get("/v1/x")
    assert clock[0] < 2.0


def test_exchanges_key_is_a_stash_key() -> None:
    stash = pytest.Stash()
    stash[EXCHANGES_KEY] = []
    assert stash[EXCHANGES_KEY] == []
    assert Exchange.__dataclass_fields__.keys() >= {
        "method",
        "url",
        "request_headers",
        "request_body",
        "status",
        "response_headers",
        "response_body",
        "elapsed_ms",
    }


def test_http_library_logs_do_not_show_secrets(
    profile: Profile, caplog: pytest.LogCaptureFixture
) -> None:
    client, _, _ = make_client(profile, echo)
    with caplog.at_level(logging.DEBUG):
        client.get("/v1/x", params={"api_key": PRIMARY, "t": TOKEN})
    assert "HTTP Request: GET" in caplog.text  # httpx logged the URL …
    for secret in ALL_SECRETS:
        assert secret not in caplog.text  # … with the secrets masked
    assert "[redacted:keys.primary.key]" in caplog.text


def test_planted_secrets_never_reach_the_record_over_a_real_socket(
    httpserver: HTTPServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A loopback IUT that echoes everything it gets (headers, query, body) back."""

    def echo_all(request: Request) -> Response:
        body = json.dumps(
            {
                "headers": dict(request.headers),
                "query": request.query_string.decode(),
                "body": request.get_data(as_text=True),
                "key": CREATED,  # a key shown once
            }
        )
        return Response(
            body,
            status=401,
            content_type="application/json",
            headers={
                "X-Echo-Auth": request.headers.get("Authorization", ""),
                "WWW-Authenticate": f'Bearer realm="{SIGNING}"',
            },
        )

    httpserver.expect_request(re.compile("/.*")).respond_with_handler(echo_all)
    profile = parse_profile(
        PROFILE.replace(LOCAL, httpserver.url_for("").rstrip("/"))
        + '[adapter]\npreset = "reference"\n',
        env={},
    )
    recorder = Recorder(profile.redactor())
    with caplog.at_level(logging.DEBUG), ApiClient(profile, recorder) as client:
        client.post("/v1/images/generate", json={"prompt": SIGNING, "webhook": {"url": PASSWORD}})
        client.get("/api/keys", session="primary", params={"token": TOKEN})
        client.get("/v1/x", role="low-limit", headers={"X-Forwarded-Key": PRIMARY})
        client.get("/v1/x", headers={"Authorization": f"Bearer {CREATED}"})
        with pytest.raises(AdapterError) as caught:
            make_adapter(client).create_key("primary", "n", ["images:generate"])
    assert len(recorder.exchanges) == 5
    assert not leaks(recorder)
    texts = [caplog.text, str(caught.value), repr(profile), repr(recorder.redactor)]
    assert not [s for s in ALL_SECRETS for t in texts if s in t]
