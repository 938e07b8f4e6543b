"""The suite's DNS server answers its zone, rebinds names, refuses the rest, stays bounded."""

from __future__ import annotations

import os
import queue
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import dns.exception
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pytest
from dnslib import RCODE, DNSLabel, DNSRecord
from processes import wait_or_kill

from conformance.observe.dns import SILENT_RCODE, DnsBusy, DnsServer, shared_zone_dir

DOMAIN = "rebind.genapi.test"


@pytest.fixture
def server() -> Iterator[DnsServer]:
    with DnsServer(DOMAIN) as running:
        yield running


def ask(server: DnsServer | tuple[str, int], name: str, rdtype: str = "A") -> tuple[str, list[str]]:
    host, port = server if isinstance(server, tuple) else server.address
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


def test_a_silenced_name_gets_no_answer_and_its_question_is_logged(server: DnsServer) -> None:
    full = server.silence("mute")
    host, port = server.address
    with pytest.raises(dns.exception.Timeout):
        dns.query.udp(dns.message.make_query(full, "A"), host, port=port, timeout=0.3)
    (query,) = server.wait_for_queries(1, timeout=2, name="mute")
    assert (query.rcode, query.answers) == (SILENT_RCODE, ())
    assert ask(server, f"other.{DOMAIN}")[0] == "NXDOMAIN"  # the server goes on answering


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


# -- one zone, several processes (the run's controller and its xdist workers) ------------

PEER = Path(__file__).with_name("dns_peer.py")
PEER_TIMEOUT_S = 20.0


