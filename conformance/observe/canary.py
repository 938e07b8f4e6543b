"""Canary listeners: sockets that must never be reached by a callback the IUT refused.

A :class:`Canary` has two listeners. A dual-stack socket on ``[::]`` on its own port sees
127.0.0.2, 0.0.0.0, ::1 and the IPv4-mapped forms; a listener on 127.0.0.2 at the
receiver's port sees a name rebound to 127.0.0.2 (a test allowlist of 127.0.0.1/32
legitimately admits every spelling of 127.0.0.1, so the rejection vectors and canaries use
127.0.0.2 instead). A connection is recorded when it is accepted, whatever it sends: the
connection itself is the violation. :class:`CanaryView` is the run's canary as one check
sees it, counting hits from the check's start.

Nothing here sleeps to synchronise: waits are on a condition with a deadline.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from dataclasses import dataclass
from typing import Final, Self

from conformance.observe.serving import Serving

__all__ = ["Canary", "CanaryHit", "CanaryView"]


@dataclass(frozen=True)
class CanaryHit:
    """A connection to a canary: a callback that should have been refused was dialled."""

    listener: str  # "dual-stack" or "rebind"
    peer: str
    local: str
    arrived_at: float
    request_line: str | None = None  # None until (unless) an HTTP request line was read


_CANARY_REPLY: Final = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 7\r\n"
    b"Connection: close\r\n\r\ncanary\n"
)


def _bound(family: int, address: tuple[str, int], *, dual_stack: bool = False) -> socket.socket:
    """A listening TCP socket on *address*, closed again if binding fails."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if dual_stack:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(address)
        sock.listen(16)
    except OSError:
        sock.close()
        raise
    return sock


#: Connections a listener reads at once; beyond that a hit is recorded and closed at once.
_MAX_CANARY_READERS: Final = 8


class _Listener:
    """One listening socket: one accept thread, at most 8 short-lived reader threads.

    Connections are accepted (and recorded) only under ``_accept_lock``, so that
    :meth:`settle` can guarantee that every connection completed before it was called
    is recorded when it returns: either the accept thread recorded it, or it still waits
    in the backlog and ``settle`` accepts it itself.
    """

    def __init__(self, canary: Canary, label: str, sock: socket.socket) -> None:
        self.canary = canary
        self.label = label
        self.sock = sock
        self.sock.setblocking(False)
        self.thread = threading.Thread(target=self._run, name=f"canary-{label}", daemon=True)
        self._readers = threading.BoundedSemaphore(_MAX_CANARY_READERS)
        self._accept_lock = threading.Lock()

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def _run(self) -> None:
        while not self.canary._stopping.is_set():
            try:
                # The loop checks for stop at this period.
                readable, _, _ = select.select([self.sock], [], [], 0.1)
            except (OSError, ValueError):
                return  # closed by stop()
            if readable:
                with self._accept_lock:
                    self._accept_one()

    def settle(self) -> None:
        """Record every connection waiting in the backlog (bounded)."""
        with self._accept_lock:
            for _ in range(1000):
                if not self._accept_one():
                    return

    def _accept_one(self) -> bool:
        """Accept and record one waiting connection; False when none waits."""
        try:
            conn, peer = self.sock.accept()
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return False  # closed by stop()
        # Recorded on accept: a connection is the violation, whatever it sends.
        index = self.canary._record(
            CanaryHit(
                listener=self.label,
                peer=str(peer[0]),
                local=str(conn.getsockname()[0]),
                arrived_at=time.monotonic(),
            )
        )
        if self._readers.acquire(blocking=False):
            reader = threading.Thread(
                target=self._read, args=(conn, index), name=f"canary-{self.label}-read"
            )
            reader.daemon = True
            reader.start()
        else:
            conn.close()
        return True

    def _read(self, conn: socket.socket, index: int) -> None:
        """Read the request line (for the report) and answer, within 2 s."""
        try:
            with conn:
                conn.settimeout(2.0)
                data = b""
                while b"\r\n" not in data and len(data) < 8192:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                if b"\r\n" in data:
                    line = data.split(b"\r\n", 1)[0].decode("latin-1")[:300]
                    self.canary._complete(index, line)
                    conn.sendall(_CANARY_REPLY)
        except OSError:
            pass  # the peer went away or was silent; the hit is recorded already
        finally:
            self._readers.release()


