"""Attempts, retries, backoff and exhaustion of a delivery (spec §3 Delivery, §6 Behaviour).

Every chain is submitted when the module starts and runs side by side with the others;
each check judges one chain. Arrivals are counted raw (a hidden 4th attempt shows as a
4th arrival) and timed on entry to the receiver's handler; backoff is judged within the
profile's ``[timing].tolerance_seconds``.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any, Final

import pytest

from conformance.findings import fail
from conformance.observe.deliveries import (
    RECORD_SETTLE_SECONDS,
    Chain,
    Chains,
    submit_with_target,
    wait_for_record,
)
from conformance.observe.events import COMPLETED
from conformance.observe.receiver import Delivery, Receiver, Reply
from conformance.observe.timing import BACKOFF_SECONDS as BACKOFF
from conformance.run.fixtures.labs import Labs
from conformance.target.profile import Profile
from conformance.target.setup import SetupFailed

#: Spec §6 Behaviour: attempts (the backoff before the 2nd and 3rd: BACKOFF).
ATTEMPTS: Final = 3
#: After the 3rd failed attempt, how long a hidden 4th attempt is waited for: twice the
#: longest stated backoff, plus the tolerance (bounded; the chains run side by side).
QUIET_AFTER_LAST: Final = 2 * BACKOFF[-1] + 1.0

#: Spec §6: any 2xx is success. The non-2xx statuses that must not count as success.
SUCCESS_STATUSES: Final = (200, 201, 202, 204, 299)
FAILURE_STATUSES: Final = (400, 404, 410, 429, 500, 503)


def _closed_port_url(receiver: Receiver) -> str | None:
    """A URL on the receiver's host at a port nothing listens on (connection refused), or
    None when the IUT reaches the receiver through a public_url (another host)."""
    if receiver.config.public_url:
        return None
    family = socket.AF_INET6 if ":" in receiver.host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((receiver.host, 0))
        port = probe.getsockname()[1]
    # Closed again: connections to it are refused (another process taking the port in
    # between would answer, and the check would only see no failed attempt).
    host = f"[{receiver.host}]" if family == socket.AF_INET6 else receiver.host
    return f"http://{host}:{port}/refused"


@pytest.fixture(scope="module")
def lab(labs: Labs, receiver: Receiver) -> Chains:
    made = labs.chains("retries")
    refused = _closed_port_url(receiver)
    if refused is not None:
        try:
            made.memo["refused"] = (refused, submit_with_target(made.client, refused))
        except SetupFailed as error:
            made.memo["refused"] = error
    made.start("always-500", [Reply(500)])
    for status in SUCCESS_STATUSES:
        made.start(f"ok-{status}", [Reply(status)])
    for status in FAILURE_STATUSES:
        made.start(f"fail-{status}-then-200", [Reply(status), Reply(200)])
    return made


def _arrived(chain: Chain, count: int, what: str) -> list[Delivery]:
    """*count* arrivals (*what* they are), or a skip: the rule under test only applies once
    they came (the checks of the attempts themselves judge a chain that stops short)."""
    try:
        return chain.wait_for(count, what)
    except AssertionError as missing:
        pytest.skip(f"the rule applies after {count} attempt(s); {missing}")


def _bodies(chain: Chain, requirement_id: str) -> list[Any]:
    bodies = []
    for index, delivery in enumerate(chain.endpoint.deliveries):
        try:
            bodies.append(delivery.json())
        except ValueError:
            fail(f"attempt {index + 1} body is not JSON {chain.describe()}", rule=requirement_id)
    return bodies


@pytest.mark.requirement("DLV-RETRY-01")
def test_retry_after_500_makes_second_attempt(lab: Chains, profile: Profile) -> None:
    """An attempt answered 500 is retried: a second attempt arrives."""
    chain = lab["always-500"]
    _arrived(chain, 1, "a first attempt")
    chain.wait_for(2, "expected a 2nd attempt after a 500")


@pytest.mark.requirement("DLV-ATTEMPTS-01")
def test_always_failing_target_gets_exactly_three_attempts(lab: Chains, profile: Profile) -> None:
    """A target that always answers 500 receives exactly 3 arrivals, then none for a while."""
    chain = lab["always-500"]
    chain.wait_for(ATTEMPTS, "3 attempts")
    quiet = QUIET_AFTER_LAST + profile.timing.tolerance_seconds
    chain.assert_arrivals(ATTEMPTS, quiet, "3 attempts, no 4th")


@pytest.mark.requirement("DLV-EXHAUST-01")
def test_no_fourth_attempt_after_third_failed(lab: Chains, profile: Profile) -> None:
    """Once a third attempt has failed, no automatic attempt follows it."""
    chain = lab["always-500"]
    third = _arrived(chain, ATTEMPTS, "3 attempts")[ATTEMPTS - 1]
    # The quiet window counts from the third arrival, so the check above has spent it.
    quiet_until = third.arrived_at + QUIET_AFTER_LAST + profile.timing.tolerance_seconds
    remaining = max(0.001, quiet_until - time.monotonic())
    chain.assert_arrivals(ATTEMPTS, remaining, "no 4th attempt")


@pytest.mark.requirement("DLV-BACKOFF-01")
def test_second_attempt_follows_first_after_1_second(lab: Chains, profile: Profile) -> None:
    """The 2nd attempt arrives 1 s (within tolerance) after the 1st failed attempt."""
    lab["always-500"].judge_gap(1, "DLV-BACKOFF-01", profile)


@pytest.mark.requirement("DLV-BACKOFF-02")
def test_third_attempt_follows_second_after_2_seconds(lab: Chains, profile: Profile) -> None:
    """The 3rd attempt arrives 2 s (within tolerance) after the 2nd failed attempt."""
    lab["always-500"].judge_gap(2, "DLV-BACKOFF-02", profile)


@pytest.mark.requirement("DLV-EXHAUST-02")
def test_three_failed_attempts_end_exhausted(lab: Chains, profile: Profile) -> None:
    """After the third failed attempt the delivery record's outcome is exhausted."""
    chain = lab["always-500"]
    _arrived(chain, ATTEMPTS, "3 attempts")
    lab.assert_outcome(chain, "exhausted", "after 3 failed attempts")


