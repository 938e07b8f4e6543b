"""The fixture modules give a check its profile, a recording client, a fresh endpoint,
canaries and DNS, and skip with the fix when the profile lacks a capability."""

from __future__ import annotations

import importlib
import json
import socket
from pathlib import Path

import dns.message
import dns.query
import pytest
from profiles import profile_text
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from conformance.observe.dns import DnsServer
from conformance.run.plugin import pytest_plugins as FIXTURE_MODULES

pytest_plugins = ["pytester"]

KEY = "gk_FIXTUREcanary0primary0key00001"
TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwIn0.FIXTUREcanary0token"


def _profile(base_url: str, extra: str = "", adapter: str = "none") -> str:
    top = f'adapter = "{adapter}"\n'
    return profile_text(KEY, TOKEN, base_url=base_url, top=top, tables=f"{extra}\n")


@pytest.fixture
def iut(httpserver: HTTPServer) -> HTTPServer:
    """A stand-in IUT that echoes the Authorization header it got (a careless echo)."""

    def echo(request: Request) -> Response:
        body = json.dumps({"authorization": request.headers.get("Authorization")})
        return Response(body, status=200, content_type="application/json")

    httpserver.expect_request("/v1/echo").respond_with_handler(echo)
    return httpserver


def run(
    pytester: pytest.Pytester, profile: str | None, test_source: str, *args: str
) -> pytest.RunResult:
    pytester.makefile(".ini", pytest="[pytest]\nfilterwarnings = error\n")
    pytester.makepyfile(test_source)
    plugin_args = [arg for name in FIXTURE_MODULES for arg in ("-p", name)]
    if profile is not None:
        path = pytester.path / "profile.toml"
        path.write_text(profile, encoding="utf-8")
        plugin_args += ["--profile", str(path)]
    return pytester.runpytest(*plugin_args, "-p", "no:cacheprovider", "-rs", *args)


RECORDING = f"""
import json
from conformance.target.client import EXCHANGES_KEY

def test_echo(api, request, redactor):
    response = api.request("GET", "/v1/echo")
    assert response.json()["authorization"] == "Bearer {KEY}"
    exchanges = request.node.stash[EXCHANGES_KEY]
    assert len(exchanges) == 1
    text = json.dumps(exchanges[0].to_dict()) + exchanges[0].as_curl()
    assert "{KEY}" not in text
    assert "[redacted:keys.primary.key]" in text
    assert redactor.knows("{TOKEN}")

def test_each_check_has_its_own_record(api, make_api, request):
    assert request.node.stash[EXCHANGES_KEY] == []
    other = make_api(budget=1)
    other.request("GET", "/v1/echo", role="none")
    assert len(request.node.stash[EXCHANGES_KEY]) == 1
"""


def test_api_records_redacted_exchanges_into_the_stash(
    pytester: pytest.Pytester, iut: HTTPServer
) -> None:
    result = run(pytester, _profile(iut.url_for("").rstrip("/")), RECORDING)
    result.assert_outcomes(passed=2)
    assert KEY not in result.stdout.str()


