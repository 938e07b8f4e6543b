"""A run's chains, longest chain, ratio and critical path from a hand-written results.json
(:mod:`conformance.run.timings`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conformance.run.timings import TimingsError, chain_name, load_timings, run_timings, table

#: 2026-01-01T00:00:00Z: the run's start; checks are placed in seconds after it.
T0 = 1767225600.0
RATES = "conformance/checks/test_rate_limits.py"
DELIVERIES = "conformance/checks/test_deliveries.py"
AUTH = "conformance/checks/test_auth.py"


def _check(nodeid: str, start: float, stop: float, worker: str) -> dict[str, Any]:
    return {
        "nodeid": nodeid,
        "outcome": "passed",
        "duration": stop - start,
        "started_at": T0 + start,
        "stopped_at": T0 + stop,
        "worker": worker,
    }


def _document(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "started_at": "2026-01-01T00:00:00+00:00",
        "duration_seconds": 100.0,
        "checks": [
            # Two chains in classes of one module, each on its own worker.
            _check(f"{RATES}::TestPerMinute::test_window", 2.0, 40.0, "gw0"),
            _check(f"{RATES}::TestPerMinute::test_reset[a::b]", 40.0, 80.0, "gw0"),
            _check(f"{RATES}::TestDaily::test_day", 1.0, 30.0, "gw1"),
            # A module chain with a wait between its checks, and one that ends last though
            # it is short.
            _check(f"{DELIVERIES}::test_retry", 30.0, 70.0, "gw1"),
            _check(f"{DELIVERIES}::test_backoff[x]", 72.0, 75.0, "gw1"),
            _check(f"{AUTH}::test_key", 85.0, 95.0, "gw0"),
            # Its process died: no times.
            {"nodeid": f"{AUTH}::test_died", "outcome": "error", "duration": 0.0},
        ],
    }
    document.update(changes)
    return document


def test_a_chain_is_the_module_or_the_class() -> None:
    assert chain_name(f"{RATES}::TestPerMinute::test_window") == f"{RATES}::TestPerMinute"
    assert chain_name(f"{AUTH}::test_key[p::q]") == AUTH
    assert chain_name(f"{RATES}::TestDaily::test_day[one::two]") == f"{RATES}::TestDaily"


def test_chains_longest_ratio_and_critical_path() -> None:
    timings = run_timings(_document())
    assert [(c.name, c.span, c.busy, c.checks, c.workers) for c in timings.chains] == [
        (f"{RATES}::TestPerMinute", 78.0, 78.0, 2, ("gw0",)),
        (DELIVERIES, 45.0, 43.0, 2, ("gw1",)),
        (f"{RATES}::TestDaily", 29.0, 29.0, 1, ("gw1",)),
        (AUTH, 10.0, 10.0, 1, ("gw0",)),
    ]
    assert timings.longest.name == f"{RATES}::TestPerMinute"
    assert timings.ratio == pytest.approx(100.0 / 78.0)
    assert [c.name for c in timings.critical_path()] == [
        AUTH,
        f"{RATES}::TestPerMinute",
        DELIVERIES,
    ]
    assert timings.untimed == 1
    assert timings.busy == {"gw0": 88.0, "gw1": 72.0}


def test_the_table_shows_every_figure(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text(json.dumps(_document()), encoding="utf-8")
    lines = table(load_timings(tmp_path))
    text = "\n".join(lines)
    assert "wall time of the run: 100.0 s" in text
    assert f"longest chain: 78.0 s  {RATES}::TestPerMinute" in text
    assert "ratio wall / longest chain: 1.282" in text
    assert "chains: 4 (1 checks without times)" in text
    row = "    78.0 s    78.0 s      +2.0 →    +80.0  gw0          2  "
    assert f"{row}{RATES}::TestPerMinute" in lines
    critical = lines.index("critical path (the 3 chains that ended last, last first):")
    row = "    10.0 s    10.0 s     +85.0 →    +95.0  gw0          1  "
    assert lines[critical + 1] == f"{row}{AUTH}"
    assert lines[-1] == "busy per worker (in checks / wall): gw0 88.0 s (88%), gw1 72.0 s (72%)"
    # The file itself, or its folder.
    assert table(load_timings(tmp_path / "results.json")) == lines
    shortened = table(load_timings(tmp_path), chains=1)
    assert len(shortened) == len(lines) - 2
    assert "  (3 shorter chains not shown)" in shortened


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"checks": [{"nodeid": "a.py::t", "duration": 1.0}]}, "records no check's start"),
        ({"duration_seconds": None}, "no duration_seconds"),
        ({"started_at": "yesterday"}, "no started_at"),
        ({"checks": None}, "no checks list"),
    ],
)
def test_a_results_json_without_timings_is_said(changes: dict[str, Any], says: str) -> None:
    with pytest.raises(TimingsError, match=says):
        run_timings(_document(**changes))


def test_a_missing_or_broken_file_is_said(tmp_path: Path) -> None:
    with pytest.raises(TimingsError, match="cannot read"):
        load_timings(tmp_path)
    (tmp_path / "results.json").write_text("{", encoding="utf-8")
    with pytest.raises(TimingsError, match="is not JSON"):
        load_timings(tmp_path)
