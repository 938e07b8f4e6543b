"""Run-wide leases (``conformance/target/leases.py``): one holder at a time, a bounded
wait, and the state a holder leaves for the next."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pytest

from conformance.target.leases import Leases
from conformance.target.setup import SetupFailed


def test_a_holder_leaves_its_state_to_the_next(tmp_path: Path) -> None:
    leases = Leases(tmp_path / "leases")
    with leases.hold("key low-limit", wait_seconds=1) as states:
        assert states == {"key low-limit": {}}
        states["key low-limit"]["sent"] = [1.5, 2.5]
    with leases.hold("key low-limit", "clock", wait_seconds=1) as states:
        assert states == {"key low-limit": {"sent": [1.5, 2.5]}, "clock": {}}


def test_a_held_lease_is_waited_for_at_most_the_wait_allowed(tmp_path: Path) -> None:
    leases = Leases(tmp_path)
    with leases.hold("clock", wait_seconds=1):
        started = time.monotonic()
        with (
            pytest.raises(SetupFailed, match="held 'clock'"),
            leases.hold("key x", "clock", wait_seconds=0.2),
        ):
            pass
        assert 0.2 <= time.monotonic() - started < 1.0
        with leases.hold("key x", wait_seconds=0.2) as states:  # another name is free
            assert states == {"key x": {}}


def _hold_then_mark(directory: str, marks: str) -> None:
    with Leases(Path(directory)).hold("clock", wait_seconds=5) as states:
        states["clock"]["holders"] = states["clock"].get("holders", 0) + 1
        with Path(marks).open("a", encoding="utf-8") as file:
            file.write("in\n")
        time.sleep(0.05)  # the holder's work, that the other process must not overlap
        with Path(marks).open("a", encoding="utf-8") as file:
            file.write("out\n")


def test_processes_take_turns(tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    context = multiprocessing.get_context("fork")
    processes = [
        context.Process(target=_hold_then_mark, args=(str(tmp_path), str(marks))) for _ in range(3)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=10)
    assert [p.exitcode for p in processes] == [0, 0, 0]
    assert marks.read_text(encoding="utf-8").split() == ["in", "out"] * 3
    with Leases(tmp_path).hold("clock", wait_seconds=1) as states:
        assert states["clock"]["holders"] == 3


def test_a_state_cut_short_starts_afresh(tmp_path: Path) -> None:
    (tmp_path / "clock.json").write_text('{"moved_seco', encoding="utf-8")
    with Leases(tmp_path).hold("clock", wait_seconds=1) as states:
        assert states == {"clock": {}}
