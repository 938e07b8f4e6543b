"""Callback host names that resolve, or later resolve, to a private address (spec §3, §4, §7).

Needs controllable DNS (the profile's ``[dns]``): the implementation resolves names under
the profile's domain through the suite's DNS server (:mod:`conformance.observe.dns`), so a check
can point a name at the receiver, let a delivery happen, then move the name to
127.0.0.2, where a canary listens at the receiver's port. Spec §3: a redeliver whose
target hostname now resolves to a private address is answered 400, nothing is fetched,
and the delivery is unchanged; §4: a hostname must resolve to a public address, so one
whose lookup never gets an answer is refused like one that does not resolve.
"""

from __future__ import annotations

import ipaddress
import secrets
from dataclasses import dataclass
from typing import Any, Final

import httpx
import pytest

from conformance.findings import fail
from conformance.judge.asserts import answer_or_fail, describe
from conformance.judge.strategies import host_is_this_machine, iut_on_this_machine
from conformance.observe.deliveries import (
    record_of_target,
    records_of,
    settle_exhausted,
    submit_with_target,
    wait_for_record,
)
from conformance.observe.dns import DnsServer
from conformance.observe.events import target_body
from conformance.observe.receiver import CanaryView, Endpoint, Receiver
from conformance.observe.timing import delivery_deadline
from conformance.target.client import ApiClient
from conformance.target.profile import CapabilityMissing, Profile
from conformance.target.setup import IMAGES_PATH, SUBMIT_PROMPT, SetupFailed

#: Spec §3: max 3 attempts; a target that always fails ends the delivery exhausted.
ATTEMPTS: Final = 3

pytestmark = pytest.mark.dns


def _receiver_ip(receiver: Receiver) -> str:
    """The address the IUT reaches the receiver at: a name is first pointed there."""
    try:
        address = ipaddress.ip_address(receiver.host)
    except ValueError:
        raise CapabilityMissing(
            "a receiver listening on an IP address",
            "set [receiver] listen_host to an address (e.g. 127.0.0.1) for rebinding checks",
        ) from None
    if address.is_unspecified:
        raise CapabilityMissing(
            "a receiver on a specific address", "set [receiver] listen_host to 127.0.0.1"
        )
    return str(address)


def _need_rebind_canary(canary: CanaryView) -> None:
    """A name is moved to 127.0.0.2, where a canary listens on the receiver's port."""
    if canary.rebind_port is None:
        raise CapabilityMissing(
            "a canary at 127.0.0.2 on the receiver's port",
            "let the receiver listen on one address (listen_host = 127.0.0.1)",
        )


@dataclass(frozen=True)
class NamedTarget:
    """A callback name pointed at the receiver, whose endpoint answers every attempt 500,
    and the generation submitted to it; the name can be moved to the rebind canary."""

    name: str
    url: str
    generation_id: str
    dns_server: DnsServer
    canary: CanaryView

    def move_to_canary(self) -> None:
        """Point the name at 127.0.0.2, where the canary listens (a private address)."""
        self.dns_server.rebind(self.name, [self.canary.canary.rebind_host])


@pytest.fixture
def failing_name(
    api: ApiClient,
    receiver: Receiver,
    dns_server: DnsServer,
    endpoint: Endpoint,
    canary: CanaryView,
) -> NamedTarget:
    """Set-up of a rebinding: a fresh name pointed at the receiver, *endpoint* answering
    every attempt 500, a generation submitted with a callback_url on that name. Needs the
    canary the name will be moved to."""
    _need_rebind_canary(canary)
    name = dns_server.set(f"cb-{secrets.token_hex(5)}", [_receiver_ip(receiver)])
    endpoint.respond_with_statuses([500])
    url = f"http://{name}:{receiver.port}{endpoint.path}"
    generation_id = submit_with_target(api, url, kind="callback_url", path=IMAGES_PATH)
    return NamedTarget(name, url, generation_id, dns_server, canary)


