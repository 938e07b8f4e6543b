"""Resolvers: hosts file (re-read on every lookup), a DNS server on loopback, the system.

The DNS server is dnslib on 127.0.0.1; the system resolver is exercised through a fake
``socket.getaddrinfo`` (a real lookup of an unknown name could leave the machine) and
through a numeric host, which needs no network at all.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from dnslib import AAAA, QTYPE, RCODE, RR, A, DNSRecord
from dnslib.server import BaseResolver, DNSLogger, DNSServer

from reference.netguard.resolver import (
    DnsServerResolver,
    HostNotResolved,
    HostsFileResolver,
    Resolver,
    SystemResolver,
)
from reference.netguard.urls import CallbackPolicy, CallbackRejected

pytestmark = pytest.mark.anyio

ip = ipaddress.ip_address


class TableResolver(BaseResolver):  # type: ignore[misc]
    """Answers A/AAAA from a mutable table; unknown names get NXDOMAIN."""

    def __init__(self) -> None:
        self.table: dict[str, list[str]] = {}
        self.queries: list[tuple[str, str]] = []

    def resolve(self, request: DNSRecord, handler: Any) -> DNSRecord:
        reply = request.reply()
        name = str(request.q.qname).rstrip(".").lower()
        qtype = QTYPE[request.q.qtype]
        self.queries.append((name, qtype))
        if name not in self.table:
            reply.header.rcode = RCODE.NXDOMAIN
            return reply
        for address in self.table[name]:
            version = ip(address).version
            if qtype == "A" and version == 4:
                reply.add_answer(RR(request.q.qname, QTYPE.A, rdata=A(address), ttl=300))
            if qtype == "AAAA" and version == 6:
                reply.add_answer(RR(request.q.qname, QTYPE.AAAA, rdata=AAAA(address), ttl=300))
        return reply


@pytest.fixture
def dns_server() -> Iterator[tuple[TableResolver, int]]:
    table = TableResolver()
    server = DNSServer(table, address="127.0.0.1", port=0, logger=DNSLogger(logf=lambda _: None))
    server.start_thread()
    try:
        yield table, server.server.server_address[1]
    finally:
        server.stop()
        server.server.server_close()
        server.thread.join(5)


@pytest.fixture
def silent_udp_port() -> Iterator[int]:
    """A bound UDP port that never answers: a DNS server that times out."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


def test_every_resolver_satisfies_the_protocol(tmp_path: Path) -> None:
    for resolver in (
        SystemResolver(),
        HostsFileResolver(tmp_path / "hosts"),
        DnsServerResolver("127.0.0.1", 53),
    ):
        assert isinstance(resolver, Resolver)


# ---- hosts file ------------------------------------------------------------------------


