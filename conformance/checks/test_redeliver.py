"""POST /v1/webhooks/deliveries/{id}/redeliver (spec §3 Delivery, §4).

Redeliver is allowed from exhausted or failed and "reuses the original payload and event
id"; its answer has outcome and status_code. The delivery id in the path is the one the
delivery carried (spec §2: the envelope id is the "Delivery/event id"; §6: the
X-<brand>-Delivery header). Each chain is exhausted (three 500s) and then redelivered
once by a module fixture, so several checks judge one redelivery: the target answers it
200 (``ok``) or 500 (``refused``: the record ends failed, which is redelivered again, to
200). The rebinding cases (REDLV-REBIND-*) are in ``test_url_rebind.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

import httpx
import pytest

from conformance.findings import fail
from conformance.judge.asserts import assert_not_refused_for_auth, assert_status, describe
from conformance.observe.deliveries import OUTCOMES, Chain, Chains, settle_exhausted
from conformance.observe.receiver import Delivery, Reply
from conformance.observe.signatures import (
    SignatureFormatError,
    parse_signature_header,
    resigning,
)
from conformance.run.fixtures.labs import Labs
from conformance.target.client import ApiClient
from conformance.target.profile import KeyProfile, Profile
from conformance.target.setup import SetupFailed

#: Spec §3: three attempts, then exhausted.
ATTEMPTS: Final = 3
#: How long a redelivery may take to arrive (one attempt within the 10 s timeout, spec §6).
ARRIVAL_SECONDS: Final = 10.0 + 2.0
#: After a failed redelivery, how long an automatic retry of it is waited for: past the
#: stated backoffs (1 s, 2 s).
QUIET_SECONDS: Final = 4.0


def _path(delivery_id: str) -> str:
    return f"/v1/webhooks/deliveries/{delivery_id}/redeliver"


@dataclass
class Redelivered:
    """An exhausted chain, the redeliver request made on it and what it caused."""

    chain: Chain
    delivery_id: str
    before: dict[str, Any]
    response: httpx.Response
    arrival: Delivery | None

    @property
    def original(self) -> Delivery:
        return self.chain.endpoint.deliveries[0]

    def answer(self) -> Any:
        try:
            return self.response.json()
        except ValueError:
            return None


def _exhausted(lab: Chains, name: str) -> tuple[Chain, str, dict[str, Any]]:
    """Set-up: the chain's three attempts made and its record exhausted; the delivery id."""
    chain = lab[name]
    try:
        arrived = chain.wait_for(ATTEMPTS, "set-up: the attempts of the delivery to redeliver")
    except AssertionError as missing:  # the attempts are judged by test_delivery_retries
        raise SetupFailed(str(missing)) from None
    delivery_id, record = settle_exhausted(lab.client, chain.generation(), chain.url, arrived)
    return chain, delivery_id, record


def _redeliver(lab: Chains, name: str) -> Redelivered:
    chain, delivery_id, before = _exhausted(lab, name)
    seen = len(chain.endpoint.deliveries)
    response = lab.client.request("POST", _path(delivery_id))
    arrival: Delivery | None = None
    try:
        arrival = chain.endpoint.wait_for(seen + 1, ARRIVAL_SECONDS)[seen]
    except AssertionError:
        arrival = None  # judged by REDLV-STATE-01
    return Redelivered(chain, delivery_id, before, response, arrival)


@pytest.fixture(scope="module")
def lab(labs: Labs) -> Chains:
    made = labs.chains("redeliver")
    # Three failed attempts, then the redelivery's reply (the last one repeats).
    made.start("ok", [Reply(500)] * ATTEMPTS + [Reply(200)])
    made.start("refused", [Reply(500)] * (ATTEMPTS + 1) + [Reply(200)])
    made.start("foreign", [Reply(500)])
    return made


@pytest.fixture(scope="module")
def ok(lab: Chains) -> Redelivered:
    """The ``ok`` chain redelivered once; the target answers 200."""
    return _redeliver(lab, "ok")


@pytest.fixture(scope="module")
def refused(lab: Chains) -> Redelivered:
    """The ``refused`` chain redelivered once; the target answers 500."""
    return _redeliver(lab, "refused")


@pytest.mark.requirement("REDLV-AUTH-01")
def test_redeliver_with_api_key_is_served(ok: Redelivered) -> None:
    """POST redeliver with an API key of the delivery's account is not refused for auth."""
    assert_not_refused_for_auth(ok.response, "the delivery's API key")


@pytest.mark.requirement("REDLV-RESP-02")
def test_redeliver_that_made_attempt_answers_2xx(ok: Redelivered) -> None:
    """A redeliver that made its attempt is answered with a 2xx."""
    assert 200 <= ok.response.status_code < 300, (
        f"REDLV-RESP-02: expected a 2xx, saw {describe(ok.response)}"
    )


