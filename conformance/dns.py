"""A small authoritative DNS server on loopback, for rebinding checks.

Spec §3 (redeliver rows) and §4 (callback URL requirements): a callback host name that
later resolves to a private address must be refused at redelivery. To test that, the
IUT resolves callback names under the profile's ``[dns]`` domain through this server,
and a check moves a name from the receiver's (allowlisted) address to a private one
with :meth:`DnsServer.rebind`.

One thread answers every query in turn (bounded: no thread per packet, unlike dnslib's
own server), with TTL 0 so that no resolver cache hides a rebinding. Names outside the
domain get REFUSED, unknown names inside it NXDOMAIN.
"""

from __future__ import annotations

import ipaddress
import secrets
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dnslib import AAAA, QTYPE, RCODE, RR, A, DNSRecord

__all__ = ["DnsQuery", "DnsServer"]


@dataclass(frozen=True)
class DnsQuery:
    """One question the server answered (for checks of when and how often the IUT resolves)."""

    name: str
    qtype: str
    answers: tuple[str, ...]
    rcode: str
    at: float  # time.monotonic()


@dataclass
class _Entry:
    addresses: tuple[str, ...]
    then: tuple[str, ...] | None = None  # addresses after a delayed rebind
    switch_after: int = 0  # queries still answered with ``addresses``


def _normalise(addresses: Iterable[str]) -> tuple[str, ...]:
    return tuple(str(ipaddress.ip_address(a.strip("[]"))) for a in addresses)


class DnsServer:
    """Authoritative for *domain*; listens on UDP *host*:*port* (0: a free port)."""

    def __init__(self, domain: str, host: str = "127.0.0.1", port: int = 0) -> None:
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError(f"the DNS server listens on loopback only, not {host}")
        self.domain = domain.lower().rstrip(".")
        self._host = host
        self._port = port
        self._lock = threading.Condition()
        self._names: dict[str, _Entry] = {}
        self._queries: list[DnsQuery] = []
        self._stopping = threading.Event()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> DnsServer:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            sock.bind((self._host, self._port))
        except OSError:
            sock.close()
            raise
        sock.settimeout(0.1)  # the loop checks for stop at this period
        self._sock = sock
        self._thread = threading.Thread(target=self._serve, name="dns-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._sock is not None:
            self._sock.close()

    def __enter__(self) -> DnsServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` where it listens (the port is known once started)."""
        if self._sock is None:
            raise RuntimeError("the DNS server is not started")
        host, port = self._sock.getsockname()[:2]
        return str(host), int(port)

    # -- records ---------------------------------------------------------------------

    def name(self, label: str) -> str:
        """The full name of *label* in the domain (``cb-1`` → ``cb-1.<domain>``)."""
        label = label.lower().rstrip(".")
        if label == self.domain or label.endswith("." + self.domain):
            return label
        return f"{label}.{self.domain}"

    def fresh_name(self, prefix: str = "cb") -> str:
        """A full name no check used before (checks share the session's server)."""
        return self.name(f"{prefix}-{secrets.token_hex(6)}")

    def set(self, name: str, addresses: Sequence[str]) -> str:
        """Answer *name* with *addresses* (IPv4 as A, IPv6 as AAAA); returns the full name."""
        full = self.name(name)
        with self._lock:
            self._names[full] = _Entry(_normalise(addresses))
        return full

    def rebind(self, name: str, new_addresses: Sequence[str], *, after_queries: int = 0) -> str:
        """Move *name* to *new_addresses*: now, or after *after_queries* more queries.

        A delayed switch models an attacker's name that passes validation and then
        points elsewhere when the connection resolves it again.
        """
        full = self.name(name)
        with self._lock:
            entry = self._names.get(full)
            if entry is None:
                raise KeyError(f"{full} is not set; set() it before rebinding")
            if after_queries <= 0:
                self._names[full] = _Entry(_normalise(new_addresses))
            else:
                entry.then = _normalise(new_addresses)
                entry.switch_after = after_queries
        return full

    def remove(self, name: str) -> None:
        with self._lock:
            self._names.pop(self.name(name), None)

    @property
    def queries(self) -> list[DnsQuery]:
        with self._lock:
            return list(self._queries)

    def wait_for_queries(
        self, count: int, timeout: float, *, name: str | None = None
    ) -> list[DnsQuery]:
        """Wait (with a deadline) until *count* queries (for *name*, if given) arrived."""
        full = None if name is None else self.name(name)
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                matching = [q for q in self._queries if full is None or q.name == full]
                if len(matching) >= count:
                    return matching
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"expected {count} DNS queries{'' if full is None else ' for ' + full} "
                        f"within {timeout:g} s, got {len(matching)}"
                    )
                self._lock.wait(remaining)

    # -- serving ---------------------------------------------------------------------

    def _answer(self, request: DNSRecord) -> DNSRecord:
        reply = request.reply()  # authoritative answer, same id and question
        qname = str(request.q.qname).lower().rstrip(".")
        qtype = QTYPE.get(request.q.qtype, str(request.q.qtype))
        answers: list[str] = []
        with self._lock:
            if qname != self.domain and not qname.endswith("." + self.domain):
                reply.header.rcode = RCODE.REFUSED
                reply.header.aa = 0
            elif qname not in self._names:
                reply.header.rcode = RCODE.NXDOMAIN
            else:
                entry = self._names[qname]
                current = entry.addresses
                if entry.then is not None:
                    entry.switch_after -= 1
                    if entry.switch_after <= 0:
                        entry.addresses, entry.then = entry.then, None
                for address in current:
                    version = ipaddress.ip_address(address).version
                    if qtype in ("A", "ANY") and version == 4:
                        reply.add_answer(RR(request.q.qname, QTYPE.A, rdata=A(address), ttl=0))
                        answers.append(address)
                    elif qtype in ("AAAA", "ANY") and version == 6:
                        reply.add_answer(
                            RR(request.q.qname, QTYPE.AAAA, rdata=AAAA(address), ttl=0)
                        )
                        answers.append(address)
            self._queries.append(
                DnsQuery(
                    name=qname,
                    qtype=str(qtype),
                    answers=tuple(answers),
                    rcode=str(RCODE.get(reply.header.rcode)),
                    at=time.monotonic(),
                )
            )
            self._lock.notify_all()
        return reply

    def _serve(self) -> None:
        assert self._sock is not None
        while not self._stopping.is_set():
            try:
                data, peer = self._sock.recvfrom(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                request = DNSRecord.parse(data)
            except Exception:  # noqa: S112 (a malformed packet gets no answer)
                continue
            try:
                self._sock.sendto(self._answer(request).pack(), peer)
            except OSError:
                continue
