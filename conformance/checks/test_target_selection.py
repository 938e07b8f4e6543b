"""Target selection for a generation (spec §4 "Target selection rules", §2 binding, §7).

Rule 1: first match wins, webhook.id, then webhook.url, then callback_url; observed at
the suite's receiver (one fresh endpoint per candidate target, so the winner and the
losers are told apart). Rules 3 and 4: a bad or foreign webhook id fails the submit with
404, a callback target failing validation with 400, both before credits are spent;
credits are observed through the usage figure the profile names (``[usage]``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Final

import pytest

from conformance.findings import fail
from conformance.judge.asserts import (
    DeliveryTarget,
    accepted_generation_id,
    assert_delivered,
    assert_refused,
    assert_status,
    credits_used_today,
    describe,
)
from conformance.judge.strategies import must_reject_vector
from conformance.observe.events import TargetKind, target_body
from conformance.observe.receiver import Endpoint
from conformance.observe.timing import delivery_deadline
from conformance.target.client import ApiClient
from conformance.target.profile import Profile
from conformance.target.setup import IMAGES_PATH, SUBMIT_PROMPT, GenerationOutcome, outcome_prompt
from conformance.target.webhooks import RegisteredWebhook, delete_webhook, register_webhook

#: A webhook id no implementation has issued (spec §4 rule 3: unknown id → 404).
UNKNOWN_WEBHOOK_ID: Final = "wh_conformance_never_issued_0000"
#: A submit bound by webhook.id to a webhook that was never registered.
UNKNOWN_ID_BODY: Final = {"prompt": SUBMIT_PROMPT, "webhook": {"id": UNKNOWN_WEBHOOK_ID}}
#: A callback target every implementation must refuse (spec §4: "Loopback, private ranges
#: and link-local addresses ... are rejected"): a fixture vector whose own requirement is a
#: MUST, so that a MUST of target selection never rests on an interpretation of the URL
#: rules (a recent registry entry, say).
BAD_VECTOR: Final = must_reject_vector("http://10.0.0.1:9/")
BAD_CALLBACK: Final = BAD_VECTOR.template
#: How long a losing target is watched after the winner's delivery arrived.
QUIET_SECONDS: Final = 1.0
#: Usage readings around a refused submit: a reading that moved may be another check's
#: spending on the same account, so the measure is repeated this many times.
CREDIT_TRIALS: Final = 5


def _accepted(api: ApiClient, body: dict[str, Any]) -> str:
    """Submit *body*; the generation id of its acceptance, which the check's rules require.
    Any 2xx is accepted here: that it is exactly 202 is the submit endpoints' own rule
    (GEN-IMAGE-07), not the rule of the check that calls."""
    response = api.request("POST", IMAGES_PATH, json=body)
    if not 200 <= response.status_code < 300:
        fail(f"expected the submit accepted (202), saw {describe(response)}")
    return accepted_generation_id(response)


def _delivered_alone(
    api: ApiClient,
    profile: Profile,
    endpoint: Endpoint,
    kind: TargetKind,
    webhook_id: str | None = None,
) -> None:
    """A generation bound by *kind* alone (to *endpoint*, or to the registered webhook
    *webhook_id* whose URL it is) delivers its events there."""
    url = "" if webhook_id is not None else endpoint.url
    body = {"prompt": SUBMIT_PROMPT, **target_body(kind, url, webhook_id=webhook_id)}
    _accepted(api, body)
    endpoint.wait_for(1, delivery_deadline(profile))


def _assert_delivered_at(
    winner: Endpoint,
    where: str,
    losers: dict[str, Endpoint],
    requirement_id: str,
    profile: Profile,
) -> None:
    """The delivery arrives at the winning target (*where*); a failure says what each
    losing target saw instead."""
    try:
        winner.wait_for(1, delivery_deadline(profile))
    except AssertionError as missing:
        seen = ", ".join(f"{name} saw {len(e.deliveries)}" for name, e in losers.items())
        fail(f"expected the delivery at {where}; {missing}; {seen}", rule=requirement_id)


def _bound_to_both(
    api: ApiClient, make_endpoint: Callable[..., Endpoint]
) -> tuple[Endpoint, Endpoint]:
    """Submit a generation naming two targets (spec §4 rule 1), webhook.url and
    callback_url, each a fresh endpoint; returns (webhook.url's, callback_url's)."""
    inline, callback = make_endpoint("inline"), make_endpoint("callback")
    body = {"prompt": SUBMIT_PROMPT, "webhook": {"url": inline.url}, "callback_url": callback.url}
    _accepted(api, body)
    return inline, callback


def _assert_refused_spending_nothing(
    api: ApiClient, body: dict[str, Any], requirement_id: str, why: str
) -> None:
    """The image submit *body* is refused (for *why*) and spends no credits: it is sent
    between two usage readings, which must not move.

    Other checks may spend on the same account meanwhile, so a reading that moved is
    repeated (up to CREDIT_TRIALS); an implementation that spends on every refused submit
    moves every time. A decrease is another generation's refund, never our spending.
    """
    moves: list[int] = []
    for _ in range(CREDIT_TRIALS):
        before = credits_used_today(api)
        response = api.request("POST", IMAGES_PATH, json=body)
        after = credits_used_today(api)
        if after <= before:
            assert_refused(response, why)
            return
        moves.append(after - before)
    fail(
        f"expected no credits spent by a refused submit ({describe(response)}); credits used "
        f"today rose by {moves} across {CREDIT_TRIALS} repeated measurements",
        rule=requirement_id,
    )


@pytest.fixture
def webhooks(api: ApiClient) -> Iterator[Callable[..., RegisteredWebhook]]:
    """Registers webhooks through the console for one check; deletes them afterwards."""
    made: list[RegisteredWebhook] = []

    def register(url: str, session: str = "primary") -> RegisteredWebhook:
        created = register_webhook(api, url, session=session)
        made.append(created)
        return created

    yield register
    for webhook in made:
        delete_webhook(api, webhook)


@pytest.fixture
def foreign_id_body(
    endpoint: Endpoint, webhooks: Callable[..., RegisteredWebhook]
) -> dict[str, Any]:
    """A submit bound by webhook.id to another account's webhook (registered for the
    check's endpoint, where nothing may arrive)."""
    foreign = webhooks(endpoint.url, session="second")
    return {"prompt": SUBMIT_PROMPT, "webhook": {"id": foreign.id}}


