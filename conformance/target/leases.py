"""Run-wide leases: one process of a run at a time holds a thing of the target that
checks share, and learns what the holder before it left behind.

What is shared is the target's own state, which no process can see from outside: the
rolling minute of a key (spec §8, "Requests per minute | Per tier, per API key, rolling
window") holds the requests of whoever used the key last, and the target's calendar
clock (the profile's ``[clock]``) stays where the last process moved it. The checks that
depend on them run as chains on several pytest-xdist workers at once; a lease keeps
their use of one key (or of the clock) in turn, and carries the little they must know of
each other: the send times still in the key's window, how far the clock was moved.

A lease is a small JSON file in a folder the run's processes share (the run's report
folder), held under an exclusive ``flock`` for as long as the holder needs it. Waiting
for it is bounded: a lease not had by the deadline is a set-up error, never a hang.
Chains whose keys differ (a profile that names a key per chain) never wait for each
other; chains that must share one key (a profile with only ``low-limit``) take turns.
"""

from __future__ import annotations

import fcntl
import json
import re
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any, Final

from conformance.target.setup import SetupFailed

__all__ = ["POLL_SECONDS", "Leases"]

#: How often a waiting process tries the lock again (flock has no timeout of its own).
POLL_SECONDS: Final = 0.05
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


class Leases:
    """The leases of one run, kept in *directory* (shared by the run's processes)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, name: str) -> Path:
        return self.directory / f"{_SAFE.sub('_', name)}.json"

    @contextmanager
    def hold(self, *names: str, wait_seconds: float) -> Iterator[dict[str, dict[str, Any]]]:
        """Hold the leases *names* (all of them, taken in sorted order so that two
        holders never wait for each other), waiting at most *wait_seconds* in all; yields
        each lease's state by name, a JSON object the holder may change: it is written
        back when the lease is released, for the next holder."""
        self.directory.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + wait_seconds
        with ExitStack() as stack:
            files = {
                name: stack.enter_context(self._locked(name, deadline))
                for name in sorted(set(names))
            }
            states = {name: _read(file) for name, file in files.items()}
            yield states
            for name, file in files.items():
                file.seek(0)
                file.write(json.dumps(states[name]))
                file.truncate()
                file.flush()

    @contextmanager
    def _locked(self, name: str, deadline: float) -> Iterator[IO[str]]:
        path = self._path(name)
        path.touch(exist_ok=True)
        # "r+", not "a+": in append mode every write goes to the end, whatever the seek.
        with path.open("r+", encoding="utf-8") as file:
            while True:
                try:
                    fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise SetupFailed(
                            f"setup: another check of this run held {name!r} past the wait "
                            "allowed for it"
                        ) from None
                    time.sleep(POLL_SECONDS)  # bounded by the deadline above
            try:
                yield file
            finally:
                fcntl.flock(file, fcntl.LOCK_UN)


def _read(file: IO[str]) -> dict[str, Any]:
    file.seek(0)
    text = file.read()
    try:
        state = json.loads(text) if text.strip() else {}
    except ValueError:
        state = {}  # a holder cut short mid-write: start afresh, as with no holder before
    return state if isinstance(state, dict) else {}
