"""Delivery records and GET /v1/generations/{id}/deliveries (spec §2 Delivery record, §4).

The module's chains run side by side: an inline target that answers 201 (delivered), an
inline target that answers 500, 502, 503 (exhausted: three attempts, each with its own
status), a callback_url target and a registered webhook. Each record is read once it has
settled (outcome no longer pending_retry) and judged against what the receiver saw and
answered. A record is matched to its chain by target_url; each generation has one target,
so a generation whose one record shows another target_url still yields that record (the
target_url check judges the difference; the other field checks are not held up by it).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any, Final, NamedTuple

import pytest

from conformance.findings import fail
from conformance.judge.asserts import assert_delivery_list, assert_status, describe
from conformance.observe.deliveries import (
    OUTCOMES,
    Chain,
    Chains,
    submit_with_target,
    wait_for_record,
)
from conformance.observe.events import COMPLETED
from conformance.observe.receiver import Endpoint, Reply
from conformance.run.fixtures.labs import Labs
from conformance.target.client import ApiClient
from conformance.target.profile import KeyProfile, Profile
from conformance.target.setup import SetupFailed

#: The exhausted chain's replies, one per attempt (spec §3: 3 attempts).
FAILING: Final = (500, 502, 503)
#: The delivered chain's reply: a 2xx other than 200, so status_code is seen to be copied.
DELIVERED: Final = 201

#: The chains by target kind (spec §4 rule 1), for the "list includes" checks.
BY_KIND = [
    pytest.param(
        "delivered", "REC-GEN-04", id="webhook-url", marks=pytest.mark.requirement("REC-GEN-04")
    ),
    pytest.param(
        "callback", "REC-GEN-05", id="callback-url", marks=pytest.mark.requirement("REC-GEN-05")
    ),
    pytest.param(
        "registered",
        "REC-GEN-06",
        id="webhook-id",
        marks=[pytest.mark.console, pytest.mark.requirement("REC-GEN-06")],
    ),
]
#: Settled records judged field by field.
SETTLED = [
    pytest.param("delivered", id="delivered"),
    pytest.param("exhausted", id="exhausted"),
]

# ISO 8601 date-time with a UTC offset or Z (REC-ATTEMPT-03, the form of created_at).
_ISO_WITH_OFFSET = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})", re.IGNORECASE
)


@pytest.fixture(scope="module")
def lab(labs: Labs, profile: Profile) -> Chains:
    made = labs.chains("records")
    made.start("delivered", [Reply(DELIVERED)])
    made.start("exhausted", [Reply(status) for status in FAILING])
    made.start("callback", [Reply(200)], kind="callback_url")
    if profile.sessions:
        made.start("registered", [Reply(200)], kind="webhook.id")
    return made


def _arrivals(name: str) -> int:
    return len(FAILING) if name == "exhausted" else 1


def _settled(lab: Chains, name: str) -> tuple[Chain, dict[str, Any]]:
    """The chain and its record once settled, read once per module (the checks share
    it). A chain whose attempts did not all arrive, or whose record never shows, is a
    set-up error for the field checks: the DLV and REC-GEN checks judge those."""
    chain = lab[name]
    if name not in lab.memo:
        try:
            lab.memo[name] = _settle(lab, chain)
        except SetupFailed as error:
            lab.memo[name] = error
    found = lab.memo[name]
    if isinstance(found, SetupFailed):
        raise found
    return chain, found


class Settled(NamedTuple):
    """A settled chain and its delivery record."""

    chain: Chain
    record: dict[str, Any]


@pytest.fixture(params=SETTLED)
def settled(request: pytest.FixtureRequest, lab: Chains) -> Settled:
    """Each settled chain in turn, with its record: the field checks judge every final
    outcome (delivered, exhausted)."""
    return Settled(*_settled(lab, request.param))


def _settle(lab: Chains, chain: Chain) -> dict[str, Any]:
    count = _arrivals(chain.name)
    try:
        chain.wait_for(count, f"set-up: {count} attempts of chain {chain.name}")
    except AssertionError as missing:
        raise SetupFailed(str(missing)) from None
    record = lab.record(
        chain,
        lambda r: (
            r.get("outcome") in ("delivered", "exhausted")
            and isinstance(r.get("attempts"), list)
            and len(r["attempts"]) >= count
        ),
    )
    if record is None:
        raise SetupFailed(
            f"set-up: no record of the delivery to {chain.url} among the generation's "
            f"deliveries (REC-GEN-02 judges the list) {chain.describe()}"
        )
    return record


def _attempts(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The record's attempt entries; anything but an array of objects fails the check's
    cited rule (each rule about the entries states them)."""
    attempts = record.get("attempts")
    if not isinstance(attempts, list) or not all(isinstance(a, dict) for a in attempts):
        fail(f"expected attempts to be an array of objects, saw {attempts!r}")
    return attempts