@pytest.mark.requirement("DLV-ID-01")
def test_every_attempt_carries_same_delivery_id(lab: Chains, profile: Profile) -> None:
    """All attempts of one delivery carry one X-Service-Delivery and one body id (that
    the two agree is judged by the delivery header checks)."""
    chain = lab["always-500"]
    arrived = chain.wait_for(ATTEMPTS, "3 attempts")
    headers = [d.header("Delivery") for d in arrived]
    bodies = _bodies(chain, "DLV-ID-01")
    ids = [b.get("id") if isinstance(b, dict) else None for b in bodies]
    same = len(set(headers)) == 1 and len(set(ids)) == 1
    assert same and headers[0] is not None and ids[0] is not None, (
        f"DLV-ID-01: expected one delivery id on every attempt "
        f"({profile.wire.header('Delivery')} and body id), saw headers {headers}, "
        f"body ids {ids} {chain.describe()}"
    )


@pytest.mark.requirement("DLV-ID-03")
def test_every_attempt_carries_same_payload(lab: Chains, profile: Profile) -> None:
    """All attempts of one delivery carry JSON-equal bodies (an interpretation)."""
    chain = lab["always-500"]
    chain.wait_for(ATTEMPTS, "3 attempts")
    bodies = _bodies(chain, "DLV-ID-03")
    assert all(body == bodies[0] for body in bodies), (
        f"DLV-ID-03: expected every attempt's body JSON-equal to the first's, saw "
        f"{[json.dumps(b, sort_keys=True)[:120] for b in bodies]} {chain.describe()}"
    )


@pytest.mark.requirement("DLV-ID-04")
def test_every_attempt_carries_byte_identical_body(lab: Chains, profile: Profile) -> None:
    """All attempts of one delivery carry the same body bytes."""
    chain = lab["always-500"]
    arrived = chain.wait_for(ATTEMPTS, "3 attempts")
    raw = [d.raw_body for d in arrived]
    assert all(body == raw[0] for body in raw), (
        f"DLV-ID-04: expected byte-identical bodies on every attempt, saw lengths "
        f"{[len(b) for b in raw]} {chain.describe()}"
    )


