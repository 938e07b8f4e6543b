"""GET /v1/webhooks/{id}/deliveries: a registered webhook's deliveries, the outcome filter
and limit (spec §4, §7 400 row, §8 Delivery list limit).

One webhook is registered through the console for the module. Two generations are bound
to it one after the other: the first delivery is answered 200 (delivered), the second
always 500 (exhausted after three attempts), so the list holds two records with two
different outcomes. The filter and limit checks judge the list against them. A second
webhook gets more than 100 console test deliveries, for the 100-record bound: with
limit=100, without a limit and with limit=101, where a limit above the maximum would show.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

import httpx
import pytest

from conformance.findings import fail
from conformance.judge.asserts import assert_delivery_list, assert_status, describe
from conformance.observe.deliveries import OUTCOMES, submit_with_target, wait_for_record
from conformance.observe.receiver import Endpoint, Receiver, Reply
from conformance.observe.timing import delivery_deadline
from conformance.secrets import Redactor
from conformance.target.adapters import console_request
from conformance.target.client import ApiClient, Recorder
from conformance.target.profile import Profile
from conformance.target.setup import SetupFailed
from conformance.target.webhooks import RegisteredWebhook, delete_webhook, register_webhook

pytestmark = pytest.mark.console

#: Spec §3: three attempts before exhausted.
ATTEMPTS: Final = 3
#: How long a record may take to settle after the last arrival.
SETTLE_SECONDS: Final = 5.0
#: Values that are not one of the four outcomes (compared case-sensitively). The empty
#: value is apart (REC-HOOK-12): it may be read as no filter at all.
UNKNOWN_OUTCOMES: Final = ("success", "DELIVERED", "delivered,exhausted", "retrying")
#: Spec §8: a delivery list returns at most 100 records; one more delivery than that.
MAX_LIMIT: Final = 100
OVER_MAX: Final = MAX_LIMIT + 1
#: Limits that are not a positive integer (REC-HOOK-09).
BAD_LIMITS: Final = ("0", "-1", "ten", "1.5")


@dataclass(frozen=True)
class Hook:
    """The module's registered webhook, its endpoint and the two generations sent to it."""

    webhook: RegisteredWebhook
    endpoint: Endpoint
    delivered_generation: str
    exhausted_generation: str

    @property
    def path(self) -> str:
        return f"/v1/webhooks/{self.webhook.id}/deliveries"


def _settle(client: ApiClient, generation_id: str, url: str, outcome: str) -> None:
    record = wait_for_record(
        client,
        generation_id,
        url,
        lambda r: r.get("outcome") == outcome,
        SETTLE_SECONDS + client.profile.timing.tolerance_seconds,
    )
    if record is None or record.get("outcome") != outcome:
        raise SetupFailed(f"set-up: expected a record ending {outcome}, saw {record!r}")


@contextmanager
def _module_webhook(
    profile: Profile, redactor: Redactor, receiver: Receiver, name: str, replies: list[Reply]
) -> Iterator[tuple[ApiClient, Endpoint, RegisteredWebhook]]:
    """A webhook registered for a module's checks at a fresh endpoint answering *replies*,
    through a client of its own; afterwards the webhook is deleted and the endpoint closed
    and checked."""
    client = ApiClient(profile, Recorder(redactor))
    endpoint = receiver.endpoint(name)
    endpoint.respond_with(replies)
    webhook: RegisteredWebhook | None = None
    try:
        webhook = register_webhook(client, endpoint.url)
        yield client, endpoint, webhook
    finally:
        try:
            if webhook is not None:
                delete_webhook(client, webhook)
        finally:
            endpoint.close()
            client.close()
    endpoint.check()


@pytest.fixture(scope="module")
def hook(profile: Profile, redactor: Redactor, receiver: Receiver) -> Iterator[Hook]:
    replies = [Reply(200), Reply(500)]
    with _module_webhook(profile, redactor, receiver, "lists", replies) as made:
        client, endpoint, webhook = made
        kwargs: dict[str, Any] = {"kind": "webhook.id", "webhook_id": webhook.id}
        first = submit_with_target(client, endpoint.url, **kwargs)
        endpoint.wait_for(1, delivery_deadline(profile, 1))
        _settle(client, first, endpoint.url, "delivered")
        second = submit_with_target(client, endpoint.url, **kwargs)
        endpoint.wait_for(1 + ATTEMPTS, delivery_deadline(profile, ATTEMPTS))
        _settle(client, second, endpoint.url, "exhausted")
        yield Hook(webhook, endpoint, first, second)


def _ours(records: list[dict[str, Any]], hook: Hook) -> list[dict[str, Any]]:
    """The records of this module's deliveries (matched by target_url)."""
    return [r for r in records if r.get("target_url") == hook.endpoint.url]