@pytest.mark.parametrize("name", ["ok", "refused"])
@pytest.mark.requirement("REDLV-RESP-01")
def test_redeliver_answer_has_outcome_and_status_code(
    request: pytest.FixtureRequest, name: str
) -> None:
    """The redeliver answer is an object with outcome (an outcome value) and status_code."""
    redelivered: Redelivered = request.getfixturevalue(name)
    answer = redelivered.answer()
    assert (
        isinstance(answer, dict)
        and answer.get("outcome") in OUTCOMES
        and type(answer.get("status_code")) is int
    ), (
        f"REDLV-RESP-01: expected an object with outcome in {list(OUTCOMES)} and an integer "
        f"status_code, saw {describe(redelivered.response)}"
    )


@pytest.mark.requirement("REDLV-STATE-01")
def test_redeliver_of_exhausted_delivery_reaches_target(ok: Redelivered) -> None:
    """Redeliver of an exhausted delivery makes a new attempt: the target receives it."""
    assert ok.arrival is not None, (
        f"REDLV-STATE-01: expected the target to receive the delivery again within "
        f"{ARRIVAL_SECONDS:g} s of the redeliver ({describe(ok.response)}) "
        f"{ok.chain.describe()}"
    )


@pytest.mark.parametrize(("name", "status"), [("ok", 200), ("refused", 500)])
@pytest.mark.requirement("REDLV-STATE-03")
def test_redeliver_answer_gives_new_attempts_result(
    request: pytest.FixtureRequest, name: str, status: int
) -> None:
    """The answer's status_code is the target's status for the new attempt; outcome is
    delivered exactly when that status is a 2xx."""
    redelivered: Redelivered = request.getfixturevalue(name)
    if redelivered.arrival is None:
        pytest.skip("no new attempt reached the target, so it has no result (REDLV-STATE-01)")
    answer = redelivered.answer()
    seen = (answer.get("status_code"), answer.get("outcome")) if isinstance(answer, dict) else None
    delivered = 200 <= status < 300
    ok = seen is not None and seen[0] == status and (seen[1] == "delivered") == delivered
    assert ok, (
        f"REDLV-STATE-03: the target answered the redelivery {status}; expected status_code "
        f"{status} and outcome {'delivered' if delivered else 'not delivered'}, saw "
        f"{describe(redelivered.response)}"
    )


@pytest.mark.requirement("REDLV-STATE-04")
def test_record_delivered_after_successful_redelivery(lab: Chains, ok: Redelivered) -> None:
    """After a successful redelivery the delivery record's outcome is delivered."""
    if ok.arrival is None:
        pytest.skip("no redelivery reached the target (REDLV-STATE-01 judges that)")
    lab.assert_outcome(ok.chain, "delivered", "after a successful redelivery")


def _arrival(redelivered: Redelivered, requirement_id: str) -> Delivery:
    if redelivered.arrival is None:
        fail(
            f"the redelivery never arrived ({describe(redelivered.response)}) "
            f"{redelivered.chain.describe()}",
            rule=requirement_id,
        )
    return redelivered.arrival


@pytest.mark.requirement("REDLV-PAYLOAD-01")
def test_redelivery_body_equals_original_payload(ok: Redelivered) -> None:
    """The redelivery's body is JSON-equal to the original delivery's body."""
    arrival = _arrival(ok, "REDLV-PAYLOAD-01")
    try:
        again, first = arrival.json(), ok.original.json()
    except ValueError:
        pytest.fail(f"REDLV-PAYLOAD-01: a body is not JSON {ok.chain.describe()}")
    assert again == first, (
        f"REDLV-PAYLOAD-01: expected the original payload, saw "
        f"{json.dumps(again, sort_keys=True)[:300]} instead of "
        f"{json.dumps(first, sort_keys=True)[:300]}"
    )


@pytest.mark.requirement("REDLV-PAYLOAD-02")
def test_redelivery_carries_original_event_id(ok: Redelivered) -> None:
    """The redelivery carries the original event id, in the body id and X-Service-Delivery."""
    arrival = _arrival(ok, "REDLV-PAYLOAD-02")
    try:
        body_id = arrival.json().get("id")
    except (ValueError, AttributeError):
        body_id = None
    header = arrival.header("Delivery")
    assert body_id == header == ok.delivery_id, (
        f"REDLV-PAYLOAD-02: expected the original id {ok.delivery_id!r} in the body and "
        f"{arrival.wire.header('Delivery')}, saw body id {body_id!r}, header {header!r}"
    )


