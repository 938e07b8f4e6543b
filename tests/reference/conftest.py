"""Fixtures that run the reference implementation as a real process on loopback.

Fixtures for every test under ``tests/reference/`` (webhooks tests included):

``reference_server``
    session-scoped: one service started with
    ``python -m reference serve --port 0 --db <tmp> --provision <tmp>/profile.toml
    --allow-cidr 127.0.0.1/32``; gives a :class:`RunningReference` (``base_url``,
    ``profile`` as a dict, ``key(role)``, ``session(name)``, ``client()``).
``reference_factory``
    function-scoped: ``reference_factory(faults=(...), args=(...), directory=None)``
    starts a further service (own store unless ``directory`` reuses one); every service
    it started is stopped at teardown. Use it for faults, restarts and tests that spend
    limits (so they never disturb the shared server).
``receiver``
    a scripted loopback HTTP target (``scripted_target.Receiver``) on 127.0.0.1, a free
    port; stopped at teardown.

Helpers (``start_reference``, ``RunningReference``, ``wait_for_status``, ``bearer``)
live in ``tests/reference/running_reference.py``: ``from running_reference import ...``.

Run through ``bash scripts/test tests/reference`` (a loopback-only network namespace).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from running_reference import ReferenceFactory, RunningReference, start_reference
from scripted_target import Receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A started scripted loopback target (see module docstring); stopped at teardown."""
    target = Receiver().start()
    try:
        yield target
    finally:
        target.stop()


@pytest.fixture(scope="session")
def reference_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningReference]:
    """The shared reference service of this test session (see module docstring)."""
    with start_reference(tmp_path_factory.mktemp("reference")) as running:
        yield running


@pytest.fixture
def reference_factory(tmp_path: Path) -> Iterator[ReferenceFactory]:
    """Start further services; ``reference_factory(faults=..., args=..., directory=...)``."""
    started: list[RunningReference] = []
    counter = iter(range(1000))

    def factory(
        *,
        faults: Sequence[str] = (),
        args: Sequence[str] = (),
        directory: Path | None = None,
        provision: bool = True,
    ) -> RunningReference:
        where = directory or tmp_path / f"reference-{next(counter)}"
        running = start_reference(where, faults=faults, args=args, provision=provision)
        started.append(running)
        return running

    yield factory
    for running in started:
        running.stop()
