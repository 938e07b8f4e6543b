"""CallbackPolicy against every vector of fixtures/callback_urls.yaml (spec §4), offline.

Names resolve through an in-memory table (the file's ``names``); the allowlist is the
suite's ``127.0.0.1/32``. Nothing is sent anywhere.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

import anyio
import pytest

import genapi_spec
from reference.netguard import CallbackPolicy, CallbackRejected
from reference.netguard.urls import MAX_URL_LENGTH, parse_ipv4_host

pytestmark = pytest.mark.anyio

RECEIVER = "http://127.0.0.1:8765"


def expand(vector: dict[str, Any], receiver: str = RECEIVER) -> str:
    """The URL of a vector with the placeholders and the ``{pad}`` template filled in."""
    authority = receiver.split("://", 1)[1]
    port = authority.rsplit(":", 1)[1]

    def fill(text: str) -> str:
        return (
            text.replace("{receiver}", receiver)
            .replace("{receiver_authority}", authority)
            .replace("{receiver_port}", port)
        )

    if "url_template" in vector:
        template = fill(vector["url_template"])
        return template.replace("{pad}", "a" * (vector["length"] - len(template) + len("{pad}")))
    return fill(vector["url"])


def _id(vector: dict[str, Any]) -> str:
    url = vector.get("url") or f"{vector['url_template']}@{vector['length']}"
    printable = re.sub(r"[^\x21-\x7e]", "?", url)[:60]
    return f"{vector['verdict']}-{vector['rule']}-{printable}"


VECTORS: list[dict[str, Any]] = genapi_spec.load_fixture("callback_urls.yaml")["vectors"]


@pytest.fixture
def policy(resolver: Any) -> CallbackPolicy:
    return CallbackPolicy(resolver, allow_cidrs=["127.0.0.1/32"])


@pytest.mark.parametrize("vector", VECTORS, ids=[_id(v) for v in VECTORS])
async def test_vector_verdict_and_rule_match_the_policy(
    policy: CallbackPolicy, vector: dict[str, Any]
) -> None:
    """Each vector gets its recorded verdict, decided by its recorded rule."""
    url = expand(vector)
    if vector["verdict"] == "reject":
        with pytest.raises(CallbackRejected) as caught:
            await policy.validate(url)
        assert caught.value.rule == vector["rule"], caught.value.reason
        assert caught.value.reason == str(caught.value)
        return
    target = await policy.validate(url)
    address = ipaddress.ip_address(target.address)
    if vector["deliverable"]:
        # A deliverable vector reaches the receiver and nothing else.
        assert address == ipaddress.ip_address("127.0.0.1")
        assert target.port == 8765 or vector["url"].startswith("https://")
    else:
        assert not address.is_loopback
    assert target.url == url
    assert target.scheme in ("http", "https")


def test_vector_file_covers_both_verdicts_and_the_length_boundary() -> None:
    """The vectors exercise accept and reject, and the 2048/2049 boundary exactly."""
    lengths = {
        vector["verdict"]: len(expand(vector)) for vector in VECTORS if "url_template" in vector
    }
    assert lengths["accept"] == MAX_URL_LENGTH
    assert min(len(expand(v)) for v in VECTORS if v["rule"] == "length") == MAX_URL_LENGTH + 1


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0127.0.0.1", "87.0.0.1"),  # octal, as glibc's inet_aton reads it
        ("127.1", "127.0.0.1"),
        ("10.1", "10.0.0.1"),
        ("169.254.43518", "169.254.169.254"),
        ("0", "0.0.0.0"),  # noqa: S104 (data, not a bind address)
        ("0x", "0.0.0.0"),  # noqa: S104
        ("10.0.0.1.", "10.0.0.1"),
    ],
)
def test_parse_ipv4_host_reads_every_inet_aton_spelling(host: str, expected: str) -> None:
    assert parse_ipv4_host(host) == ipaddress.IPv4Address(expected)


@pytest.mark.parametrize("host", ["example.com", "receiver.vectors.genapi.test", "a1", "1a", "x."])
def test_parse_ipv4_host_leaves_names_alone(host: str) -> None:
    assert parse_ipv4_host(host) is None


@pytest.mark.parametrize(
    "host",
    ["1.2.3.4.5", "256.0.0.1", "1.2.3.256", "1.16777216", "4294967296", "08.0.0.1", "a.0x1"],
)
def test_parse_ipv4_host_refuses_hosts_ending_in_a_bad_number(host: str) -> None:
    with pytest.raises(ValueError, match=r"part|range"):
        parse_ipv4_host(host)


@pytest.mark.parametrize("url", [None, 42, b"http://127.0.0.1/", ["http://127.0.0.1/"]])
async def test_non_string_url_is_rejected(policy: CallbackPolicy, url: object) -> None:
    with pytest.raises(CallbackRejected) as caught:
        await policy.validate(url)
    assert caught.value.rule == "syntax"


async def test_literal_hosts_are_judged_without_dns(policy: CallbackPolicy, resolver: Any) -> None:
    """IP literals and IPv4 spellings never reach the resolver (no lookup to rebind)."""
    for url in ("http://127.0.0.1:8765/", "http://2130706433:8765/", "http://[::ffff:7f00:1]:1/"):
        await policy.validate(url)
    with pytest.raises(CallbackRejected):
        await policy.validate("http://10.1:9/")
    assert resolver.calls == []


async def test_every_resolved_address_must_be_public(make_resolver: Any) -> None:
    """Reference choice (INTERPRETATION "any vs every"): one private answer rejects."""
    policy = CallbackPolicy(
        make_resolver({"two.test": ["93.184.216.34", "192.168.0.1"]}), allow_cidrs=()
    )
    with pytest.raises(CallbackRejected) as caught:
        await policy.validate("http://two.test:9/")
    assert caught.value.rule == "private-192.168/16"
    assert caught.value.resolved == ("93.184.216.34", "192.168.0.1")


async def test_a_refused_name_keeps_its_resolver_answers_out_of_the_reason(
    make_resolver: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The 400 body names the host and the rule, never the addresses it resolved to
    (they would show a caller the service's internal DNS); the log has them."""
    policy = CallbackPolicy(
        make_resolver({"two.test": ["93.184.216.34", "192.168.7.9"]}), allow_cidrs=()
    )
    with caplog.at_level("INFO", logger="reference.netguard"):
        with pytest.raises(CallbackRejected) as caught:
            await policy.validate("http://two.test:9/")
    reason = caught.value.reason
    assert "two.test" in reason and "private-192.168/16" in reason
    assert "192.168.7.9" not in reason and "93.184.216.34" not in reason
    assert "93.184.216.34, 192.168.7.9" in caplog.text


