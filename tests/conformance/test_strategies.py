"""The URLs the URL checks submit (conformance.judge.strategies): right requirement, always refused.

Safety first: every generated URL, and every fixture vector the checks submit as a reject
vector, must be refused by the reference's callback policy (netguard, with the suite's
test allowlist 127.0.0.1/32 and a resolver that resolves nothing); a vector never aims a
host off this machine at the canary's port; the vector mapping cites catalogued ids.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.catalog import load_catalog
from conformance.judge import strategies as s
from reference.netguard import CallbackPolicy, CallbackRejected, HostNotResolved, IPAddress

RECEIVER = "http://127.0.0.1:8123"
CANARY_PORT = 45678


class _NoNames:
    """A resolver for which no name exists (NXDOMAIN for everything)."""

    async def resolve(self, host: str) -> list[IPAddress]:
        raise HostNotResolved(host, "no names in this test")


POLICY = CallbackPolicy(_NoNames(), allow_cidrs=("127.0.0.1/32",))


def _refused(url: str) -> bool:
    try:
        asyncio.run(POLICY.validate(url))
    except CallbackRejected:
        return True
    return False


# -- fixture vectors ---------------------------------------------------------------------


def test_every_submitted_vector_cites_a_catalogued_id() -> None:
    catalog = load_catalog()
    for vector in s.fixture_vectors():
        assert vector.requirement in catalog, vector


def test_case_ids_are_unique_and_printable() -> None:
    ids = [v.case_id for v in s.fixture_vectors()]
    assert len(ids) == len(set(ids))
    assert all(i.isprintable() and i.isascii() for i in ids)


@pytest.mark.parametrize("vector", s.fixture_vectors(), ids=lambda v: v.case_id)
def test_reject_vectors_are_refused_and_accept_vectors_pass(vector: s.UrlVector) -> None:
    url = vector.render(RECEIVER, CANARY_PORT)
    assert _refused(url) is (vector.verdict == "reject"), url


def test_public_and_name_vectors_are_never_submitted() -> None:
    templates = {v.template for v in s.fixture_vectors()}
    assert "http://93.184.216.34/hook" not in templates  # deliverable: false
    assert "http://localhost:9/" not in templates  # URL-RESOLVE-06
    assert "http://0177.0.0.2:9/" not in templates  # 177.0.0.2 when read as decimal
    assert "http://[64:ff9b:1::93.184.216.34]:9/" not in templates  # embeds a public host
    assert not any("vectors.genapi.test" in t for t in templates)  # needs names


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("http://127.0.0.2:9/", "URL-LOOP-01"),
        ("http://2130706434:9/", "URL-LOOP-03"),
        ("http://[::1]:9/", "URL-LOOP-02"),
        ("http://169.254.169.254:9/latest/meta-data/", "URL-LINK-02"),
        ("http://100.100.100.200:9/", "URL-PRIV-04"),
        ("http://[::ffff:10.0.0.1]:9/", "URL-MAPPED-01"),
        ("http://[64:ff9b::10.0.0.1]:9/", "URL-MAPPED-02"),
        ("http://nothing.invalid:9/hook", "URL-RESOLVE-01"),
        ("ftp://{receiver_authority}/hook", "URL-SCHEME-03"),
        ("https://{receiver_authority}/tls", "URL-SCHEME-02"),
        ("http://[2001:db8::1]:9/", "URL-IANA-02"),
        ("http://[100:0:0:1::1]:9/", "URL-IANA-04"),
        ("http://192.0.0.100:9/", "URL-IANA-03"),
    ],
)
def test_vector_names_its_requirement(template: str, expected: str) -> None:
    found = {v.template: v.requirement for v in s.fixture_vectors()}
    assert found[template] == expected


def test_unsafe_vector_naming_a_requirement_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixture cannot make the suite submit a public address by naming a requirement."""
    public = {"url": "http://93.184.216.34/hook", "verdict": "accept", "rule": "public"}
    rows = [
        {**public, "deliverable": False, "requirement": "URL-SCHEME-01", "why": "public"},
        {"url": "http://localhost:9/", "verdict": "reject", "rule": "loopback",
         "requirement": "URL-LOOP-01", "why": "localhost"},
        {"url": "http://0177.0.0.2:9/", "verdict": "reject", "rule": "syntax",
         "requirement": "URL-LOOP-03", "why": "octal"},
        {"url": "http://[64:ff9b:1::93.184.216.34]:9/", "verdict": "reject", "rule": "nat64",
         "requirement": "URL-MAPPED-02", "why": "embeds a public address"},
    ]  # fmt: skip
    for row in rows:
        monkeypatch.setattr(
            s.genapi_spec, "load_fixture", lambda _name, row=row: {"vectors": [row]}
        )
        s.fixture_vectors.cache_clear()
        with pytest.raises(ValueError, match="must not submit"):
            s.fixture_vectors()
    s.fixture_vectors.cache_clear()


def test_webhook_url_case_breaks_target_bind_03_only_over_a_must() -> None:
    assert s.case_ids("webhook.url", "URL-PRIV-01") == ("URL-PRIV-01", "TARGET-BIND-03")
    assert s.case_ids("callback_url", "URL-PRIV-01") == ("URL-PRIV-01",)
    assert s.case_ids("webhook.url", "URL-IANA-04") == ("URL-IANA-04",)
    assert s.case_ids("webhook.url", "URL-MAPPED-02") == ("URL-MAPPED-02",)


