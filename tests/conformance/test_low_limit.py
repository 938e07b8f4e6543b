"""How a chain (``conformance/checks/low_limit.py``) keeps its key's rolling minute: a wait
for room is counted from each request's answer, the latest moment the target can have
stamped it."""

from __future__ import annotations

import pytest
from profiles import profile_text

from conformance.checks import low_limit
from conformance.checks.low_limit import Chain
from conformance.evidence import Exchange
from conformance.secrets import Redactor
from conformance.target.client import Recorder
from conformance.target.profile import Profile

PROFILE = profile_text("gk_live_lowlimitcanary0001", "sess_lowlimitcanary0001")
NOW = 1_800_000_000.0


class _Clock:
    """The module's ``time``: a fixed now, and sleeps noted instead of slept."""

    def __init__(self) -> None:
        self.slept: list[float] = []

    def time(self) -> float:
        return NOW

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)


def _exchange(started_ago: float, elapsed_s: float) -> Exchange:
    return Exchange(
        method="POST",
        url="http://127.0.0.1:9/v1/images/generate",
        request_headers=(),
        request_body="",
        status=202,
        response_headers=(),
        response_body="",
        elapsed_ms=elapsed_s * 1000,
        started_at=NOW - started_ago,
    )


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(low_limit, "time", fake)
    return fake


def _chain() -> Chain:
    chain = Chain("low-limit", [])
    chain.tier = {"requests_per_minute": 2}
    return chain


def test_a_request_answered_late_stays_in_the_window_until_a_minute_after_its_answer(
    clock: _Clock, profile: Profile
) -> None:
    """Sent 61 s ago but answered 3 s later (a loaded target stamps it late): the next
    request waits until a minute (and the tolerance) after that answer."""
    recorder = Recorder(Redactor({}))
    recorder.exchanges += [_exchange(61.0, 3.0), _exchange(10.0, 0.1)]
    _chain().make_room(recorder, 1, profile)
    assert clock.slept == [pytest.approx(60.0 + profile.timing.tolerance_seconds - 58.0)]


def test_track_keeps_answer_times_for_the_next_holder(clock: _Clock, profile: Profile) -> None:
    """What a chain hands on (``recent``) are the answers' times, so the next holder of
    the key waits from them too; a request a minute and more out is dropped."""
    recorder = Recorder(Redactor({}))
    recorder.exchanges += [_exchange(61.0, 3.0), _exchange(200.0, 0.1)]
    chain = _chain()
    chain.track(recorder)
    assert chain.recent() == [pytest.approx(NOW - 58.0, abs=1e-6)]
    chain.make_room(Recorder(Redactor({})), 1, profile)
    assert clock.slept == [], "one answered request leaves room for one more of two"