def _shown(record: dict[str, Any]) -> str:
    return json.dumps(record)[:400]


def _assert_field(record: dict[str, Any], field: str, expected: object, why: str) -> None:
    """The record's *field* equals *expected* (*why*: where that value comes from); else
    the check fails."""
    seen = record.get(field)
    if seen != expected:
        fail(f"expected {field} {expected!r} ({why}), saw {seen!r}")


@pytest.mark.requirement("REC-GEN-01")
def test_generation_deliveries_with_api_key_served(api: ApiClient, lab: Chains) -> None:
    """GET /v1/generations/{id}/deliveries with the key is served with a 2xx."""
    chain = lab["delivered"]
    chain.wait_for(1, "set-up: a delivery of the generation")
    response = api.request("GET", f"/v1/generations/{chain.generation()}/deliveries")
    assert 200 <= response.status_code < 300, (
        f"REC-GEN-01: expected a 2xx for the generation's deliveries with its API key, "
        f"saw {describe(response)}"
    )


@pytest.mark.requirement("REC-GEN-07", "REC-LIST-01")
def test_generation_deliveries_answer_is_a_delivery_list(api: ApiClient, lab: Chains) -> None:
    """The generation's delivery list is an object with deliveries (an array) and total (an
    integer)."""
    chain = lab["delivered"]
    chain.wait_for(1, "set-up: a delivery of the generation")
    response = api.request("GET", f"/v1/generations/{chain.generation()}/deliveries")
    assert_delivery_list(response)


@pytest.mark.requirement("REC-LIST-02")
def test_generation_deliveries_total_counts_the_records(api: ApiClient, lab: Chains) -> None:
    """Without a limit, total is the number of records listed."""
    chain, _ = _settled(lab, "exhausted")
    response = api.request("GET", f"/v1/generations/{chain.generation()}/deliveries")
    records, total = assert_delivery_list(response)
    assert total == len(records), (
        f"REC-LIST-02: expected total to equal the {len(records)} records listed, saw {total}"
    )


@pytest.mark.requirement("REC-GEN-02")
def test_generation_deliveries_one_record_per_event(api: ApiClient, lab: Chains) -> None:
    """A completed generation with one target lists exactly one generation.completed record."""
    chain, _ = _settled(lab, "delivered")
    response = api.request("GET", f"/v1/generations/{chain.generation()}/deliveries")
    records, _ = assert_delivery_list(response)
    completed = [r for r in records if r.get("event_type") == COMPLETED]
    assert len(completed) == 1, (
        f"REC-GEN-02: expected one {COMPLETED} record for the generation's one target, saw "
        f"{len(completed)}: {[_shown(r) for r in records]} {chain.describe()}"
    )


@pytest.mark.parametrize(("name", "requirement_id"), BY_KIND)
def test_generation_deliveries_include_every_target_kind(
    api: ApiClient, lab: Chains, name: str, requirement_id: str
) -> None:
    """The generation's list includes its delivery whatever the target kind (webhook.url,
    callback_url, webhook.id)."""
    chain = lab[name]
    chain.wait_for(1, f"set-up: a delivery to the {chain.kind} target")
    lab.record(chain)
    response = api.request("GET", f"/v1/generations/{chain.generation()}/deliveries")
    records, _ = assert_delivery_list(response, requirement_id)
    if not any(r.get("event_type") == COMPLETED for r in records):
        fail(
            f"expected the {chain.kind} delivery of {COMPLETED} in the generation's list, "
            f"saw {[_shown(r) for r in records]} {chain.describe()}",
            rule=requirement_id,
        )


@pytest.mark.requirement("REC-FIELD-01")
def test_record_event_type_is_delivered_event(settled: Settled) -> None:
    """A record's event_type is the name of the event it delivered."""
    chain, record = settled
    try:
        event = chain.endpoint.deliveries[0].json().get("event")
    except (ValueError, AttributeError):
        raise SetupFailed(
            f"set-up: the delivered body is no JSON object {chain.describe()}"
        ) from None
    _assert_field(record, "event_type", event, "the body's event")


@pytest.mark.requirement("REC-FIELD-05")
def test_record_target_url_is_the_url_given(settled: Settled) -> None:
    """A record's target_url is the target URL the submit gave."""
    chain, record = settled
    _assert_field(record, "target_url", chain.url, "as submitted")


@pytest.mark.requirement("REC-FIELD-02")
def test_record_outcome_is_a_listed_value(settled: Settled) -> None:
    """A record's outcome is one of delivered, failed, pending_retry, exhausted."""
    record = settled.record
    assert record.get("outcome") in OUTCOMES, (
        f"REC-FIELD-02: expected outcome in {list(OUTCOMES)}, saw {record.get('outcome')!r}"
    )