async def test_hosts_file_is_reread_so_a_name_can_be_rebound(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 hook.test  # the receiver\n", encoding="utf-8")
    resolver = HostsFileResolver(hosts)
    assert await resolver.resolve("hook.test") == [ip("127.0.0.1")]
    hosts.write_text("10.0.0.1 hook.test\n", encoding="utf-8")
    assert await resolver.resolve("hook.test") == [ip("10.0.0.1")]


async def test_hosts_file_collects_every_address_case_and_dot_insensitive(
    tmp_path: Path,
) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text(
        "# comment line\n"
        "127.0.0.1   Hook.Test alias.test\n"
        "not-an-ip   hook.test\n"
        "::1         hook.test.\n"
        "127.0.0.1   hook.test\n"
        "10.0.0.1\n",
        encoding="utf-8",
    )
    resolver = HostsFileResolver(hosts)
    assert await resolver.resolve("HOOK.test.") == [ip("127.0.0.1"), ip("::1")]
    assert await resolver.resolve("alias.test") == [ip("127.0.0.1")]


async def test_hosts_file_unlisted_name_uses_fallback_or_does_not_resolve(
    tmp_path: Path, make_resolver: Any
) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 hook.test\n", encoding="utf-8")
    with pytest.raises(HostNotResolved, match="not listed"):
        await HostsFileResolver(hosts).resolve("other.test")
    with pytest.raises(HostNotResolved):
        await HostsFileResolver(tmp_path / "missing").resolve("hook.test")
    fallback = make_resolver({"other.test": ["93.184.216.34"]})
    chained = HostsFileResolver(hosts, fallback=fallback)
    assert await chained.resolve("other.test") == [ip("93.184.216.34")]
    assert await chained.resolve("hook.test") == [ip("127.0.0.1")]
    assert fallback.calls == ["other.test"]


# ---- DNS server ------------------------------------------------------------------------


async def test_dns_server_answers_a_and_aaaa_without_caching(
    dns_server: tuple[TableResolver, int],
) -> None:
    table, port = dns_server
    table.table["hook.rebind.genapi.test"] = ["127.0.0.1", "::1"]
    resolver = DnsServerResolver("127.0.0.1", port, timeout_s=2.0)
    with anyio.fail_after(10):
        assert await resolver.resolve("hook.rebind.genapi.test") == [ip("127.0.0.1"), ip("::1")]
        table.table["hook.rebind.genapi.test"] = ["10.0.0.1"]  # rebinding
        assert await resolver.resolve("hook.rebind.genapi.test.") == [ip("10.0.0.1")]
    assert ("hook.rebind.genapi.test", "A") in table.queries
    assert ("hook.rebind.genapi.test", "AAAA") in table.queries


async def test_dns_server_nxdomain_and_empty_answers_do_not_resolve(
    dns_server: tuple[TableResolver, int],
) -> None:
    table, port = dns_server
    table.table["empty.test"] = []
    resolver = DnsServerResolver("127.0.0.1", port, timeout_s=2.0)
    with anyio.fail_after(10):
        with pytest.raises(HostNotResolved, match="NXDOMAIN") as raised:
            await resolver.resolve("missing.test")
        assert not raised.value.timed_out
        with pytest.raises(HostNotResolved, match="no A or AAAA"):
            await resolver.resolve("empty.test")


async def test_dns_server_that_never_answers_times_out(silent_udp_port: int) -> None:
    resolver = DnsServerResolver("127.0.0.1", silent_udp_port, timeout_s=0.3)
    started = time.monotonic()
    with anyio.fail_after(10), pytest.raises(HostNotResolved, match="no answer") as raised:
        await resolver.resolve("hook.test")
    assert time.monotonic() - started < 3.0
    assert raised.value.timed_out


# ---- system resolver -------------------------------------------------------------------


async def test_system_resolver_numeric_host_needs_no_network() -> None:
    assert await SystemResolver().resolve("127.0.0.1") == [ip("127.0.0.1")]


async def test_system_resolver_returns_every_family_deduplicated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def fake(host: str, *args: Any, **kwargs: Any) -> list[Any]:
        stream = socket.SOCK_STREAM
        return [
            (socket.AF_INET, stream, 6, "", ("93.184.216.34", 0)),
            (socket.AF_INET6, stream, 6, "", ("fe80::1%eth0", 0, 0, 2)),
            (socket.AF_INET, stream, 6, "", ("93.184.216.34", 0)),
            (socket.AF_UNIX, stream, 0, "", "/tmp/x"),
        ]

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    assert await SystemResolver().resolve("hook.test") == [ip("93.184.216.34"), ip("fe80::1")]


async def test_system_resolver_failure_does_not_resolve(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", fail)
    with pytest.raises(HostNotResolved, match="not known"):
        await SystemResolver().resolve("nothing.invalid")


async def test_system_resolver_is_bounded_by_its_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()

    def hang(*args: Any, **kwargs: Any) -> Any:
        release.wait(10)
        raise socket.gaierror(socket.EAI_AGAIN, "late")

    monkeypatch.setattr(socket, "getaddrinfo", hang)
    try:
        with anyio.fail_after(5), pytest.raises(HostNotResolved, match="no answer within"):
            await SystemResolver(timeout_s=0.2).resolve("slow.test")
    finally:
        release.set()  # let the abandoned executor thread finish


async def test_policy_sees_a_rebinding_through_the_dns_server(
    dns_server: tuple[TableResolver, int],
) -> None:
    """Spec §3: a target that now resolves to a private address fails re-validation."""
    table, port = dns_server
    table.table["hook.rebind.genapi.test"] = ["127.0.0.1"]
    policy = CallbackPolicy(DnsServerResolver("127.0.0.1", port), allow_cidrs=["127.0.0.1/32"])
    url = "http://hook.rebind.genapi.test:9/deliver"
    with anyio.fail_after(10):
        target = await policy.validate(url)
        assert (target.host, target.address) == ("hook.rebind.genapi.test", "127.0.0.1")
        table.table["hook.rebind.genapi.test"] = ["10.0.0.1"]
        with pytest.raises(CallbackRejected) as caught:
            await policy.validate(url)
    assert caught.value.rule == "private-10/8"


async def test_policy_turns_nxdomain_into_an_unresolvable_rejection(
    dns_server: tuple[TableResolver, int],
) -> None:
    _table, port = dns_server
    policy = CallbackPolicy(DnsServerResolver("127.0.0.1", port))
    with anyio.fail_after(10), pytest.raises(CallbackRejected) as caught:
        await policy.validate("http://gone.rebind.genapi.test:9/")
    assert caught.value.rule == "unresolvable"
    assert "does not resolve" in caught.value.reason