# -- rule 1: resolution order ------------------------------------------------------------


@pytest.mark.requirement("TARGET-BIND-02")
def test_target_webhook_url_alone_delivers_to_it(
    api: ApiClient, profile: Profile, endpoint: Endpoint
) -> None:
    """A generation bound with webhook.url delivers its events to that URL."""
    _delivered_alone(api, profile, endpoint, "webhook.url")


@pytest.mark.requirement("TARGET-ORDER-03")
def test_target_callback_url_alone_delivers_to_it(
    api: ApiClient, profile: Profile, endpoint: Endpoint
) -> None:
    """A generation with only callback_url delivers its events to callback_url."""
    _delivered_alone(api, profile, endpoint, "callback_url")


@pytest.mark.requirement("TARGET-ORDER-02")
def test_target_webhook_url_and_callback_url_delivers_to_webhook_url(
    api: ApiClient, profile: Profile, make_endpoint: Callable[..., Endpoint]
) -> None:
    """With webhook.url and callback_url both given, events go to webhook.url."""
    inline, callback = _bound_to_both(api, make_endpoint)
    losers = {"callback_url": callback}
    _assert_delivered_at(inline, "webhook.url", losers, "TARGET-ORDER-02", profile)


@pytest.mark.requirement("TARGET-ORDER-04")
def test_target_losing_callback_url_receives_nothing(
    api: ApiClient, profile: Profile, make_endpoint: Callable[..., Endpoint]
) -> None:
    """A callback_url that loses to webhook.url receives no delivery."""
    inline, callback = _bound_to_both(api, make_endpoint)
    # Whichever target the IUT chose, a delivery arrives somewhere within the deadline.
    deadline = delivery_deadline(profile)
    try:
        inline.wait_for(1, deadline)
    except AssertionError:
        pass  # judged below by what the loser saw
    if not callback.deliveries:
        callback.assert_quiet(QUIET_SECONDS)
    assert not callback.deliveries, (
        f"TARGET-ORDER-04: expected nothing at the losing callback_url, saw "
        f"{len(callback.deliveries)} deliveries (webhook.url saw {len(inline.deliveries)})"
    )


