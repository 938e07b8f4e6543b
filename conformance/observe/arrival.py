"""When a request reached the receiver: the kernel's receive time of its first byte.

The gaps between a delivery's attempts are judged to tenths of a second (spec §6: backoff
1 s, then 2 s; 10 s per attempt). A time taken when the receiver's handler runs includes
the suite's own lateness: on a loaded machine the threads that accept, read and dispatch a
request may run a second after its bytes came, and a gap then reads short or long by that
much, a verdict about the suite's machine rather than the implementation.

The kernel stamps every packet as it receives it. With ``SO_TIMESTAMPNS`` set on the
connection, a ``MSG_PEEK`` of the first byte of a request returns that stamp and consumes
nothing, so the HTTP server then reads the request as before. :func:`first_byte_at` waits
(bounded) for the next request's first byte on a connection and returns its stamp on the
``time.monotonic()`` clock. Where there is no stamp to be had (a platform without it, a
TLS socket, a request the server had already read ahead: HTTP pipelining) it returns
``None`` and the caller takes the time it runs instead. (The receiver's server, werkzeug,
answers every request with ``Connection: close``, so a connection carries one request; the
guards for kept-alive and read-ahead requests keep this true should that change.)

Linux turns stamping on for the whole machine when a socket first asks for it, but, when
no other socket holds it on, later, from a work queue: bytes that arrive meanwhile carry
no stamp at all (seen on a loaded machine: a byte sent just after the option was set came
without one). :func:`await_stamping` waits until the kernel stamps what it receives, so
that the receiver, which asks for stamps as it starts, times its first delivery too.
"""

from __future__ import annotations

import select
import socket
import struct
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

__all__ = ["IDLE_SECONDS", "await_stamping", "enable_stamps", "first_byte_at", "non_blocking"]

#: Linux's value; Python's socket module does not export the name.
SO_TIMESTAMPNS: Final = int(getattr(socket, "SO_TIMESTAMPNS", 35))
#: The control message carrying the stamp has the option's number.
SCM_TIMESTAMPNS: Final = SO_TIMESTAMPNS
#: A ``struct timespec``: seconds and nanoseconds, two native 64-bit integers.
_TIMESPEC: Final = struct.Struct("@qq")
#: How long a kept-alive connection is watched for its next request's first byte; past it
#: the request (if one comes) is timed when the server reads it.
IDLE_SECONDS: Final = 120.0
#: Waits for a byte on one connection: each ends when the socket is readable (a byte or
#: the close) or at the idle bound, so two suffice; a few more absorb spurious wake-ups.
_MAX_WAITS: Final = 8
#: How long :func:`await_stamping` waits for the kernel's stamps (normally milliseconds:
#: the work that turns them on waits only for a free CPU), and how often it looks.
STAMPING_WAIT_S: Final = 5.0
_STAMPING_POLL_S: Final = 0.005


def enable_stamps(connection: socket.socket) -> bool:
    """Ask the kernel to stamp what *connection* receives; False where it cannot."""
    try:
        connection.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except (OSError, AttributeError):
        return False
    return True


def await_stamping(timeout: float = STAMPING_WAIT_S) -> bool:
    """Wait (at most *timeout* seconds) until the kernel stamps what sockets receive;
    whether it does. Call it once a socket of one's own holds stamps on (the module's
    docstring says why): a loopback connection made here sends itself a byte until one
    comes stamped."""
    deadline = time.monotonic() + timeout
    with socket.create_server(("127.0.0.1", 0)) as listener:
        with socket.create_connection(listener.getsockname()[:2], timeout=timeout) as client:
            server, _ = listener.accept()
            with server:
                if not enable_stamps(server):
                    return False
                for _ in range(int(timeout / _STAMPING_POLL_S) + 1):
                    client.sendall(b".")
                    stamp = first_byte_at(server, lambda: False)
                    server.recv(1)
                    if stamp is not None:
                        return True
                    if time.monotonic() >= deadline:
                        return False
                    time.sleep(_STAMPING_POLL_S)  # polling interval; the deadline bounds it
    return False


@contextmanager
def non_blocking(connection: socket.socket) -> Iterator[None]:
    """*connection* without its timeout for a moment: a socket with a timeout waits that
    long before it even tries a read (``MSG_DONTWAIT`` or not), so a look at what is
    already there must switch it off, and put it back."""
    timeout = connection.gettimeout()
    connection.settimeout(0.0)
    try:
        yield
    finally:
        connection.settimeout(timeout)


class _NothingYet:
    """The socket holds no byte yet (distinct from ``None``: no stamp to be had)."""


_NOTHING_YET: Final = _NothingYet()


def first_byte_at(connection: socket.socket, read_ahead: Callable[[], bool]) -> float | None:
    """The ``time.monotonic()`` value at which the first byte of the next request on
    *connection* reached the machine, waiting for it at most :data:`IDLE_SECONDS`.

    *read_ahead* tells whether the server already holds bytes of the next request in its
    own buffer (asked only when the socket is empty): then the request came before, with
    no stamp left to read, and this returns ``None`` at once rather than wait for bytes
    that may never come. ``None`` also when the connection closed or has no stamps.
    """
    deadline = time.monotonic() + IDLE_SECONDS
    for _ in range(_MAX_WAITS):
        stamp = _peek_stamp(connection)
        if not isinstance(stamp, _NothingYet):
            return stamp
        if read_ahead():
            return None
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        try:
            select.select([connection], [], [], left)
        except (OSError, ValueError):  # closed under us
            return None
    return None


def _peek_stamp(connection: socket.socket) -> float | _NothingYet | None:
    """The stamp of the first byte waiting on *connection*, without blocking or reading."""
    try:
        with non_blocking(connection):
            data, ancillary, _flags, _address = connection.recvmsg(
                1, socket.CMSG_SPACE(_TIMESPEC.size), socket.MSG_PEEK
            )
    except BlockingIOError:
        return _NOTHING_YET
    except (OSError, NotImplementedError, AttributeError):  # TLS, closed, no recvmsg
        return None
    if not data:
        return None  # the peer closed the connection
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPNS:
            seconds, nanoseconds = _TIMESPEC.unpack_from(payload)
            # The stamp is on the wall clock: its age moves it to the monotonic one.
            age = time.time() - (int(seconds) + int(nanoseconds) / 1e9)
            if age > IDLE_SECONDS or age < -1.0:
                return None  # the wall clock was stepped meanwhile: no honest stamp
            return time.monotonic() - max(0.0, age)
    return None