def test_must_reject_vector_refuses_an_interpretation() -> None:
    assert s.must_reject_vector("http://10.0.0.1:9/").requirement == "URL-PRIV-01"
    with pytest.raises(ValueError, match="interpretation"):
        s.must_reject_vector("http://[3fff::1]:9/")
    with pytest.raises(LookupError):
        s.must_reject_vector("http://10.9.9.9:9/")


def test_reject_ranges_are_those_naming_a_requirement() -> None:
    slugs = {entry.slug for entry in s.reject_ranges()}
    assert "dummy-100:0:0:1::/64" in slugs and "private-10/8-10.0.0.0/8" in slugs
    assert not any(rule in slugs for rule in ("ipv4-mapped-::ffff:0:0/96", "reserved-::/3"))
    assert s.embedding_requirement(equivalent=True) == "URL-MAPPED-01"
    assert s.embedding_requirement(equivalent=False) == "URL-MAPPED-02"


def test_render_pads_to_the_exact_length() -> None:
    (vector,) = [v for v in s.fixture_vectors() if v.length == 2048]
    assert len(vector.render(RECEIVER)) == 2048


# -- aiming --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("127.0.0.2", True),
        ("2130706434", True),
        ("127.2", True),
        ("0.0.0.0", True),  # noqa: S104 (a host string, nothing binds)
        ("0", True),
        ("[::1]", True),
        ("[::]", True),
        ("[::ffff:127.0.0.2]", True),
        ("[::ffff:7f00:2]", True),
        ("10.0.0.1", False),
        ("169.254.169.254", False),
        ("[fd00::1]", False),
        ("[64:ff9b::127.0.0.2]", False),
        ("nothing.invalid", False),
    ],
)
def test_host_is_this_machine(host: str, local: bool) -> None:
    assert s.host_is_this_machine(host) is local


def test_aim_moves_only_local_port_9() -> None:
    assert s.aim("http://127.0.0.2:9/x", 5000) == "http://127.0.0.2:5000/x"
    assert s.aim("http://[::1]:9/", 5000) == "http://[::1]:5000/"
    assert s.aim("http://10.0.0.1:9/", 5000) == "http://10.0.0.1:9/"
    assert s.aim("http://127.0.0.2:99/", 5000) == "http://127.0.0.2:99/"
    assert s.aim("http://127.0.0.2:9/", None) == "http://127.0.0.2:9/"


def test_iut_on_this_machine() -> None:
    assert s.iut_on_this_machine("http://127.0.0.1:8765", "")
    assert not s.iut_on_this_machine("http://127.0.0.1:8765", "https://tunnel.example")
    assert not s.iut_on_this_machine("https://api.example.com", "")


# -- generated URLs: always refused, never the allowlisted address ---------------------------


@pytest.mark.parametrize("entry", s.reject_ranges(), ids=lambda e: e.slug)
@settings(max_examples=25)
@given(data=st.data())
def test_generated_range_hosts_are_refused(entry: s.AddressRange, data: st.DataObject) -> None:
    if entry.network.version == 4:
        address4 = data.draw(s.ipv4_in(entry))
        assert address4 not in s.ALLOWLISTED and address4 in entry.network
        host = data.draw(s.ipv4_spellings(address4))[0]
    else:
        address6 = data.draw(s.ipv6_in(entry))
        assert address6 in entry.network
        host = f"[{address6}]"
    url = s.aim(f"http://{host}:9/c", CANARY_PORT)
    assert _refused(url), url


@settings(max_examples=100)
@given(data=st.data())
def test_generated_embeddings_are_refused(data: st.DataObject) -> None:
    entry = data.draw(st.sampled_from([e for e in s.reject_ranges() if e.network.version == 4]))
    address = data.draw(s.ipv4_in(entry))
    host, _ = data.draw(s.embedded_ipv6_hosts(address))
    assert _refused(f"http://{host}:9/c"), host


@settings(max_examples=50)
@given(scheme=s.bad_schemes())
def test_generated_schemes_are_refused(scheme: str) -> None:
    assert scheme.lower() not in {"http", "https"}
    assert _refused(f"{scheme}://127.0.0.1:8123/x")


@settings(max_examples=50)
@given(url=s.overlong_urls(RECEIVER))
def test_generated_overlong_urls_are_refused(url: str) -> None:
    assert len(url) > s.MAX_URL_LENGTH and url.startswith(RECEIVER)
    assert _refused(url)


@settings(max_examples=50)
@given(host=s.unresolvable_hosts())
def test_generated_names_are_under_invalid(host: str) -> None:
    assert host.lower().rstrip(".").endswith(".invalid")
    assert _refused(f"http://{host}:9/")


@settings(max_examples=60)
@given(data=st.data())
def test_spellings_read_back_to_the_address(data: st.DataObject) -> None:
    address = ipaddress.IPv4Address("127.0.0.2")
    host, canonical = data.draw(s.ipv4_spellings(address))
    assert ipaddress.IPv4Address(socket.inet_aton(host.rstrip("."))) == address, host
    assert canonical is (host == "127.0.0.2")