@dataclass(frozen=True)
class Exhausted:
    """The delivery to *target*, exhausted, then the name moved to the canary."""

    target: NamedTarget
    delivery_id: str
    record: dict[str, Any]


@pytest.fixture
def rebound(
    api: ApiClient, profile: Profile, endpoint: Endpoint, failing_name: NamedTarget
) -> Exhausted:
    """Set-up: a callback to a name on the receiver, every attempt failed, the name moved
    to 127.0.0.2 (the rebind canary). Any failure here is a set-up error."""
    try:
        arrived = endpoint.wait_for(ATTEMPTS, delivery_deadline(profile, attempts=ATTEMPTS))
    except AssertionError as missing:  # retries are judged by the DLV checks, not here
        raise SetupFailed(f"setup: {ATTEMPTS} attempts expected: {missing}") from None
    target = failing_name
    delivery_id, record = settle_exhausted(api, target.generation_id, target.url, arrived)
    target.move_to_canary()
    return Exhausted(target, delivery_id, record)


@pytest.fixture
def redelivered(api: ApiClient, rebound: Exhausted) -> httpx.Response:
    """The redeliver every REDLV-REBIND check judges: of the rebound delivery, right after
    its name moved to the private address."""
    return api.request("POST", f"/v1/webhooks/deliveries/{rebound.delivery_id}/redeliver")


@pytest.mark.requirement("URL-RESOLVE-05")
def test_url_name_rebound_after_submit_gets_no_retry_at_the_private_address(
    api: ApiClient, profile: Profile, endpoint: Endpoint, failing_name: NamedTarget
) -> None:
    """A callback name moved to a private address after its first attempt gets no retry
    there: each attempt resolves the name again and checks it, or keeps the address
    validated at the submit (an interpretation)."""
    try:
        endpoint.wait_for(1, delivery_deadline(profile, attempts=1))
    except AssertionError as missing:  # the first attempt is judged by the DLV checks
        raise SetupFailed(f"setup: the first attempt never came: {missing}") from None
    failing_name.move_to_canary()
    record = wait_for_record(
        api,
        failing_name.generation_id,
        failing_name.url,
        lambda r: r.get("outcome") not in (None, "pending", "pending_retry"),
        delivery_deadline(profile, attempts=ATTEMPTS),
    )
    hits = failing_name.canary.hits
    assert not hits, (
        f"URL-RESOLVE-05: expected no retry at the private address {failing_name.name} "
        f"moved to after its first attempt; the canary saw {len(hits)} connections (the "
        f"record: {None if record is None else record.get('outcome')!r})"
    )


@pytest.mark.requirement("REDLV-REBIND-01")
def test_rebind_redeliver_to_private_address_answered_400(
    rebound: Exhausted, redelivered: httpx.Response
) -> None:
    """A redeliver whose target name now resolves to a private address is answered 400."""
    if redelivered.status_code != 400:
        fail(
            f"redeliver after {rebound.target.name} moved to 127.0.0.2: expected 400, "
            f"saw {describe(redelivered)}"
        )


@pytest.mark.requirement("REDLV-REBIND-02")
def test_rebind_redeliver_to_private_address_fetches_nothing(
    rebound: Exhausted, redelivered: httpx.Response, endpoint: Endpoint, canary: CanaryView
) -> None:
    """A redeliver refused for a now-private target connects nowhere: not there, not here."""
    hits, arrived = canary.hits, len(endpoint.deliveries) - ATTEMPTS
    assert not hits and not arrived, (
        f"REDLV-REBIND-02: expected nothing fetched by the redeliver ({describe(redelivered)}); "
        f"the private address saw {len(hits)} connections, the old address {arrived} deliveries"
    )


@pytest.mark.requirement("REDLV-VALIDATE-01")
def test_rebind_redeliver_validates_target_before_connecting(
    redelivered: httpx.Response, canary: CanaryView
) -> None:
    """The recorded target is validated again first: its now-private address gets no connection."""
    hits = canary.hits
    assert not hits, (
        f"REDLV-VALIDATE-01: expected no connection to the private address the target now "
        f"resolves to; the redeliver answered {describe(redelivered)} and the canary saw "
        + "; ".join(f"{h.peer} -> {h.local}: {h.request_line}" for h in hits)
    )