@pytest.mark.requirement("REC-HOOK-01", "REC-HOOK-10")
def test_webhook_deliveries_with_api_key_served_as_list(api: ApiClient, hook: Hook) -> None:
    """GET /v1/webhooks/{id}/deliveries with the account's API key is served: an object
    with deliveries and total."""
    response = api.request("GET", hook.path)
    if not 200 <= response.status_code < 300:
        fail(
            f"expected a 2xx for the webhook's deliveries with an API key, saw "
            f"{describe(response)}",
            rule="REC-HOOK-01",
        )
    assert_delivery_list(response, "REC-HOOK-10")


@pytest.mark.requirement("REC-HOOK-02")
def test_webhook_deliveries_hold_deliveries_made_to_it(api: ApiClient, hook: Hook) -> None:
    """The webhook's list holds both deliveries made to it (delivered and exhausted)."""
    records, _ = assert_delivery_list(api.request("GET", hook.path))
    outcomes = sorted(str(r.get("outcome")) for r in _ours(records, hook))
    assert outcomes == ["delivered", "exhausted"], (
        f"REC-HOOK-02: expected the two deliveries (delivered, exhausted) to "
        f"{hook.endpoint.url}, saw outcomes {outcomes} in "
        f"{[json.dumps(r)[:200] for r in records]}"
    )


@pytest.mark.parametrize("outcome", OUTCOMES)
@pytest.mark.requirement("REC-HOOK-03")
def test_outcome_filter_value_accepted(api: ApiClient, hook: Hook, outcome: str) -> None:
    """Each of the four outcome values is accepted as a filter (a 2xx delivery list)."""
    response = api.request("GET", hook.path, params={"outcome": outcome})
    assert_delivery_list(response)


@pytest.mark.parametrize("outcome", OUTCOMES)
@pytest.mark.requirement("REC-HOOK-04")
def test_outcome_filter_returns_only_that_outcome(api: ApiClient, hook: Hook, outcome: str) -> None:
    """With outcome=X every record returned has outcome X, and the one with X is listed."""
    response = api.request("GET", hook.path, params={"outcome": outcome})
    records, _ = assert_delivery_list(response)
    others = sorted({str(r.get("outcome")) for r in records} - {outcome})
    assert not others, f"REC-HOOK-04: outcome={outcome} returned records with outcomes {others}"
    expected = 1 if outcome in ("delivered", "exhausted") else 0
    ours = _ours(records, hook)
    assert len(ours) == expected, (
        f"REC-HOOK-04: the webhook has one delivered and one exhausted delivery; expected "
        f"{expected} record(s) with outcome={outcome}, saw "
        f"{[json.dumps(r)[:200] for r in ours]}"
    )


@pytest.mark.parametrize(
    "value", UNKNOWN_OUTCOMES, ids=[f"outcome-{v or 'empty'}" for v in UNKNOWN_OUTCOMES]
)
@pytest.mark.requirement("REC-HOOK-05")
def test_unknown_outcome_filter_answered_400(api: ApiClient, hook: Hook, value: str) -> None:
    """An outcome value other than the four listed is answered 400."""
    response = api.request("GET", hook.path, params={"outcome": value})
    assert_status(response, 400)


@pytest.mark.requirement("REC-HOOK-12")
def test_empty_outcome_filter_answered_400(api: ApiClient, hook: Hook) -> None:
    """An empty outcome value (outcome=) is answered 400 like any other unlisted value."""
    response = api.request("GET", hook.path, params={"outcome": ""})
    assert_status(response, 400)


@pytest.mark.requirement("REC-HOOK-06")
def test_limit_1_returns_at_most_one_record(api: ApiClient, hook: Hook) -> None:
    """limit=1 returns at most one record (the webhook has two)."""
    response = api.request("GET", hook.path, params={"limit": 1})
    records, _ = assert_delivery_list(response)
    assert len(records) <= 1, f"REC-HOOK-06: limit=1 returned {len(records)} records"


@pytest.mark.requirement("REC-LIST-02")
def test_total_under_limit_counts_every_matching_record(api: ApiClient, hook: Hook) -> None:
    """Under limit=1, total still counts every matching record, as without a limit."""
    full, full_total = assert_delivery_list(api.request("GET", hook.path))
    response = api.request("GET", hook.path, params={"limit": 1})
    _, total = assert_delivery_list(response)
    assert total == full_total >= len(full), (
        f"REC-LIST-02: expected total {full_total} (every match) under limit=1, saw {total}"
    )