@pytest.mark.requirement("REDLV-PAYLOAD-03")
def test_redelivery_body_is_byte_identical(ok: Redelivered) -> None:
    """The redelivery's body has the original body's exact bytes."""
    arrival = _arrival(ok, "REDLV-PAYLOAD-03")
    assert arrival.raw_body == ok.original.raw_body, (
        f"REDLV-PAYLOAD-03: expected the original {len(ok.original.raw_body)} bytes, saw "
        f"{len(arrival.raw_body)} bytes that differ"
    )


@pytest.mark.requirement("SIG-TS-03")
def test_redelivery_signed_with_its_own_time(ok: Redelivered, profile: Profile) -> None:
    """The redelivery is signed afresh: its t is later than the first attempt's by about
    the time between them (an interpretation)."""
    arrival = _arrival(ok, "SIG-TS-03")
    try:
        first, again = [
            parse_signature_header(d.header("Signature"), d.wire) for d in (ok.original, arrival)
        ]
    except SignatureFormatError as malformed:
        pytest.fail(f"SIG-TS-03: {malformed} {ok.chain.describe()}")
    # Three attempts (3 s) and more apart.
    resigned = resigning(
        (ok.original.arrived_at, first),
        (arrival.arrived_at, again),
        profile.timing.tolerance_seconds,
    )
    assert resigned.afresh, (
        f"SIG-TS-03: expected the redelivery's t about {resigned.gap:.1f} s after the first "
        f"attempt's (signed when redelivered), saw t moved by {resigned.moved} s "
        f"{ok.chain.describe()}"
    )


@pytest.mark.requirement("REDLV-ATTEMPT-01")
def test_redelivery_continues_attempt_numbering(lab: Chains, ok: Redelivered) -> None:
    """The redelivery is attempt 4 (header) and the record's attempts gain an entry n=4."""
    arrival = _arrival(ok, "REDLV-ATTEMPT-01")
    header = arrival.header("Attempt")
    record = lab.record(
        ok.chain, lambda r: isinstance(r.get("attempts"), list) and len(r["attempts"]) > ATTEMPTS
    )
    attempts = record.get("attempts") if record else None
    numbers = [a.get("n") for a in attempts if isinstance(a, dict)] if attempts else []
    assert header == str(ATTEMPTS + 1) and numbers == list(range(1, ATTEMPTS + 2)), (
        f"REDLV-ATTEMPT-01: expected {arrival.wire.header('Attempt')} {ATTEMPTS + 1} and "
        f"attempts n "
        f"{list(range(1, ATTEMPTS + 2))}, saw header {header!r} and n {numbers}"
    )


@pytest.mark.requirement("REDLV-ONCE-01")
def test_failed_redelivery_is_not_retried(refused: Redelivered, profile: Profile) -> None:
    """A redelivery the target answers 500 is one attempt: no automatic retry follows."""
    _arrival(refused, "REDLV-ONCE-01")
    quiet = QUIET_SECONDS + profile.timing.tolerance_seconds
    refused.chain.assert_arrivals(
        ATTEMPTS + 1, quiet, "3 attempts, then one redelivery, no retry of it"
    )


@pytest.mark.requirement("REDLV-STATE-02")
def test_redeliver_of_failed_delivery_reaches_target(
    api: ApiClient, lab: Chains, refused: Redelivered
) -> None:
    """Redeliver of a delivery whose outcome is failed makes a new attempt."""
    chain = refused.chain
    record = lab.record(chain, lambda r: r.get("outcome") == "failed")
    if record is None or record.get("outcome") != "failed":
        pytest.skip(
            "no record with outcome failed was observed (no stated move leads there): "
            f"{None if record is None else record.get('outcome')!r}"
        )
    seen = len(chain.endpoint.deliveries)
    response = api.request("POST", _path(refused.delivery_id))
    try:
        chain.endpoint.wait_for(seen + 1, ARRIVAL_SECONDS)
    except AssertionError:
        pytest.fail(
            f"REDLV-STATE-02: expected the failed delivery redelivered to the target, the "
            f"redeliver answered {describe(response)} and nothing arrived {chain.describe()}"
        )


@pytest.mark.requirement("REDLV-FOREIGN-01")
def test_redeliver_of_other_accounts_delivery_answered_404(
    api: ApiClient, lab: Chains, foreign: KeyProfile
) -> None:
    """Redeliver of another account's delivery is answered 404 and sends nothing."""
    chain, delivery_id, _ = _exhausted(lab, "foreign")
    response = api.request("POST", _path(delivery_id), role=foreign.role)
    assert_status(response, 404)
    chain.assert_arrivals(ATTEMPTS, 2.0, "the refused redeliver sends nothing")


@pytest.mark.requirement("REDLV-FOREIGN-01")
def test_redeliver_of_unknown_delivery_answered_404(api: ApiClient) -> None:
    """Redeliver of a delivery id that was never issued is answered 404."""
    response = api.request("POST", _path("evt_" + "0" * 32))
    assert_status(response, 404)
