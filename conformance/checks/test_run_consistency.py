"""The two channels of every result of the run agree (spec §1: a result is read with GET
/v1/generations/{id}, or pushed by a webhook; GEN-CONSIST-01).

Each final event any check's generation sent to any worker's receiver is compared with
one read of that generation, on status, credits and which of output_url and error_message
are set, by the one check here, which runs after every other check of the run
(``conformance.run.plugin.channels`` says how, with pytest-xdist too: this module is held
back until every other has ended, so it holds nothing else). The read body is not shown,
so a disagreement only warns, listing each one found; ``test_generation_state.py``
compares its own generations the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import httpx
import pytest

from conformance.findings import Bands, measure, warn
from conformance.judge.asserts import record_in_read
from conformance.observe.events import Disagreement, FinalEvent, disagreements, final_state
from conformance.target.client import ApiClient

#: The most generations the run-wide check reads (one GET each, its client's request
#: budget); a full run has a few hundred, and any beyond are counted as not checked.
MAX_COMPARED: Final = 1000


def _by_generation(events: list[FinalEvent]) -> dict[str, list[FinalEvent]]:
    grouped: dict[str, list[FinalEvent]] = {}
    for event in events:
        grouped.setdefault(event.generation_id, []).append(event)
    return grouped


@pytest.mark.requirement("GEN-CONSIST-01")
def test_every_final_event_agrees_with_the_read(
    make_api: Callable[..., ApiClient], final_events: Callable[[], list[FinalEvent]]
) -> None:
    """Run-wide: every generation whose final event reached the suite's receiver, from
    any check on any worker (missed and exhausted deliveries too: the event was received,
    though answered with an error), reads with GET /v1/generations/{id} as its event
    says; every disagreement is listed by generation and field.

    Runs after every other check (this module is the run's last:
    ``conformance.run.plugin.channels``). One read per generation, at most
    :data:`MAX_COMPARED`, with the primary key and no patience: a 429 ends the reading
    and what is left is not checked (never a disagreement), as is a generation the
    primary key cannot read (another account's) or a read the transport lost. The
    numbers of generations compared and not checked are recorded as measurements.
    """
    api = make_api(budget=MAX_COMPARED)
    grouped = _by_generation(final_events())
    found: list[Disagreement] = []
    compared = 0
    unchecked: list[str] = []
    for index, (generation_id, sent) in enumerate(grouped.items()):
        left = len(grouped) - index
        if index >= MAX_COMPARED:
            unchecked.append(f"{left} past the cap of {MAX_COMPARED} reads")
            break
        try:
            response = api.request("GET", f"/v1/generations/{generation_id}", patient=False)
        except httpx.HTTPError as error:
            unchecked.append(f"{left} from a lost read on ({type(error).__name__})")
            break
        if response.status_code == 429:
            retry_after = response.headers.get("Retry-After")
            unchecked.append(f"{left} from a 429 on (Retry-After {retry_after!r})")
            break
        if not 200 <= response.status_code < 300:
            unchecked.append(f"{generation_id} (read {response.status_code})")
            continue
        compared += 1
        read = record_in_read(response, generation_id)
        record = None if read is None else final_state(read)
        for event in sent:
            found += disagreements(generation_id, event.state, record)
    not_checked = ", ".join(unchecked) or "none"
    if not compared:
        pytest.skip(
            f"no generation could be compared: {len(grouped)} with a final event, "
            f"not checked: {not_checked}"
        )
    counted = Bands(passing=(0, MAX_COMPARED), warning=(0, MAX_COMPARED))
    measure("GEN-CONSIST-01", "generations compared", compared, counted, unit="generations")
    measure(
        "GEN-CONSIST-01",
        "generations not checked",
        len(grouped) - compared,
        Bands(passing=(0, len(grouped)), warning=(0, len(grouped))),
        unit="generations",
    )
    if found:
        shown = "; ".join(disagreement.describe() for disagreement in found)
        warn(
            f"the webhook and GET /v1/generations/{{id}} disagree on {len(found)} field(s) "
            f"of {compared} generation(s) compared: {shown} (not checked: {not_checked})"
        )