@pytest.mark.parametrize("status", SUCCESS_STATUSES, ids=[f"reply-{s}" for s in SUCCESS_STATUSES])
@pytest.mark.requirement("DLV-SUCCESS-01", "DLV-OK-01")
def test_any_2xx_reply_ends_delivery_without_retry(
    lab: Chains, profile: Profile, status: int
) -> None:
    """A 2xx reply (200, 201, 202, 204, 299) is success: no further attempt arrives."""
    chain = lab[f"ok-{status}"]
    _arrived(chain, 1, f"a first attempt, replied {status}")
    quiet = BACKOFF[0] + 2 * profile.timing.tolerance_seconds + 1.0
    chain.assert_arrivals(1, quiet, f"a {status} reply is success: no retry")


@pytest.mark.parametrize("status", SUCCESS_STATUSES, ids=[f"reply-{s}" for s in SUCCESS_STATUSES])
@pytest.mark.requirement("DLV-OK-02")
def test_2xx_reply_records_outcome_delivered(lab: Chains, profile: Profile, status: int) -> None:
    """After a 2xx reply the delivery record's outcome is delivered."""
    chain = lab[f"ok-{status}"]
    _arrived(chain, 1, f"a first attempt, replied {status}")
    lab.assert_outcome(chain, "delivered", f"after a {status} reply")


@pytest.mark.parametrize("status", FAILURE_STATUSES, ids=[f"reply-{s}" for s in FAILURE_STATUSES])
@pytest.mark.requirement("DLV-SUCCESS-02")
def test_non_2xx_reply_is_retried(lab: Chains, profile: Profile, status: int) -> None:
    """A non-2xx reply (400, 404, 410, 429, 500, 503) is not success: it is retried."""
    chain = lab[f"fail-{status}-then-200"]
    chain.wait_for(2, f"a retry after a {status} reply")


@pytest.mark.requirement("DLV-RETRY-03")
def test_refused_connection_is_failed_attempt_and_retried(lab: Chains, profile: Profile) -> None:
    """An attempt whose connection is refused counts as failed and is retried: the record
    ends with 3 attempts."""
    made = lab.memo.get("refused")
    if made is None:
        pytest.skip("needs a receiver the IUT reaches directly (no [receiver] public_url)")
    if isinstance(made, BaseException):
        raise made
    url, generation_id = made
    deadline = (
        profile.sandbox.max_generation_seconds
        + sum(BACKOFF)
        + RECORD_SETTLE_SECONDS
        + profile.timing.tolerance_seconds
    )
    record = wait_for_record(
        lab.client,
        generation_id,
        url,
        lambda r: r.get("outcome") in ("exhausted", "delivered", "failed"),
        deadline,
    )
    attempts = record.get("attempts") if record else None
    count = len(attempts) if isinstance(attempts, list) else None
    assert count == ATTEMPTS, (
        f"DLV-RETRY-03: a target refusing connections; expected {ATTEMPTS} failed attempts "
        f"recorded, saw {count} (record {json.dumps(record)[:300]})"
    )


@pytest.mark.requirement("DLV-ID-02")
def test_distinct_deliveries_carry_distinct_ids(lab: Chains) -> None:
    """Deliveries of different generations (one per target) carry different delivery ids."""
    names = ["always-500", *(f"ok-{s}" for s in SUCCESS_STATUSES)]
    ids: dict[str, str | None] = {}
    for name in names:
        arrived = lab[name].wait_for(1, f"a first attempt of chain {name}")
        ids[name] = arrived[0].header("Delivery")
    values = list(ids.values())
    assert None not in values and len(set(values)) == len(values), (
        f"DLV-ID-02: expected a distinct {lab.profile.wire.header('Delivery')} per delivery, "
        f"saw {ids}"
    )


@pytest.mark.requirement("DLV-ONCE-01")
def test_completed_event_reaches_accepting_target(lab: Chains) -> None:
    """A completed generation's event reaches a target that answers 2xx."""
    chain = lab["ok-200"]
    arrived = chain.wait_for(1, "the completed event")
    events = [d.header("Event") for d in arrived]
    try:
        bodies = [d.json().get("event") for d in arrived]
    except (ValueError, AttributeError):
        bodies = []
    assert COMPLETED in events or COMPLETED in bodies, (
        f"DLV-ONCE-01: expected {COMPLETED} delivered, saw events {events} {chain.describe()}"
    )