@pytest.mark.parametrize(
    "outcome",
    [
        pytest.param("completed", id="events-generation.completed"),
        pytest.param("failed", id="events-generation.failed", marks=pytest.mark.sandbox),
    ],
)
@pytest.mark.requirement("TARGET-BIND-04")
def test_target_listed_event_delivered_to_binding(
    api: ApiClient, profile: Profile, delivery_target: DeliveryTarget, outcome: GenerationOutcome
) -> None:
    """An event listed in webhook.events is delivered to the binding's target when it occurs."""
    event = f"generation.{outcome}"
    prompt = outcome_prompt(profile, outcome)
    body = {"prompt": prompt, **target_body("webhook.url", delivery_target.url, events=(event,))}
    _accepted(api, body)
    (delivery, *_) = assert_delivered(delivery_target, f"{event} listed in webhook.events")
    seen = delivery.json().get("event") if delivery.raw_body else None
    assert seen == event, f"TARGET-BIND-04: expected the event {event}, saw {seen!r}"


@pytest.mark.console
@pytest.mark.requirement("TARGET-BIND-01")
def test_target_webhook_id_alone_delivers_to_registered_url(
    api: ApiClient,
    profile: Profile,
    endpoint: Endpoint,
    webhooks: Callable[..., RegisteredWebhook],
) -> None:
    """A generation bound with webhook.id delivers to the registered webhook's URL."""
    webhook = webhooks(endpoint.url)
    _delivered_alone(api, profile, endpoint, "webhook.id", webhook_id=webhook.id)


@pytest.mark.console
@pytest.mark.requirement("TARGET-ORDER-01")
def test_target_webhook_id_url_and_callback_delivers_to_registered(
    api: ApiClient,
    profile: Profile,
    make_endpoint: Callable[..., Endpoint],
    webhooks: Callable[..., RegisteredWebhook],
) -> None:
    """With webhook.id, webhook.url and callback_url all given, events go to webhook.id's URL."""
    registered = make_endpoint("registered")
    inline, callback = make_endpoint("inline"), make_endpoint("callback")
    webhook = webhooks(registered.url)
    body = {
        "prompt": SUBMIT_PROMPT,
        "webhook": {"id": webhook.id, "url": inline.url},
        "callback_url": callback.url,
    }
    _accepted(api, body)
    losers = {"webhook.url": inline, "callback_url": callback}
    _assert_delivered_at(registered, "the registered webhook", losers, "TARGET-ORDER-01", profile)


@pytest.mark.requirement("TARGET-ORDER-05")
def test_target_invalid_losing_callback_url_answered_400(
    api: ApiClient, endpoint: Endpoint
) -> None:
    """A valid webhook.url beside an invalid callback_url (the loser) is still refused with 400."""
    body = {"prompt": SUBMIT_PROMPT, "webhook": {"url": endpoint.url}, "callback_url": BAD_CALLBACK}
    assert_status(api.request("POST", IMAGES_PATH, json=body), 400)


# -- rule 3: bad or foreign webhook id ---------------------------------------------------


@pytest.mark.requirement("TARGET-ID-01")
def test_target_unknown_webhook_id_answered_404(api: ApiClient) -> None:
    """A submit whose webhook.id names no registered webhook is answered 404."""
    assert_status(api.request("POST", IMAGES_PATH, json=UNKNOWN_ID_BODY), 404)


@pytest.mark.console
@pytest.mark.requirement("TARGET-ID-02")
def test_target_foreign_webhook_id_answered_404(
    api: ApiClient, endpoint: Endpoint, foreign_id_body: dict[str, Any]
) -> None:
    """A submit whose webhook.id is another account's registered webhook is answered 404."""
    assert_status(api.request("POST", IMAGES_PATH, json=foreign_id_body), 404)
    endpoint.assert_quiet(QUIET_SECONDS)


@pytest.mark.requirement("TARGET-ID-03")
def test_target_unknown_webhook_id_spends_no_credits(api: ApiClient) -> None:
    """A submit refused for an unknown webhook id spends no credits."""
    _assert_refused_spending_nothing(api, UNKNOWN_ID_BODY, "TARGET-ID-03", "an unknown webhook id")