@pytest.mark.requirement("REDLV-REBIND-03")
def test_rebind_redeliver_to_private_address_leaves_record_unchanged(
    api: ApiClient, rebound: Exhausted, redelivered: httpx.Response
) -> None:
    """A redeliver refused for a now-private target leaves outcome and attempts as they were."""
    target = rebound.target
    after = record_of_target(records_of(api, target.generation_id), target.url)
    before = {k: rebound.record.get(k) for k in ("outcome", "attempts")}
    seen = None if after is None else {k: after.get(k) for k in ("outcome", "attempts")}
    assert seen == before, (
        f"REDLV-REBIND-03: expected the delivery unchanged by the refused redeliver "
        f"({describe(redelivered)}); before {before!r}, after {seen!r}"
    )


#: Non-public addresses a callback name is pointed at, each with the kind of address it
#: is (spec §4: a host name must resolve to a public address).
NON_PUBLIC: Final = (
    ("127.0.0.2", "loopback"),
    ("10.0.0.1", "private"),
    ("169.254.169.254", "metadata"),
    ("::1", "loopback"),
    ("fd00::1", "unique-local"),
)


@pytest.mark.parametrize(
    "address", [pytest.param(a, id=f"name-to-{kind}-{a}-400") for a, kind in NON_PUBLIC]
)
@pytest.mark.requirement("URL-RESOLVE-02")
def test_url_name_resolving_to_private_address_answered_400(
    api: ApiClient, profile: Profile, dns_server: DnsServer, canary: CanaryView, address: str
) -> None:
    """A callback host name that resolves only to a non-public address is refused with 400."""
    name = dns_server.set(f"private-{secrets.token_hex(5)}", [address])
    local = iut_on_this_machine(profile.base_url, profile.receiver.public_url)
    port = canary.port if local and host_is_this_machine(address) else 9
    url = f"http://{name}:{port}/conformance"
    response = api.request(
        "POST", IMAGES_PATH, json={"prompt": SUBMIT_PROMPT, **target_body("callback_url", url)}
    )
    if response.status_code != 400:
        fail(f"callback_url {url!r} ({name} -> {address}): expected 400, saw {describe(response)}")
    canary.assert_no_hits()


@pytest.mark.requirement("URL-RESOLVE-03")
def test_url_name_resolving_to_public_and_private_answered_400(
    api: ApiClient, receiver: Receiver, dns_server: DnsServer, canary: CanaryView
) -> None:
    """A callback name resolving to the (allowlisted) receiver and a private address is refused."""
    name = dns_server.set(f"mixed-{secrets.token_hex(5)}", [_receiver_ip(receiver), "10.0.0.1"])
    url = f"http://{name}:9/conformance"
    response = api.request(
        "POST", IMAGES_PATH, json={"prompt": SUBMIT_PROMPT, **target_body("callback_url", url)}
    )
    if response.status_code != 400:
        fail(
            f"callback_url {url!r} ({name} -> the receiver and 10.0.0.1): expected 400, "
            f"saw {describe(response)}"
        )
    canary.assert_no_hits()


@pytest.mark.requirement("URL-RESOLVE-04")
def test_url_name_whose_lookup_times_out_answered_400(
    api: ApiClient, dns_server: DnsServer
) -> None:
    """A callback host name the DNS server never answers is refused with 400, as a name
    that does not resolve is: not accepted, not a server error (an interpretation)."""
    name = dns_server.silence(f"silent-{secrets.token_hex(5)}")
    url = f"http://{name}:9/conformance"
    body = {"prompt": SUBMIT_PROMPT, **target_body("callback_url", url)}
    what = f"callback_url {url!r} (a name whose lookup never gets an answer): expected 400"
    response = answer_or_fail(api, what, "POST", IMAGES_PATH, json=body)
    if response.status_code != 400:
        fail(f"{what}, saw {describe(response)}")