class Canary(Serving):
    """Listeners that must never be reached; :attr:`hits` must stay empty.

    * ``dual-stack``: ``[::]`` with IPV6_V6ONLY off, on its own port, so 127.0.0.2,
      0.0.0.0, ::1 and IPv4-mapped forms all land here (:meth:`url`).
    * ``rebind``: 127.0.0.2 at the receiver's port (:meth:`rebind_url`), for a callback
      host that is later rebound from the receiver's address to 127.0.0.2.
    """

    def __init__(self, rebind_port: int | None = None, rebind_host: str = "127.0.0.2") -> None:
        self._lock = threading.Condition()
        self._stopping = threading.Event()
        self._hits: list[CanaryHit] = []
        self._listeners: list[_Listener] = []
        self.rebind_host = rebind_host
        self._rebind_port = rebind_port
        self.dual_stack_v6 = True

    def start(self) -> Self:
        try:
            sock = _bound(socket.AF_INET6, ("::", 0), dual_stack=True)
        except OSError:
            # No IPv6 on this host: IPv4 wildcard still catches 127.0.0.2 and 0.0.0.0.
            self.dual_stack_v6 = False
            sock = _bound(socket.AF_INET, ("0.0.0.0", 0))  # noqa: S104 (every local address)
        self._listeners.append(_Listener(self, "dual-stack", sock))
        if self._rebind_port is not None:
            try:
                rebind = _bound(socket.AF_INET, (self.rebind_host, self._rebind_port))
            except OSError:
                sock.close()
                raise
            self._listeners.append(_Listener(self, "rebind", rebind))
        for listener in self._listeners:
            listener.thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        for listener in self._listeners:
            listener.sock.close()
        for listener in self._listeners:
            listener.thread.join(timeout=5)

    @property
    def port(self) -> int:
        """The dual-stack listener's port."""
        return self._listeners[0].port

    @property
    def rebind_port(self) -> int | None:
        return self._listeners[1].port if len(self._listeners) > 1 else None

    def url(self, host: str = "127.0.0.2", path: str = "/canary") -> str:
        """A URL on the dual-stack listener through *host* (e.g. ``127.0.0.2``, ``::1``)."""
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        return f"http://{host}:{self.port}{path}"

    def rebind_url(self, path: str = "/canary") -> str:
        if self.rebind_port is None:
            raise RuntimeError("this canary has no rebind listener (no receiver port given)")
        return f"http://{self.rebind_host}:{self.rebind_port}{path}"

    # -- hits ------------------------------------------------------------------------

    def _record(self, hit: CanaryHit) -> int:
        with self._lock:
            self._hits.append(hit)
            self._lock.notify_all()
            return len(self._hits) - 1

    def _complete(self, index: int, request_line: str) -> None:
        with self._lock:
            hit = self._hits[index]
            self._hits[index] = CanaryHit(
                hit.listener, hit.peer, hit.local, hit.arrived_at, request_line
            )

    def settle(self) -> None:
        """Record the connections still waiting in the listeners' backlogs.

        A connection completes in the kernel before it is accepted; without this, a
        check could read the hits between an IUT's connect and the accept.
        """
        for listener in self._listeners:
            listener.settle()

    @property
    def hits(self) -> list[CanaryHit]:
        self.settle()
        with self._lock:
            return list(self._hits)

    def mark(self) -> int:
        """A position in the hit list; :meth:`hits_since` gives what came after it."""
        with self._lock:
            return len(self._hits)

    def hits_since(self, mark: int) -> list[CanaryHit]:
        self.settle()
        with self._lock:
            return list(self._hits[mark:])

    def view(self) -> CanaryView:
        """This canary as one check sees it: only the hits from now on."""
        return CanaryView(self, self.mark())

    def wait_for_hits(self, count: int, timeout: float, *, since: int = 0) -> list[CanaryHit]:
        """Wait (with a deadline) until *count* hits arrived after *since*."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self._hits) - since >= count, timeout):
                raise AssertionError(
                    f"expected {count} canary hits within {timeout:g} s, "
                    f"got {len(self._hits) - since}"
                )
            return list(self._hits[since:])


class CanaryView:
    """The run's canary as seen by one check: :attr:`hits` counts from the check's start."""

    def __init__(self, canary: Canary, since: int) -> None:
        self.canary = canary
        self.since = since

    @property
    def hits(self) -> list[CanaryHit]:
        return self.canary.hits_since(self.since)

    @property
    def port(self) -> int:
        return self.canary.port

    @property
    def rebind_port(self) -> int | None:
        return self.canary.rebind_port

    def url(self, host: str = "127.0.0.2", path: str = "/canary") -> str:
        return self.canary.url(host, path)

    def rebind_url(self, path: str = "/canary") -> str:
        return self.canary.rebind_url(path)

    def wait_for_hits(self, count: int, timeout: float) -> list[CanaryHit]:
        return self.canary.wait_for_hits(count, timeout, since=self.since)

    def assert_no_hits(self) -> None:
        """Fail naming every connection a canary saw since the check started."""
        hits = self.hits
        if hits:
            seen = "; ".join(
                f"{h.listener} from {h.peer} to {h.local}: {h.request_line or '(no request)'}"
                for h in hits
            )
            raise AssertionError(f"a canary was reached ({len(hits)} connections): {seen}")
