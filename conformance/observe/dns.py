"""A small authoritative DNS server on loopback, for rebinding checks, one per run.

Spec §3 (redeliver rows) and §4 (callback URL requirements): a callback host name that
later resolves to a private address must be refused at redelivery. To test that, the
IUT resolves callback names under the profile's ``[dns]`` domain through this server,
and a check moves a name from the receiver's (allowlisted) address to a private one
with :meth:`DnsServer.rebind`.

**One server, many editors.** The IUT knows one DNS address, fixed when it starts, but a
run has several processes (the ``genapi-conformance run`` controller and its pytest-xdist
workers) that each need to point names somewhere. So the zone lives on disk, in a *zone
directory*, and the server reads it on every query (answers have TTL 0, so no resolver
cache hides a change either):

* ``names/<full name>``: one small JSON file per name, written whole and moved into place
  with :func:`os.replace` (a reader sees the old record or the new one, never half);
* ``queries.jsonl``: one line per question answered, appended by the serving process, so
  that any process can see (and wait for) what the IUT asked;
* ``serve.lock``: held (``flock``) by the one process that serves the zone, for as long as
  it serves: whoever takes it binds the port, everyone else edits the files;
* ``clients.lock``: held shared by every process using the zone; the server takes it
  exclusively before it stops, so it outlives every worker still using it (bounded).

A file tree was chosen over a control channel on loopback because it needs no protocol,
no acknowledgements and no retry logic: a write is visible to the next query once
``os.replace`` returned, in every process, and the locks are released by the kernel when
a process dies, so a crashed worker can never leave the zone unusable.

:meth:`DnsServer.start` serves a zone here (the embedded run's controller does this
before it starts the reference with ``--dns-server``); :meth:`DnsServer.join` serves it
or attaches to the process that does (the ``dns_server`` fixture does this in every
worker). One thread answers every query in turn (bounded: no thread per packet, unlike
dnslib's own server). Names outside the domain get REFUSED, unknown names inside it
NXDOMAIN.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import ipaddress
import json
import os
import re
import secrets
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any, Final, Self

from dnslib import AAAA, QTYPE, RCODE, RR, A, DNSRecord

from conformance.observe.serving import Serving

__all__ = [
    "DEFAULT_DOMAIN",
    "SILENT_RCODE",
    "DnsBusy",
    "DnsQuery",
    "DnsServer",
    "run_zone_dir",
    "shared_zone_dir",
]

#: The domain the reference's provisioning writes into its profile's ``[dns]`` table.
DEFAULT_DOMAIN: Final = "rebind.genapi.test"
#: How long a lock or a zone file operation may wait for another process (they hold
#: locks for microseconds: this bound only ends a wait on a wedged process).
LOCK_TIMEOUT_S: Final = 10.0
#: How long a serving worker waits, when its session ends, for other processes of the
#: run still using the zone (another xdist worker may run DNS checks after this one
#: finished its share). Past it the server stops anyway; a later edit by a remaining
#: process serves the zone itself (:meth:`DnsServer.set` takes over).
LINGER_S: Final = 900.0
#: The period at which cross-process waits look again (the other side cannot notify us).
_POLL_S: Final = 0.02
#: The ``rcode`` logged for a question left unanswered (a name given to
#: :meth:`DnsServer.silence`).
SILENT_RCODE: Final = "NO-ANSWER"
#: A full name, as stored: lower-case labels of letters, digits, ``-`` and ``_``. Also
#: what makes a name safe as a file name (no ``/``, never ``.`` or ``..``).
_NAME = re.compile(r"^[a-z0-9_-]{1,63}(?:\.[a-z0-9_-]{1,63})*$")


class DnsBusy(OSError):
    """Another process already serves this zone (from :meth:`DnsServer.start`)."""


@dataclass(frozen=True)
class DnsQuery:
    """One question the server got (for checks of when and how often the IUT resolves);
    ``rcode`` is :data:`SILENT_RCODE` for a question left unanswered.

    ``at`` is ``time.monotonic()`` of the serving process; on Linux that clock is the
    machine's, so it compares with the monotonic time of any process of the run.
    """

    name: str
    qtype: str
    answers: tuple[str, ...]
    rcode: str
    at: float


def _normalise(addresses: Iterable[str]) -> tuple[str, ...]:
    return tuple(str(ipaddress.ip_address(a.strip("[]"))) for a in addresses)


def _private_dir(path: Path) -> Path:
    """Create *path* (owner only) or accept it if this user owns it and no one else may
    write to it: a zone steers where the IUT connects, so nobody else may edit it."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.stat()
    if info.st_uid != os.getuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise PermissionError(
            f"DNS zone directory {path} is not private to this user (owner {info.st_uid}, "
            f"mode {stat.filemode(info.st_mode)}); remove it or choose another zone_dir"
        )
    return path


