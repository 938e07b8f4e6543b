"""Every webhook fault of the registry that this package owns changes behaviour.

Each test starts the service with one fault and shows the rule it breaks (the honest
behaviour is what the other test modules check). The faults are the ones the webhook
service acts on outside the dedicated fault modules; those of ``event_faults.py``,
``url_faults.py`` and ``delivery_faults.py`` are probed by the suite's fault matrix.
"""

from __future__ import annotations

import pytest
from scripted_target import Arrival, Receiver, Reply
from webhook_harness import (
    Harness,
    HarnessFactory,
    exhausted_delivery,
    parse_body,
    verify_signature,
)

from reference.faults import FAULTS

# Its tests wait on real deliveries and processes: CI starts them early (tests/conftest.py).
pytestmark = [pytest.mark.anyio, pytest.mark.slow]

OWN_FAULTS = frozenset(
    {
        "accepts-private-callback",
        "backoff-too-short",
        "callback-body-not-flattened",
        "cancelled-sent-unsubscribed",
        "created-at-without-offset",
        "delivery-header-mismatch",
        "envelope-missing-api-version",
        "follows-redirects",
        "fourth-attempt",
        "no-retry",
        "precedence-callback-first",
        "redeliver-new-event-id",
        "redeliver-skips-revalidation",
        "signature-over-reserialized-body",
        "signature-wrong-key",
        "unknown-outcome-accepted",
        "webhook-id-not-null-inline",
    }
)


def test_own_faults_are_registered() -> None:
    assert OWN_FAULTS <= FAULTS.keys()


async def _one_delivery(
    service_factory: HarnessFactory,
    receiver: Receiver,
    fault: str,
    body_key: str = "webhook.url",
    status: str = "completed",
) -> tuple[Harness, Arrival]:
    h = await service_factory(faults=frozenset({fault}))
    url = receiver.url(f"/{fault}")
    body = {"callback_url": url} if body_key == "callback_url" else {"webhook": {"url": url}}
    await h.finished(body, status)
    (arrival,) = await receiver.arrived(f"/{fault}", 1, timeout_s=5)
    return h, arrival


async def test_accepts_private_callback(service_factory: HarnessFactory) -> None:
    h = await service_factory(faults=frozenset({"accepts-private-callback"}))
    binding = await h.service.select_target({"callback_url": "http://10.0.0.1:9/"}, h.key)
    assert binding is not None and binding.address == "10.0.0.1"


async def test_backoff_too_short(service_factory: HarnessFactory, receiver: Receiver) -> None:
    h = await service_factory(faults=frozenset({"backoff-too-short"}))
    await h.deliver_to(receiver, "/b", [Reply(500)] * 3)
    arrivals = await receiver.arrived("/b", 3, timeout_s=5)
    assert arrivals[1].at - arrivals[0].at < 0.5


async def test_callback_body_not_flattened(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    _, arrival = await _one_delivery(
        service_factory, receiver, "callback-body-not-flattened", "callback_url"
    )
    assert "generation_id" not in parse_body(arrival.body)


async def test_cancelled_sent_unsubscribed(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    _, arrival = await _one_delivery(
        service_factory, receiver, "cancelled-sent-unsubscribed", status="cancelled"
    )
    assert parse_body(arrival.body)["event"] == "generation.cancelled"


async def test_created_at_without_offset(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    _, arrival = await _one_delivery(service_factory, receiver, "created-at-without-offset")
    created_at = parse_body(arrival.body)["created_at"]
    assert not created_at.endswith(("Z", "+00:00"))


async def test_delivery_header_mismatch(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    _, arrival = await _one_delivery(service_factory, receiver, "delivery-header-mismatch")
    assert arrival.header("x-service-delivery") != parse_body(arrival.body)["id"]


async def test_envelope_missing_api_version(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    _, arrival = await _one_delivery(service_factory, receiver, "envelope-missing-api-version")
    assert "api_version" not in parse_body(arrival.body)


async def test_follows_redirects(service_factory: HarnessFactory, receiver: Receiver) -> None:
    h = await service_factory(faults=frozenset({"follows-redirects"}))
    await h.deliver_to(receiver, "/moved", [Reply(302, headers=(("Location", "/canary"),))])
    await receiver.arrived("/canary", 1, timeout_s=5)


@pytest.mark.parametrize(("fault", "arrivals"), [("fourth-attempt", 4), ("no-retry", 1)])
async def test_attempt_count_faults(
    service_factory: HarnessFactory, receiver: Receiver, fault: str, arrivals: int
) -> None:
    h = await service_factory(faults=frozenset({fault}))
    generation_id = await h.deliver_to(receiver, "/n", [Reply(500)] * 5)
    await h.settled(generation_id, "exhausted", 10)
    assert len(receiver.arrivals("/n")) == arrivals


async def test_precedence_callback_first(service_factory: HarnessFactory) -> None:
    h = await service_factory(faults=frozenset({"precedence-callback-first"}))
    binding = await h.service.select_target(
        {"webhook": {"url": "http://127.0.0.1:9/a"}, "callback_url": "http://127.0.0.1:9/b"},
        h.key,
    )
    assert binding is not None and binding.mode == "callback"


async def test_redeliver_new_event_id(service_factory: HarnessFactory, receiver: Receiver) -> None:
    h = await service_factory(faults=frozenset({"redeliver-new-event-id"}))
    delivery_id = await exhausted_delivery(h, receiver, "/re")
    await h.service.redeliver(h.account_id, delivery_id)
    replay = receiver.arrivals("/re")[-1]
    assert parse_body(replay.body)["id"] != delivery_id
    assert replay.header("x-service-delivery") != delivery_id


async def test_redeliver_skips_revalidation(
    service_factory: HarnessFactory, receiver: Receiver, canary: Receiver
) -> None:
    h = await service_factory(faults=frozenset({"redeliver-skips-revalidation"}))
    h.rebind("hooks.rebind.test", "127.0.0.1")
    url = f"http://hooks.rebind.test:{receiver.port}/skip"
    delivery_id = await exhausted_delivery(h, receiver, "/skip", url)
    h.rebind("hooks.rebind.test", "127.0.0.2")
    await h.service.redeliver(h.account_id, delivery_id)  # no 400
    assert len(canary.arrivals("/skip")) == 1


@pytest.mark.parametrize("fault", ["signature-over-reserialized-body", "signature-wrong-key"])
async def test_signature_faults(
    service_factory: HarnessFactory, receiver: Receiver, fault: str
) -> None:
    h, arrival = await _one_delivery(service_factory, receiver, fault)
    with pytest.raises(AssertionError, match="does not verify"):
        verify_signature(arrival.header("x-service-signature"), h.key.signing_secret, arrival.body)


async def test_unknown_outcome_accepted(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    h = await service_factory(faults=frozenset({"unknown-outcome-accepted"}))
    hook_id = await h.register(receiver.url("/o"))
    listing = h.service.webhook_deliveries(h.account_id, hook_id, "success", None)
    assert listing["total"] == 0


async def test_webhook_id_not_null_inline(
    service_factory: HarnessFactory, receiver: Receiver
) -> None:
    _, arrival = await _one_delivery(service_factory, receiver, "webhook-id-not-null-inline")
    assert parse_body(arrival.body)["webhook_id"] is not None