@pytest.mark.requirement("REC-FIELD-03")
def test_delivered_record_status_code_is_targets_2xx(lab: Chains) -> None:
    """A delivered record's status_code is the 2xx the target returned (here 201)."""
    chain, record = _settled(lab, "delivered")
    seen = record.get("status_code")
    assert type(seen) is int and seen == DELIVERED, (
        f"REC-FIELD-03: the target answered {DELIVERED}; expected status_code {DELIVERED}, "
        f"saw {seen!r} ({_shown(record)}) {chain.describe()}"
    )


@pytest.mark.requirement("REC-FIELD-04")
def test_exhausted_record_status_code_is_last_attempts(lab: Chains) -> None:
    """An exhausted record's status_code is the status of the last attempt (503)."""
    chain, record = _settled(lab, "exhausted")
    why = f"the last of the target's answers {list(FAILING)}; {chain.describe()}"
    _assert_field(record, "status_code", FAILING[-1], why)


@pytest.mark.requirement("REC-FIELD-06")
def test_record_has_one_attempt_entry_per_arrival(settled: Settled) -> None:
    """The record holds exactly one attempt entry per attempt the target received."""
    chain, record = settled
    attempts = _attempts(record)
    arrived = len(chain.endpoint.deliveries)
    assert len(attempts) == arrived, (
        f"REC-FIELD-06: the target received {arrived} attempts; expected as many entries, "
        f"saw {len(attempts)} ({_shown(record)}) {chain.describe()}"
    )


@pytest.mark.requirement("REC-GEN-03")
def test_generation_list_record_holds_every_attempt_made(settled: Settled) -> None:
    """The record in the generation's list holds an entry for every attempt the target
    received ("every attempt", §4); that there is exactly one per attempt is REC-FIELD-06."""
    chain, record = settled
    attempts = _attempts(record)
    arrived = len(chain.endpoint.deliveries)
    assert len(attempts) >= arrived, (
        f"REC-GEN-03: the target received {arrived} attempts; expected an entry for each, "
        f"saw {len(attempts)} ({_shown(record)}) {chain.describe()}"
    )


def _numbered_1_to_n(entries: list[dict[str, Any]]) -> bool:
    """Whether the entries' n are the integers 1..N, one each, in any order."""
    numbers = [e.get("n") for e in entries]
    integers = [n for n in numbers if type(n) is int]
    return len(integers) == len(numbers) and sorted(integers) == list(range(1, len(numbers) + 1))