def shared_zone_dir(profile_path: Path | str, host: str, port: int) -> Path:
    """The zone directory every process of one run derives alike: from the profile file
    and the DNS server's address, under this user's temporary directory.

    A run with a profile whose ``[dns]`` names no ``zone_dir`` (an IUT started by hand
    with ``--dns-server``) meets here; two runs with different profiles do not share.
    """
    key = f"{Path(profile_path).resolve()}|{host}|{port}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    safe_host = re.sub(r"[^A-Za-z0-9.]", "_", host)
    return (
        Path(tempfile.gettempdir()) / f"genapi-dns-{os.getuid()}" / f"{safe_host}-{port}-{digest}"
    )


def run_zone_dir(
    profile_path: Path | str, host: str, port: int, zone_dir: Path | None
) -> Path | None:
    """The zone directory of a run's profile ``[dns]``: its ``zone_dir`` when set, else
    :func:`shared_zone_dir`; None for port 0 (a free port nobody else can know, so the
    zone is private to the one process that serves it)."""
    if zone_dir is not None:
        return zone_dir
    return None if port == 0 else shared_zone_dir(profile_path, host, port)


def _lock(handle: IO[bytes], operation: int, deadline: float | None) -> bool:
    """``flock`` *handle* with a deadline (None: try once); True when taken."""
    while True:
        try:
            fcntl.flock(handle.fileno(), operation | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if deadline is None or time.monotonic() >= deadline:
                return False
        time.sleep(_POLL_S)  # another process holds it; it gives no signal, so look again


class _Zone:
    """The zone's files (see the module docstring); every method is safe across processes."""

    def __init__(self, directory: Path) -> None:
        self.directory = _private_dir(directory)
        self.names = _private_dir(directory / "names")
        self.log = directory / "queries.jsonl"
        self.log.touch(mode=0o600, exist_ok=True)

    def path(self, full: str) -> Path:
        if not _NAME.match(full) or len(full) > 253:
            raise ValueError(f"{full!r} is not a host name this DNS server can hold")
        return self.names / full

    def read(self, full: str) -> dict[str, Any] | None:
        try:
            text = self.path(full).read_text(encoding="utf-8")
        except (FileNotFoundError, ValueError):
            return None
        record: dict[str, Any] = json.loads(text)
        return record

    def write(self, full: str, record: dict[str, Any]) -> None:
        target = self.path(full)
        partial = self.names / f".{full}.{secrets.token_hex(4)}.part"
        partial.write_text(json.dumps(record), encoding="utf-8")
        os.replace(partial, target)  # atomic: a query reads the old record or this one

    def delete(self, full: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path(full).unlink()

    def clear(self) -> None:
        """Forget every name and query (a fresh zone: nobody else uses it yet).

        The folder of names stays, emptied: a process about to join may be checking it at
        that moment (:func:`_private_dir`), before it waits for the lock that makes it a
        user of the zone.
        """
        for entry in self.names.iterdir():
            entry.unlink(missing_ok=True)  # only files live there (names, partial writes)
        self.log.write_bytes(b"")

    def append(self, query: DnsQuery) -> None:
        line = (json.dumps(asdict(query)) + "\n").encode()
        # One write() on an O_APPEND descriptor: lines never interleave or tear.
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def queries(self) -> list[DnsQuery]:
        found: list[DnsQuery] = []
        for line in self.log.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError, TypeError):  # a line being written
                row = json.loads(line)
                found.append(
                    DnsQuery(
                        row["name"], row["qtype"], tuple(row["answers"]), row["rcode"], row["at"]
                    )
                )
        return found

    def open_lock(self, name: str) -> IO[bytes]:
        return (self.directory / name).open("a+b")


class DnsServer(Serving):
    """The run's DNS server for *domain* on UDP *host*:*port* (0: a free port).

    An instance either serves (it holds the socket and answers) or is attached to the
    process of the run that serves the same zone; both edit the zone alike, so a check
    never needs to know which it got. Without *zone_dir* the zone is private to this
    instance (a temporary directory).
    """

    def __init__(
        self,
        domain: str,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        zone_dir: Path | str | None = None,
    ) -> None:
        if not ipaddress.ip_address(host.strip("[]")).is_loopback:
            raise ValueError(f"the DNS server listens on loopback only, not {host}")
        self.domain = domain.lower().rstrip(".")
        self._host = host.strip("[]")
        self._port = port
        self._zone_arg = None if zone_dir is None else Path(zone_dir)
        self._tempdir: tempfile.TemporaryDirectory[str] | None = None
        self._zone: _Zone | None = None
        self._serve_lock: IO[bytes] | None = None
        self._clients_lock: IO[bytes] | None = None
        self._wakeup = threading.Condition()
        self._counts: dict[tuple[str, str], int] = {}  # delayed rebinds: answers so far
        self._stopping = threading.Event()
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------

    def _open_zone(self) -> _Zone:
        if self._zone is None:
            if self._zone_arg is None:
                self._tempdir = tempfile.TemporaryDirectory(prefix="genapi-dns-")
                self._zone = _Zone(Path(self._tempdir.name))
            else:
                self._zone = _Zone(self._zone_arg)
        return self._zone

    def start(self) -> Self:
        """Serve the zone from this process; :class:`DnsBusy` if another process does,
        :class:`OSError` if the port is taken."""
        zone = self._open_zone()
        self._serve_lock = zone.open_lock("serve.lock")
        if not _lock(self._serve_lock, fcntl.LOCK_EX, None):
            self._release()
            raise DnsBusy(f"another process serves the DNS zone {zone.directory}")
        try:
            self._bind()
        except OSError:
            self._release()
            raise
        return self

    @classmethod
    def join(
        cls,
        domain: str,
        host: str,
        port: int,
        *,
        zone_dir: Path | str | None,
        timeout: float = LOCK_TIMEOUT_S,
    ) -> DnsServer:
        """This process's handle on the run's server for this zone: it serves the zone if
        no process of the run does yet, else it attaches to the one that does.

        A server that finds itself the zone's only user starts from an empty zone (a
        previous run's names and queries are dropped); one that takes over from a server
        gone while others still use the zone keeps it.
        """
        server = cls(domain, host, port, zone_dir=zone_dir)
        zone = server._open_zone()
        deadline = time.monotonic() + timeout
        try:
            server._clients_lock = zone.open_lock("clients.lock")
            # Exclusive for a moment: if no one else uses the zone, it is ours to reset.
            alone = _lock(server._clients_lock, fcntl.LOCK_EX, None)
            if not alone and not _lock(server._clients_lock, fcntl.LOCK_SH, deadline):
                raise TimeoutError(f"DNS zone {zone.directory}: its clients lock stays taken")
            server._serve_lock = zone.open_lock("serve.lock")
            if _lock(server._serve_lock, fcntl.LOCK_EX, None):
                if alone:
                    zone.clear()
                server._bind()
            else:
                server._serve_lock.close()
                server._serve_lock = None
            if alone:  # downgrade: others may join now
                fcntl.flock(server._clients_lock.fileno(), fcntl.LOCK_SH)
        except BaseException:
            server._release()
            raise
        return server

    def _bind(self) -> None:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            sock.bind((self._host, self._port))
        except OSError:
            sock.close()
            raise
        sock.settimeout(0.1)  # the loop checks for stop at this period
        self._sock = sock
        self._stopping.clear()
        self._thread = threading.Thread(target=self._serve, name="dns-server", daemon=True)
        self._thread.start()

    @property
    def serving(self) -> bool:
        """True when this process answers the queries (False: attached to another)."""
        return self._sock is not None

    def stop(self, *, linger: float = LINGER_S) -> None:
        """Stop serving (after the other processes using the zone left, waiting at most
        *linger* seconds), or detach; a private zone is removed."""
        if self._sock is not None and self._clients_lock is not None:
            # Exclusive once every other user of the zone let go of its shared lock.
            fcntl.flock(self._clients_lock.fileno(), fcntl.LOCK_UN)
            _lock(self._clients_lock, fcntl.LOCK_EX, time.monotonic() + linger)
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._release()

    def _release(self) -> None:
        # The socket is closed before the serve lock goes: whoever takes the lock next
        # can bind the port.
        for handle in (self._serve_lock, self._clients_lock):
            if handle is not None:
                handle.close()  # closing releases the flock
        self._serve_lock = self._clients_lock = None
        if self._tempdir is not None:
            self._tempdir.cleanup()
            self._tempdir = None
            self._zone = None

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` where the zone is served (the port is known once started)."""
        if self._sock is not None:
            host, port = self._sock.getsockname()[:2]
            return str(host), int(port)
        if self._zone is None or self._port == 0:
            raise RuntimeError("the DNS server is not started")
        return self._host, self._port

    @property
    def zone_dir(self) -> Path:
        """Where the zone lives (what other processes of the run attach to)."""
        return self._open_zone().directory

    # -- records ---------------------------------------------------------------------

    def name(self, label: str) -> str:
        """The full name of *label* in the domain (``cb-1`` → ``cb-1.<domain>``)."""
        label = label.lower().rstrip(".")
        if label == self.domain or label.endswith("." + self.domain):
            return label
        return f"{label}.{self.domain}"

    def fresh_name(self, prefix: str = "cb") -> str:
        """A full name no check used before (checks share the run's server)."""
        return self.name(f"{prefix}-{secrets.token_hex(6)}")

    def _ensure_served(self) -> None:
        """Attached, and the serving process has gone (its linger ran out): serve here.

        The zone files stay as they were, so names set before keep answering.
        """
        if self._sock is not None or self._clients_lock is None:
            return
        zone = self._open_zone()
        handle = zone.open_lock("serve.lock")
        if not _lock(handle, fcntl.LOCK_EX, None):
            handle.close()
            return
        self._serve_lock = handle
        try:
            self._bind()
        except OSError:
            self._serve_lock = None
            handle.close()
            raise

    def set(self, name: str, addresses: Sequence[str]) -> str:
        """Answer *name* with *addresses* (IPv4 as A, IPv6 as AAAA); returns the full name.

        Effective for the next query, whichever process of the run answers it.
        """
        return self._write(name, {"addresses": list(_normalise(addresses))})

    def silence(self, name: str) -> str:
        """Never answer *name* (a resolver asking for it times out); returns the full name.
        Its queries are still logged, so a check can see that the name was asked for."""
        return self._write(name, {"addresses": [], "silent": True})

    def _write(self, name: str, record: dict[str, Any]) -> str:
        """Serve *name* from *record*, under a new version; returns the full name."""
        full = self.name(name)
        self._ensure_served()
        self._open_zone().write(full, {**record, "version": secrets.token_hex(8)})
        return full

    def rebind(self, name: str, new_addresses: Sequence[str], *, after_queries: int = 0) -> str:
        """Move *name* to *new_addresses*: now, or after *after_queries* more queries.

        A delayed switch models an attacker's name that passes validation and then
        points elsewhere when the connection resolves it again. The server counts the
        queries itself (a server taking over mid-way counts again from zero).
        """
        full = self.name(name)
        self._ensure_served()
        zone = self._open_zone()
        current = zone.read(full)
        if current is None:
            raise KeyError(f"{full} is not set; set() it before rebinding")
        new = list(_normalise(new_addresses))
        record: dict[str, Any] = {"addresses": new, "version": secrets.token_hex(8)}
        if after_queries > 0:
            record.update(addresses=current["addresses"], then=new, after=after_queries)
        zone.write(full, record)
        return full

    def remove(self, name: str) -> None:
        self._open_zone().delete(self.name(name))

    @property
    def queries(self) -> list[DnsQuery]:
        """Every question the run's server answered for this zone, oldest first."""
        return self._open_zone().queries()

    def wait_for_queries(
        self, count: int, timeout: float, *, name: str | None = None
    ) -> list[DnsQuery]:
        """Wait (with a deadline) until *count* queries (for *name*, if given) arrived."""
        full = None if name is None else self.name(name)
        deadline = time.monotonic() + timeout
        while True:
            matching = [q for q in self.queries if full is None or q.name == full]
            if len(matching) >= count:
                return matching
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"expected {count} DNS queries{'' if full is None else ' for ' + full} "
                    f"within {timeout:g} s, got {len(matching)}"
                )
            # Serving here, an answer wakes us early; attached, the server is another
            # process that cannot notify us: look again after a short while.
            with self._wakeup:
                self._wakeup.wait(min(remaining, _POLL_S))

    # -- serving ---------------------------------------------------------------------

    def _addresses(self, qname: str, record: dict[str, Any]) -> tuple[str, ...]:
        """The addresses *qname* answers with now, from its *record*."""
        addresses = tuple(str(a) for a in record["addresses"])
        if "then" in record:
            key = (qname, str(record["version"]))
            served = self._counts.get(key, 0)
            self._counts[key] = served + 1
            if served >= int(record["after"]):
                addresses = tuple(str(a) for a in record["then"])
        return addresses

    def _answer(self, request: DNSRecord) -> DNSRecord | None:
        """The reply to *request* (None: a silenced name, left unanswered), logged."""
        reply = request.reply()  # authoritative answer, same id and question
        qname = str(request.q.qname).lower().rstrip(".")
        qtype = QTYPE.get(request.q.qtype, str(request.q.qtype))
        answers: list[str] = []
        current: tuple[str, ...] = ()
        silent = False
        if qname != self.domain and not qname.endswith("." + self.domain):
            reply.header.rcode = RCODE.REFUSED
            reply.header.aa = 0
        else:
            record = self._open_zone().read(qname)
            if record is None:
                reply.header.rcode = RCODE.NXDOMAIN
            else:
                silent = bool(record.get("silent"))
                current = self._addresses(qname, record)
        for address in current:
            version = ipaddress.ip_address(address).version
            if qtype in ("A", "ANY") and version == 4:
                reply.add_answer(RR(request.q.qname, QTYPE.A, rdata=A(address), ttl=0))
                answers.append(address)
            elif qtype in ("AAAA", "ANY") and version == 6:
                reply.add_answer(RR(request.q.qname, QTYPE.AAAA, rdata=AAAA(address), ttl=0))
                answers.append(address)
        self._open_zone().append(
            DnsQuery(
                name=qname,
                qtype=str(qtype),
                answers=tuple(answers),
                rcode=SILENT_RCODE if silent else str(RCODE.get(reply.header.rcode)),
                at=time.monotonic(),
            )
        )
        with self._wakeup:
            self._wakeup.notify_all()
        return None if silent else reply

    def _serve(self) -> None:
        sock = self._sock
        assert sock is not None
        while not self._stopping.is_set():
            try:
                data, peer = sock.recvfrom(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                request = DNSRecord.parse(data)
            except Exception:  # noqa: S112 (a malformed packet gets no answer)
                continue
            try:
                answer = self._answer(request)
            except (OSError, ValueError):  # the zone unreadable for a moment: no answer
                continue
            if answer is None:
                continue
            reply = answer.pack()
            try:
                sock.sendto(reply, peer)
            except OSError:
                continue