@pytest.mark.requirement("REC-HOOK-08")
def test_limit_above_100_refused_or_capped(api: ApiClient, hook: Hook) -> None:
    """limit=101 is answered 400 or served with at most 100 records."""
    response = api.request("GET", hook.path, params={"limit": 101})
    if response.status_code == 400:
        return
    records, _ = assert_delivery_list(response)
    assert len(records) <= 100, f"REC-HOOK-08: limit=101 returned {len(records)} records"


@pytest.fixture(scope="module")
def crowded(profile: Profile, redactor: Redactor, receiver: Receiver) -> Iterator[str]:
    """The deliveries path of a webhook with more than 100 deliveries: console test
    deliveries (spec §4), sent one by one (each answered 200), no credits spent."""
    with _module_webhook(profile, redactor, receiver, "crowded", [Reply(200)]) as made:
        client, _, webhook = made
        for sent in range(OVER_MAX):
            response = console_request(client, "test_webhook", session="primary", id=webhook.id)
            if not 200 <= response.status_code < 300:
                raise SetupFailed(f"set-up: test delivery {sent + 1} answered {describe(response)}")
        yield f"/v1/webhooks/{webhook.id}/deliveries"


def _over_100_records(response: httpx.Response) -> list[dict[str, Any]]:
    """The records of one read of the crowded webhook's list; a skip when the IUT does not
    count console test deliveries as the webhook's deliveries (the spec does not say)."""
    records, total = assert_delivery_list(response)
    if total < OVER_MAX and len(records) < OVER_MAX:
        pytest.skip(f"the webhook's list counts {total} of {OVER_MAX} test deliveries")
    return records


@pytest.mark.requirement("REC-HOOK-06")
def test_limit_100_of_over_100_deliveries_returns_at_most_100(api: ApiClient, crowded: str) -> None:
    """limit=100 on a webhook with more than 100 deliveries returns at most 100 records."""
    records = _over_100_records(api.request("GET", crowded, params={"limit": MAX_LIMIT}))
    assert len(records) <= MAX_LIMIT, (
        f"REC-HOOK-06: limit={MAX_LIMIT} returned {len(records)} records"
    )


@pytest.mark.requirement("REC-HOOK-13")
def test_limit_101_of_over_100_deliveries_returns_at_most_100(api: ApiClient, crowded: str) -> None:
    """limit=101 on a webhook with more than 100 deliveries, where a limit above the
    maximum would show: refused, or served with at most 100 records."""
    response = api.request("GET", crowded, params={"limit": OVER_MAX})
    if not 200 <= response.status_code < 300:
        return  # refused: no record beyond the maximum (REC-HOOK-08 judges the answer)
    records = _over_100_records(response)
    assert len(records) <= MAX_LIMIT, (
        f"REC-HOOK-13: limit={OVER_MAX} on a list of more than {MAX_LIMIT} deliveries "
        f"returned {len(records)} records; the maximum is {MAX_LIMIT}"
    )


@pytest.mark.requirement("REC-HOOK-07")
def test_list_of_over_100_deliveries_without_limit_returns_at_most_100(
    api: ApiClient, crowded: str
) -> None:
    """Asked without a limit, a webhook with more than 100 deliveries lists at most 100."""
    records = _over_100_records(api.request("GET", crowded))
    assert len(records) <= MAX_LIMIT, (
        f"REC-HOOK-07: expected at most {MAX_LIMIT} records without a limit, saw {len(records)}"
    )


@pytest.mark.parametrize("value", BAD_LIMITS, ids=[f"limit-{v}" for v in BAD_LIMITS])
@pytest.mark.requirement("REC-HOOK-09")
def test_limit_not_positive_integer_answered_400(api: ApiClient, hook: Hook, value: str) -> None:
    """A limit that is not a positive integer is answered 400."""
    response = api.request("GET", hook.path, params={"limit": value})
    assert_status(response, 400)


@pytest.mark.requirement("REC-HOOK-11")
def test_deliveries_of_unknown_webhook_answered_404(api: ApiClient) -> None:
    """The delivery list of a webhook id that does not exist is answered 404."""
    response = api.request("GET", "/v1/webhooks/wh_00000000000000000000/deliveries")
    assert_status(response, 404)


@pytest.mark.requirement("REC-HOOK-11")
def test_deliveries_of_other_accounts_webhook_answered_404(
    api: ApiClient, profile: Profile, endpoint: Endpoint
) -> None:
    """The delivery list of another account's registered webhook is answered 404."""
    if "second" not in profile.sessions:
        pytest.skip("needs a second account's console session: add [sessions.second]")
    webhook = register_webhook(api, endpoint.url, session="second")
    try:
        response = api.request("GET", f"/v1/webhooks/{webhook.id}/deliveries")
        assert_status(response, 404)
    finally:
        delete_webhook(api, webhook)