def _in_attempt_order(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries ordered by n when their numbers are 1..N (the spec gives the numbers,
    not the order of the array); as listed otherwise."""
    return sorted(entries, key=lambda e: int(e["n"])) if _numbered_1_to_n(entries) else entries


def _attempt_values(record: dict[str, Any], key: str, *, ordered: bool = False) -> list[Any]:
    """Each attempt entry's *key* (None where it is missing), in attempt order when
    *ordered*, as listed otherwise."""
    entries = _attempts(record)
    return [a.get(key) for a in (_in_attempt_order(entries) if ordered else entries)]


@pytest.mark.requirement("REC-ATTEMPT-01")
def test_attempt_entries_numbered_from_1(lab: Chains) -> None:
    """The attempt entries carry the integers n = 1, 2, ... N, one each (1-based)."""
    _, record = _settled(lab, "exhausted")
    entries = _attempts(record)
    assert _numbered_1_to_n(entries), (
        f"REC-ATTEMPT-01: expected the integers n 1..{len(entries)}, one per entry, saw "
        f"{[a.get('n') for a in entries]}"
    )


@pytest.mark.requirement("REC-ATTEMPT-09")
def test_attempt_entries_listed_oldest_first(lab: Chains) -> None:
    """The attempt entries are listed in the order of the attempts: n = 1, 2, 3."""
    _, record = _settled(lab, "exhausted")
    numbers = _attempt_values(record, "n")
    expected = list(range(1, len(FAILING) + 1))
    assert numbers == expected, f"REC-ATTEMPT-09: expected n {expected} in order, saw {numbers}"


@pytest.mark.requirement("REC-ATTEMPT-02")
def test_attempt_entries_have_time(settled: Settled) -> None:
    """Every attempt entry has at, the time it was made."""
    record = settled.record
    times = _attempt_values(record, "at")
    assert times and all(isinstance(t, (str, int, float)) and t != "" for t in times), (
        f"REC-ATTEMPT-02: expected a time in every entry's at, saw {times}"
    )


@pytest.mark.requirement("REC-ATTEMPT-03")
def test_attempt_times_are_iso_8601_with_offset_in_order(lab: Chains) -> None:
    """Attempt times are ISO 8601 timestamps with offset, non-decreasing."""
    _, record = _settled(lab, "exhausted")
    times = _attempt_values(record, "at", ordered=True)
    assert all(isinstance(t, str) and _ISO_WITH_OFFSET.fullmatch(t) for t in times), (
        f"REC-ATTEMPT-03: expected ISO 8601 timestamps with offset, saw {times}"
    )
    parsed = [datetime.fromisoformat(str(t).replace("Z", "+00:00")) for t in times]
    assert parsed == sorted(parsed), f"REC-ATTEMPT-03: expected times in order, saw {times}"


@pytest.mark.requirement("REC-ATTEMPT-04")
def test_attempt_status_is_what_target_returned(settled: Settled) -> None:
    """Each attempt entry's status is the status the receiver answered to that attempt."""
    chain, record = settled
    statuses = _attempt_values(record, "status", ordered=True)
    replied = [d.replied.status for d in chain.endpoint.deliveries]
    assert statuses == replied and all(type(s) is int for s in statuses), (
        f"REC-ATTEMPT-04: the target answered {replied}; expected those statuses, saw {statuses}"
    )


@pytest.mark.requirement("REC-ATTEMPT-05")
def test_attempt_duration_is_integer_ms(settled: Settled) -> None:
    """Each attempt entry's ms is a non-negative integer."""
    record = settled.record
    durations = _attempt_values(record, "ms")
    assert all(type(ms) is int and ms >= 0 for ms in durations), (
        f"REC-ATTEMPT-05: expected integer milliseconds, saw {durations}"
    )


@pytest.mark.requirement("REC-ATTEMPT-06")
def test_attempt_error_is_string_or_null(settled: Settled) -> None:
    """Each attempt entry has error, a string or null."""
    record = settled.record
    entries = _attempts(record)
    assert all(
        "error" in a and (a["error"] is None or isinstance(a["error"], str)) for a in entries
    ), (
        f"REC-ATTEMPT-06: expected error (string or null) in every entry, saw "
        f"{[a.get('error', '<missing>') for a in entries]}"
    )


@pytest.mark.requirement("REC-ATTEMPT-07")
def test_attempt_error_null_on_2xx_and_text_on_failure(settled: Settled) -> None:
    """error is null for a 2xx attempt and a non-empty string for a failed one."""
    chain, record = settled
    entries = _in_attempt_order(_attempts(record))
    replied = [d.replied.status for d in chain.endpoint.deliveries]
    for entry, status in zip(entries, replied, strict=False):
        error = entry.get("error")
        if 200 <= status < 300:
            assert error is None, f"REC-ATTEMPT-07: a {status} attempt has error {error!r}"
        else:
            assert isinstance(error, str) and error.strip(), (
                f"REC-ATTEMPT-07: a failed attempt (answered {status}) has error {error!r}"
            )


@pytest.mark.requirement("REC-OUTCOME-01")
def test_record_pending_retry_while_waiting_for_retry(
    api: ApiClient, profile: Profile, endpoint: Endpoint
) -> None:
    """While a failed attempt waits for its retry, the record's outcome is pending_retry."""
    endpoint.respond_with_statuses([500, 500, 200])
    generation_id = submit_with_target(api, endpoint.url)
    endpoint.wait_for(1, profile.sandbox.max_generation_seconds + 10 + 1)
    # The IUT records the reply after the receiver answered: read until the record shows
    # the 1st (or 2nd) failed attempt, while the 3rd has not arrived (1 s, then 2 s wait).
    deadline_seconds = 1.0 + 2.0 + profile.timing.tolerance_seconds
    record = wait_for_record(
        api,
        generation_id,
        endpoint.url,
        lambda r: isinstance(r.get("attempts"), list) and 1 <= len(r["attempts"]) < 3,
        deadline_seconds,
    )
    waiting = record is not None and len(endpoint.deliveries) < 3
    if not waiting:
        pytest.skip("set-up: the record showed no failed attempt before the last one came")
    assert record is not None and record.get("outcome") == "pending_retry", (
        f"REC-OUTCOME-01: expected outcome 'pending_retry' while a retry is due, saw "
        f"{None if record is None else _shown(record)}"
    )


@pytest.mark.requirement("REC-GEN-08")
def test_generation_deliveries_of_other_account_answered_404(
    api: ApiClient, lab: Chains, foreign: KeyProfile
) -> None:
    """The delivery list of another account's generation is answered 404."""
    chain, _ = _settled(lab, "delivered")
    response = api.request(
        "GET", f"/v1/generations/{chain.generation()}/deliveries", role=foreign.role
    )
    assert_status(response, 404)
