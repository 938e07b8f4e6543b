"""The suite's DNS server answers its zone, rebinds names, refuses the rest, stays bounded."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pytest

from conformance.dns import DnsServer

DOMAIN = "rebind.genapi.test"


@pytest.fixture
def server() -> Iterator[DnsServer]:
    with DnsServer(DOMAIN) as running:
        yield running


def ask(server: DnsServer, name: str, rdtype: str = "A") -> tuple[str, list[str]]:
    host, port = server.address
    response = dns.query.udp(dns.message.make_query(name, rdtype), host, port=port, timeout=2)
    answers = [item.to_text() for rrset in response.answer for item in rrset]
    ttls = {rrset.ttl for rrset in response.answer}
    assert ttls <= {0}, "answers must not be cached (TTL 0)"
    return dns.rcode.to_text(response.rcode()), answers


def test_set_answers_a_and_aaaa(server: DnsServer) -> None:
    full = server.set("cb-1", ["127.0.0.1", "[::1]", "10.0.0.1"])
    assert full == f"cb-1.{DOMAIN}"
    assert ask(server, full, "A") == ("NOERROR", ["127.0.0.1", "10.0.0.1"])
    assert ask(server, full, "AAAA") == ("NOERROR", ["::1"])
    assert ask(server, full.upper() + ".", "A")[1] == ["127.0.0.1", "10.0.0.1"]


def test_unknown_name_in_zone_is_nxdomain(server: DnsServer) -> None:
    assert ask(server, f"absent.{DOMAIN}") == ("NXDOMAIN", [])


def test_names_outside_the_zone_are_refused(server: DnsServer) -> None:
    assert ask(server, "example.com")[0] == "REFUSED"
    assert ask(server, f"x{DOMAIN}")[0] == "REFUSED"  # a suffix, not a subdomain


def test_known_name_without_that_family_is_empty(server: DnsServer) -> None:
    server.set("v4only", ["127.0.0.1"])
    assert ask(server, f"v4only.{DOMAIN}", "AAAA") == ("NOERROR", [])


def test_rebind_takes_effect_on_the_next_query(server: DnsServer) -> None:
    server.set("moving", ["127.0.0.1"])
    assert ask(server, f"moving.{DOMAIN}")[1] == ["127.0.0.1"]
    server.rebind("moving", ["127.0.0.2"])
    assert ask(server, f"moving.{DOMAIN}")[1] == ["127.0.0.2"]


def test_delayed_rebind_switches_after_the_given_queries(server: DnsServer) -> None:
    server.set("toctou", ["127.0.0.1"])
    server.rebind("toctou", ["10.0.0.1"], after_queries=2)
    answers = [ask(server, f"toctou.{DOMAIN}")[1] for _ in range(4)]
    assert answers == [["127.0.0.1"], ["127.0.0.1"], ["10.0.0.1"], ["10.0.0.1"]]


def test_rebind_of_an_unset_name_is_an_error(server: DnsServer) -> None:
    with pytest.raises(KeyError, match="set\\(\\) it before rebinding"):
        server.rebind("never", ["127.0.0.2"])


def test_remove_makes_a_name_unknown(server: DnsServer) -> None:
    server.set("gone", ["127.0.0.1"])
    server.remove("gone")
    assert ask(server, f"gone.{DOMAIN}")[0] == "NXDOMAIN"


def test_queries_are_logged_and_can_be_waited_for(server: DnsServer) -> None:
    server.set("seen", ["127.0.0.1"])
    ask(server, f"seen.{DOMAIN}")
    ask(server, f"other.{DOMAIN}")
    (query,) = server.wait_for_queries(1, timeout=2, name="seen")
    assert (query.name, query.qtype, query.answers, query.rcode) == (
        f"seen.{DOMAIN}",
        "A",
        ("127.0.0.1",),
        "NOERROR",
    )
    assert len(server.queries) == 2
    with pytest.raises(AssertionError, match=r"expected 2 DNS queries for seen\..* got 1"):
        server.wait_for_queries(2, timeout=0.2, name="seen")


def test_malformed_packets_are_ignored_and_serving_continues(server: DnsServer) -> None:
    host, port = server.address
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.sendto(b"\x00garbage", (host, port))
    server.set("after", ["127.0.0.1"])
    assert ask(server, f"after.{DOMAIN}")[1] == ["127.0.0.1"]


def test_one_thread_serves_everything(server: DnsServer) -> None:
    server.set("load", ["127.0.0.1"])
    before = threading.active_count()
    for _ in range(20):
        ask(server, f"load.{DOMAIN}")
    assert threading.active_count() == before


def test_listens_on_loopback_only() -> None:
    with pytest.raises(ValueError, match="loopback only"):
        DnsServer(DOMAIN, host="0.0.0.0")  # noqa: S104


def test_ipv6_loopback_listener() -> None:
    try:
        server = DnsServer(DOMAIN, host="::1").start()
    except OSError:
        pytest.skip("needs IPv6 loopback on this host")
    try:
        server.set("six", ["::1"])
        assert ask(server, f"six.{DOMAIN}", "AAAA") == ("NOERROR", ["::1"])
    finally:
        server.stop()


def test_stop_releases_the_port() -> None:
    server = DnsServer(DOMAIN).start()
    host, port = server.address
    server.stop()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((host, port))


def test_fresh_names_are_unique_and_unknown_until_set(server: DnsServer) -> None:
    first, second = server.fresh_name(), server.fresh_name("rebind")
    assert first != second
    assert first.endswith(f".{DOMAIN}") and second.startswith("rebind-")
    assert ask(server, first)[0] == "NXDOMAIN"
    server.set(first, ["127.0.0.1"])
    assert ask(server, first)[1] == ["127.0.0.1"]