def test_missing_profile_is_a_setup_error_saying_how(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GENAPI_PROFILE", raising=False)
    result = run(pytester, None, "def test_x(profile):\n    pass\n")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*no target profile: pass --profile PATH or set GENAPI_PROFILE*"])


def test_profile_from_environment(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = pytester.path / "env-profile.toml"
    path.write_text(_profile("http://127.0.0.1:9"), encoding="utf-8")
    monkeypatch.setenv("GENAPI_PROFILE", str(path))
    source = "def test_x(profile):\n    assert profile.base_url == 'http://127.0.0.1:9'\n"
    run(pytester, None, source).assert_outcomes(passed=1)


def test_adapter_none_skips_with_the_fix(pytester: pytest.Pytester) -> None:
    result = run(pytester, _profile("http://127.0.0.1:9"), "def test_x(adapter):\n    pass\n")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(['*needs adapter: add an *table to the profile: preset = "ref*'])


def test_adapter_reference_is_given(pytester: pytest.Pytester) -> None:
    source = (
        "from conformance.target.adapters import DeclaredAdapter\n"
        "def test_x(adapter):\n"
        "    assert isinstance(adapter, DeclaredAdapter)\n"
        "    assert adapter.client.profile.adapter.preset == 'reference'\n"
    )
    profile = _profile("http://127.0.0.1:9", adapter="reference")
    run(pytester, profile, source).assert_outcomes(passed=1)


ENDPOINTS = """
import httpx

seen = []

def test_first(endpoint, receiver):
    seen.append(endpoint.path)
    assert "test-first" in endpoint.path
    assert endpoint.url.startswith(f"http://127.0.0.1:{receiver.port}/hooks/")
    with httpx.Client(trust_env=False, timeout=5) as client:
        assert client.post(endpoint.url, content=b"a").status_code == 200
    assert endpoint.wait_for(1, timeout=5)[0].raw_body == b"a"

def test_second(endpoint, make_endpoint):
    other = make_endpoint("other")
    assert endpoint.path != other.path
    assert endpoint.path not in seen and endpoint.deliveries == []

def test_canary_view_starts_empty(canary):
    with httpx.Client(trust_env=False, timeout=5) as client:
        client.get(canary.url("127.0.0.2"))
    canary.wait_for_hits(1, timeout=5)
    try:
        canary.assert_no_hits()
    except AssertionError as error:
        assert "dual-stack" in str(error)
    else:
        raise AssertionError("a hit was not reported")

def test_canary_next_check_sees_no_earlier_hits(canary, receiver):
    assert canary.hits == []
    assert canary.rebind_port == receiver.port
    canary.assert_no_hits()
"""


def test_endpoints_are_fresh_per_check_and_canaries_per_check(pytester: pytest.Pytester) -> None:
    result = run(pytester, _profile("http://127.0.0.1:9"), ENDPOINTS)
    result.assert_outcomes(passed=4)


def test_endpoint_handler_error_is_a_teardown_error(pytester: pytest.Pytester) -> None:
    source = """
import httpx

def test_x(endpoint):
    def explode(_):
        raise RuntimeError("handler exploded")
    endpoint._arrive = explode
    with httpx.Client(trust_env=False, timeout=5) as client:
        assert client.post(endpoint.url).status_code == 500
"""
    result = run(pytester, _profile("http://127.0.0.1:9"), source)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*ReceiverError*RuntimeError: handler exploded*"])


def test_dns_server_skips_without_dns(pytester: pytest.Pytester) -> None:
    result = run(pytester, _profile("http://127.0.0.1:9"), "def test_x(dns_server):\n    pass\n")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*needs dns: add a [[]dns[]] table*"])


def test_dns_server_serves_the_profile_domain(pytester: pytest.Pytester) -> None:
    source = """
import dns.message, dns.query

def test_x(dns_server):
    name = dns_server.set("cb", ["127.0.0.1"])
    assert name == "cb.rebind.genapi.test"
    host, port = dns_server.address
    response = dns.query.udp(dns.message.make_query(name, "A"), host, port=port, timeout=2)
    assert [r.to_text() for rrset in response.answer for r in rrset] == ["127.0.0.1"]
"""
    extra = '[dns]\nserver = "127.0.0.1:0"\ndomain = "rebind.genapi.test"\n'
    run(pytester, _profile("http://127.0.0.1:9", extra), source).assert_outcomes(passed=1)


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.bind(("127.0.0.1", 0))
        return int(udp.getsockname()[1])


#: A check in each of two modules: both join the run's DNS server at once (a barrier of
#: files with a deadline), note whether their worker serves it, and resolve their name.
XDIST_CHECK = """
import os, time
from pathlib import Path
import dns.message, dns.query

def test_{label}(dns_server, worker_id):
    name = dns_server.set("{label}", ["127.0.0.{octet}"])
    meet = Path(os.environ["DNS_MEET"])
    (meet / worker_id).write_text(str(dns_server.serving))
    deadline = time.monotonic() + 30
    while len(list(meet.iterdir())) < 2:
        assert time.monotonic() < deadline, "the other worker never joined"
        time.sleep(0.02)
    host, port = dns_server.address
    response = dns.query.udp(dns.message.make_query(name, "A"), host, port=port, timeout=2)
    assert [r.to_text() for rrset in response.answer for r in rrset] == ["127.0.0.{octet}"]
"""


def test_dns_server_is_one_per_run_under_xdist(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two workers, one fixed [dns] port: one worker serves, the other edits the same zone."""
    meet = pytester.mkdir("meet")
    monkeypatch.setenv("DNS_MEET", str(meet))
    pytester.makepyfile(
        test_one=XDIST_CHECK.format(label="one", octet=1),
        test_two=XDIST_CHECK.format(label="two", octet=2),
    )
    extra = f'[dns]\nserver = "127.0.0.1:{free_udp_port()}"\ndomain = "rebind.genapi.test"\n'
    result = run(
        pytester, _profile("http://127.0.0.1:9", extra), "", "-n", "2", "--dist", "loadfile"
    )
    result.assert_outcomes(passed=2)
    serving = sorted(path.read_text() for path in meet.iterdir())
    assert serving == ["False", "True"], "exactly one worker serves the run's zone"


def test_dns_server_attaches_to_the_zone_dir_of_the_profile(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """With [dns] zone_dir (the embedded run writes it), the fixture binds nothing: it edits
    the zone of the server already running (here, in this process)."""
    with DnsServer("rebind.genapi.test", zone_dir=tmp_path / "zone") as server:
        host, port = server.address
        extra = (
            f'[dns]\nserver = "{host}:{port}"\ndomain = "rebind.genapi.test"\n'
            f'zone_dir = "{server.zone_dir}"\n'
        )
        source = """
def test_x(dns_server):
    assert not dns_server.serving
    dns_server.set("attached", ["127.0.0.7"])
"""
        run(pytester, _profile("http://127.0.0.1:9", extra), source).assert_outcomes(passed=1)
        name = server.name("attached")
        response = dns.query.udp(dns.message.make_query(name, "A"), host, port=port, timeout=2)
        assert [r.to_text() for rrset in response.answer for r in rrset] == ["127.0.0.7"]


LABS = """
import pytest

made = []

@pytest.fixture(scope="module")
def paths(labs):
    return labs.paths("unit-paths")

def test_one(labs, paths):
    made.append((labs, paths))

def test_two(labs, paths):
    assert made == [(labs, paths)]  # one factory, one lab, for the whole module
    assert paths.endpoint.path in paths.endpoint.receiver._endpoints
"""

LABS_AFTER = """
import sys

def test_closed_after_the_module(labs):
    first = sys.modules["test_labs_gives_a_module_its_labs_and_closes_them_after_it"]
    (first_labs, paths), = first.made
    assert labs is not first_labs  # a module of its own gets its own factory
    assert paths.endpoint.path not in paths.endpoint.receiver._endpoints  # closed
"""


def test_labs_gives_a_module_its_labs_and_closes_them_after_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_zz_after=LABS_AFTER)  # runs after the module of LABS
    result = run(pytester, _profile("http://127.0.0.1:9"), LABS)
    result.assert_outcomes(passed=3)


def test_fixture_modules_define_the_fixtures_they_export() -> None:
    """What each exports is pinned in ``tests/test_public_surfaces.py``; here, that it is a
    fixture (or the type one gives)."""
    for name in FIXTURE_MODULES:
        module = importlib.import_module(name)
        for fixture_name in module.__all__:
            exported_object = getattr(module, fixture_name)
            if isinstance(exported_object, type):
                continue  # the type a fixture gives, for the checks' annotations
            marker = getattr(exported_object, "_fixture_function_marker", None)
            assert marker is not None, f"{name}.{fixture_name} is not a fixture"


def test_port_in_use_is_a_clear_setup_error(pytester: pytest.Pytester) -> None:
    with (
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp,
    ):
        tcp.bind(("127.0.0.1", 0))
        tcp.listen(1)
        udp.bind(("127.0.0.1", 0))
        extra = (
            f"[receiver]\nlisten_port = {tcp.getsockname()[1]}\n"
            f'[dns]\nserver = "127.0.0.1:{udp.getsockname()[1]}"\ndomain = "x.test"\n'
        )
        source = "def test_receiver(receiver):\n    pass\n\ndef test_dns(dns_server):\n    pass\n"
        result = run(pytester, _profile("http://127.0.0.1:9", extra), source)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "*receiver: cannot listen on 127.0.0.1:*set [[]receiver[]] listen_port = 0*",
            "*dns_server: cannot listen on UDP 127.0.0.1:*a process outside this run holds*",
        ]
    )