async def test_target_pins_the_first_resolved_address_and_keeps_the_url(
    make_resolver: Any,
) -> None:
    policy = CallbackPolicy(
        make_resolver({"hook.test": ["127.0.0.1", "::ffff:127.0.0.1"]}),
        allow_cidrs=["127.0.0.1/32"],
    )
    target = await policy.validate("HTTPS://user@Hook.Test./x?y#z")
    assert target.url == "HTTPS://user@Hook.Test./x?y#z"
    assert (target.scheme, target.host, target.port, target.address) == (
        "https",
        "hook.test.",
        443,
        "127.0.0.1",
    )


async def test_without_allowlist_the_receiver_address_is_loopback(resolver: Any) -> None:
    """The allowlist is off by default: 127.0.0.1 is then rejected like any loopback."""
    with pytest.raises(CallbackRejected) as caught:
        await CallbackPolicy(resolver).validate(f"{RECEIVER}/hook")
    assert caught.value.rule == "loopback"


async def test_a_resolver_that_hangs_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """The policy's own deadline bounds a resolver that ignores its timeout."""

    class Hanging:
        async def resolve(self, host: str) -> list[Any]:
            await anyio.sleep(60)
            raise AssertionError("unreachable")

    monkeypatch.setattr("reference.netguard.urls.RESOLVE_DEADLINE_S", 0.05)
    with anyio.fail_after(5):
        with pytest.raises(CallbackRejected) as caught:
            await CallbackPolicy(Hanging()).validate("http://slow.test:9/")
    assert caught.value.rule == "unresolvable"