class Peer:
    """Another process of the run (``dns_peer.py``), driven a line at a time with deadlines."""

    def __init__(self, zone_dir: Path, port: int) -> None:
        self.process = subprocess.Popen(  # noqa: S603 (our interpreter, our script)
            [sys.executable, str(PEER), str(zone_dir), str(port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.joined = self.line()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.strip())
        self._lines.put(None)

    def line(self, timeout: float = PEER_TIMEOUT_S) -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"the peer said nothing within {timeout:g} s") from None
        if line is None:
            assert self.process.stderr is not None
            raise AssertionError(f"the peer ended: {self.process.stderr.read()[-2000:]}")
        return line

    def ask(self, command: str, timeout: float = PEER_TIMEOUT_S) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.line(timeout)

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()  # end of input: the peer stops, if it has not
        if self.process.poll() is None:
            wait_or_kill(self.process, PEER_TIMEOUT_S)
        self._reader.join(timeout=PEER_TIMEOUT_S)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def peers() -> Iterator[Callable[[Path, int], Peer]]:
    started: list[Peer] = []

    def start(zone_dir: Path, port: int) -> Peer:
        peer = Peer(zone_dir, port)
        started.append(peer)
        return peer

    yield start
    for peer in started:
        peer.close()


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_name_set_in_another_process_answers_at_once(
    tmp_path: Path, peers: Callable[[Path, int], Peer]
) -> None:
    """The serving process answers what an attached one wrote, on the very next query."""
    zone = tmp_path / "zone"
    server = DnsServer.join(DOMAIN, "127.0.0.1", free_udp_port(), zone_dir=zone)
    try:
        assert server.serving
        peer = peers(zone, server.address[1])
        assert peer.joined == "joined serving=False"
        full = peer.ask("set moving 127.0.0.1 ::1")
        assert full == f"moving.{DOMAIN}"
        assert ask(server, full) == ("NOERROR", ["127.0.0.1"])
        assert ask(server, full, "AAAA") == ("NOERROR", ["::1"])
        peer.ask("rebind moving 0 127.0.0.2")
        assert ask(server, full) == ("NOERROR", ["127.0.0.2"])
        peer.ask("rebind moving 2 10.0.0.1")  # counted by the server, whoever wrote it
        answers = [ask(server, full)[1] for _ in range(3)]
        assert answers == [["127.0.0.2"], ["127.0.0.2"], ["10.0.0.1"]]
        peer.ask("remove moving")
        assert ask(server, full)[0] == "NXDOMAIN"
        assert peer.ask("queries moving") == "7", "every process sees the zone's query log"
        assert peer.ask("stop 0") == "stopped"
    finally:
        server.stop(linger=1.0)


def test_the_first_process_serves_and_a_later_one_edits_through_it(
    tmp_path: Path, peers: Callable[[Path, int], Peer]
) -> None:
    """Joined second, this process serves nothing and binds nothing: the peer answers."""
    zone, port = tmp_path / "zone", free_udp_port()
    peer = peers(zone, port)
    assert peer.joined == "joined serving=True"
    attached = DnsServer.join(DOMAIN, "127.0.0.1", port, zone_dir=zone)
    try:
        assert not attached.serving
        assert attached.address == ("127.0.0.1", port)
        full = attached.set("here", ["127.0.0.1"])
        assert ask(attached, full) == ("NOERROR", ["127.0.0.1"])
        (query,) = attached.wait_for_queries(1, timeout=5, name="here")
        assert (query.name, query.answers) == (full, ("127.0.0.1",))
        attached.rebind("here", ["127.0.0.2"])
        assert ask(attached, full)[1] == ["127.0.0.2"]
        with pytest.raises(AssertionError, match="expected 5 DNS queries for here"):
            attached.wait_for_queries(5, timeout=0.2, name="here")
    finally:
        attached.stop()
    assert peer.ask("serving") == "serving=True", "detaching leaves the server running"


def test_a_serving_process_outlives_the_others_then_one_takes_over(
    tmp_path: Path, peers: Callable[[Path, int], Peer]
) -> None:
    """Stopping waits (bounded) for the processes still using the zone; past that bound
    the server goes, and the next edit by a remaining process serves the zone there."""
    zone, port = tmp_path / "zone", free_udp_port()
    server = DnsServer.join(DOMAIN, "127.0.0.1", port, zone_dir=zone)
    peer = peers(zone, port)
    full = peer.ask("set kept 127.0.0.1")
    started = time.monotonic()
    server.stop(linger=0.5)  # the peer is still attached: waits the bound, then goes
    waited = time.monotonic() - started
    assert 0.4 <= waited < 5
    assert peer.ask("serving") == "serving=False"
    peer.ask("set other 127.0.0.3")  # an edit finds nobody serving: the peer serves
    assert peer.ask("serving") == "serving=True"
    assert ask(("127.0.0.1", port), full)[1] == ["127.0.0.1"], "names set before still answer"
    # A server whose peers have left stops at once, however long it would linger.
    second = DnsServer.join(DOMAIN, "127.0.0.1", port, zone_dir=zone)
    assert not second.serving
    second.stop()
    started = time.monotonic()
    assert peer.ask("stop 60") == "stopped"
    assert time.monotonic() - started < 5


def test_start_refuses_a_zone_another_process_serves(
    tmp_path: Path, peers: Callable[[Path, int], Peer]
) -> None:
    zone = tmp_path / "zone"
    peer = peers(zone, free_udp_port())
    assert peer.joined == "joined serving=True"
    with pytest.raises(DnsBusy, match="another process serves the DNS zone"):
        DnsServer(DOMAIN, zone_dir=zone).start()


def test_a_zone_nobody_uses_starts_empty_and_one_in_use_is_kept(tmp_path: Path) -> None:
    """A previous run's names and queries go when a run starts alone; a takeover keeps them."""
    zone = tmp_path / "zone"
    first = DnsServer.join(DOMAIN, "127.0.0.1", free_udp_port(), zone_dir=zone)
    stale = first.set("stale", ["127.0.0.1"])
    ask(first, stale)
    first.stop()
    again = DnsServer.join(DOMAIN, "127.0.0.1", free_udp_port(), zone_dir=zone)
    try:
        assert ask(again, stale)[0] == "NXDOMAIN"
        assert [q.name for q in again.queries] == [stale], "only the query just made"
    finally:
        again.stop()


def test_a_zone_nobody_uses_is_emptied_in_place(tmp_path: Path) -> None:
    """A run that starts alone empties the folder of names but keeps the folder itself: a
    process joining at that moment may be checking it, before it waits for its turn (found
    missing, that worker failed its set-up under xdist)."""
    zone = tmp_path / "zone"
    first = DnsServer.join(DOMAIN, "127.0.0.1", free_udp_port(), zone_dir=zone)
    first.set("stale", ["127.0.0.1"])
    first.stop()
    seen = os.open(zone / "names", os.O_RDONLY | os.O_DIRECTORY)
    try:
        again = DnsServer.join(DOMAIN, "127.0.0.1", free_udp_port(), zone_dir=zone)
        try:
            assert os.fstat(seen).st_nlink > 0, "the folder a joining process saw was removed"
            assert os.listdir(zone / "names") == []
        finally:
            again.stop()
    finally:
        os.close(seen)


def test_the_zone_directory_must_be_private(tmp_path: Path) -> None:
    """A zone steers where the IUT connects: nobody else may write to it."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    with pytest.raises(PermissionError, match="not private to this user"):
        DnsServer.join(DOMAIN, "127.0.0.1", free_udp_port(), zone_dir=shared)
    created = tmp_path / "made" / "zone"
    DnsServer.join(DOMAIN, "127.0.0.1", free_udp_port(), zone_dir=created).stop()
    assert stat.S_IMODE(created.stat().st_mode) == 0o700


def test_names_that_are_not_host_names_are_refused(server: DnsServer) -> None:
    """A name is a file of the zone: nothing that could leave the zone directory."""
    for bad in ("../escape", "a/b", "sp ace", "dot..dot"):
        with pytest.raises(ValueError, match="not a host name"):
            server.set(bad, ["127.0.0.1"])
    # Asked over the wire for such names (labels may hold any byte), the answer is NXDOMAIN.
    (server.zone_dir / "secret.rebind.genapi.test").write_text('{"addresses": ["10.0.0.9"]}')
    host, port = server.address
    for labels in ([b"..", b"secret"], [b"../secret"], [b"names/..", b"..", b"secret"]):
        query = DNSRecord.question("x")
        query.q.qname = DNSLabel([*labels, *(part.encode() for part in DOMAIN.split("."))])
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(2)
            sock.sendto(query.pack(), (host, port))
            reply = DNSRecord.parse(sock.recv(4096))
        assert (RCODE.get(reply.header.rcode), reply.rr) == ("NXDOMAIN", []), labels


def test_shared_zone_dir_is_the_same_for_one_run_and_distinct_otherwise(tmp_path: Path) -> None:
    profile = tmp_path / "profile.toml"
    same = shared_zone_dir(profile, "127.0.0.1", 5353)
    assert same == shared_zone_dir(tmp_path / "." / "profile.toml", "127.0.0.1", 5353)
    assert same.parent.name == f"genapi-dns-{os.getuid()}"
    others = {
        shared_zone_dir(tmp_path / "other.toml", "127.0.0.1", 5353),
        shared_zone_dir(profile, "127.0.0.1", 5354),
        shared_zone_dir(profile, "::1", 5353),
    }
    assert same not in others and len(others) == 3
    assert ":" not in shared_zone_dir(profile, "::1", 5353).name