@pytest.mark.console
@pytest.mark.requirement("TARGET-ID-03")
def test_target_foreign_webhook_id_spends_no_credits(
    api: ApiClient, foreign_id_body: dict[str, Any]
) -> None:
    """A submit refused for another account's webhook id spends no credits."""
    what = "another account's webhook id"
    _assert_refused_spending_nothing(api, foreign_id_body, "TARGET-ID-03", what)


# -- rule 4: a callback target failing validation -----------------------------------------


@pytest.mark.parametrize("field", ["callback_url", "webhook.url"])
@pytest.mark.requirement("TARGET-URL-01")
def test_target_invalid_callback_target_answered_400(api: ApiClient, field: TargetKind) -> None:
    """A submit whose callback target fails validation is answered 400."""
    body: dict[str, Any] = {"prompt": SUBMIT_PROMPT, **target_body(field, BAD_CALLBACK)}
    assert_status(api.request("POST", IMAGES_PATH, json=body), 400)


@pytest.mark.parametrize("field", ["callback_url", "webhook.url"])
@pytest.mark.requirement("TARGET-URL-02")
def test_target_invalid_callback_target_spends_no_credits(
    api: ApiClient, field: TargetKind
) -> None:
    """A submit refused for a callback target failing validation spends no credits."""
    body: dict[str, Any] = {"prompt": SUBMIT_PROMPT, **target_body(field, BAD_CALLBACK)}
    _assert_refused_spending_nothing(api, body, "TARGET-URL-02", f"an invalid {field}")


@pytest.mark.requirement("TARGET-URL-03")
def test_target_webhook_without_id_or_url_refused(api: ApiClient) -> None:
    """A webhook binding with neither id nor url (only events) is refused with a 4xx."""
    body = {"prompt": SUBMIT_PROMPT, "webhook": {"events": ["generation.completed"]}}
    response = api.request("POST", IMAGES_PATH, json=body)
    assert 400 <= response.status_code < 500, (
        f"TARGET-URL-03: expected a 4xx refusal of a webhook with neither id nor url, "
        f"saw {describe(response)}"
    )


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(12345, id="callback-number-4xx"),
        pytest.param(["http://10.0.0.1:9/"], id="callback-array-4xx"),
        pytest.param({"url": "http://10.0.0.1:9/"}, id="callback-object-4xx"),
        pytest.param(True, id="callback-boolean-4xx"),
    ],
)
@pytest.mark.requirement("URL-FORM-07")
def test_target_callback_url_not_a_string_refused(api: ApiClient, value: object) -> None:
    """A callback_url that is not a string (spec §2, §4: a URL string) is refused with a 4xx."""
    response = api.request(
        "POST", IMAGES_PATH, json={"prompt": SUBMIT_PROMPT, "callback_url": value}
    )
    assert 400 <= response.status_code < 500, (
        f"URL-FORM-07: expected a 4xx refusal of callback_url={value!r}, saw {describe(response)}"
    )


# -- §2: the inline binding is recorded with mode "inline" --------------------------------


def _modes(value: Any) -> list[str]:
    """Every ``mode`` value anywhere in a JSON document."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "mode" and isinstance(item, str):
                found.append(item)
            found += _modes(item)
    elif isinstance(value, list):
        for item in value:
            found += _modes(item)
    return found


@pytest.mark.requirement("TARGET-BIND-05")
def test_target_inline_binding_shown_with_mode_inline(
    api: ApiClient, profile: Profile, endpoint: Endpoint
) -> None:
    """An inline (webhook.url) binding is shown with mode "inline" where the IUT shows one."""
    body = {"prompt": SUBMIT_PROMPT, **target_body("webhook.url", endpoint.url)}
    generation_id = _accepted(api, body)
    endpoint.wait_for(1, delivery_deadline(profile))
    record = api.request("GET", f"/v1/generations/{generation_id}")
    deliveries = api.request("GET", f"/v1/generations/{generation_id}/deliveries")
    modes = [
        mode
        for response in (record, deliveries)
        if response.status_code == 200 and response.content
        for mode in _modes(response.json())
    ]
    assert modes and set(modes) == {"inline"}, (
        'TARGET-BIND-05: expected mode "inline" for a webhook.url binding in GET '
        f"/v1/generations/{{id}} or its deliveries; saw modes {modes or 'none shown'}"
    )
