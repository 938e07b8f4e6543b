"""The delivery request (spec §6 Delivery request): method POST to the target as given,
Content-Type application/json, and the X-Service-* headers, whose values must agree with
the signed body (only the timestamp and the body are signed, so the headers are checked
against ``event``, ``id`` and ``data.generation_id``).

The spec writes the headers' brand word as "Service" and says a deployment's own word was
replaced; the checks read and name them with the profile's ``[wire] header_brand``
(``Delivery.header``, ``profile.wire.header``).
"""

from __future__ import annotations

import itertools
import re
from urllib.parse import parse_qsl

import pytest

from conformance.checks.scenarios import (
    BY_TARGET,
    BY_TARGET_AND_FAILED,
    BY_TARGET_AND_RETRIED,
    CALLBACK,
    INLINE,
    RETRIED,
)
from conformance.findings import fail
from conformance.observe.events import EventLab, Generated, Scenario
from conformance.observe.receiver import Delivery
from conformance.observe.signatures import SignatureFormatError, parse_signature_header
from conformance.run.fixtures.labs import Labs
from conformance.target.profile import Profile
from conformance.target.wire import DELIVERY_HEADER_NAMES

#: A target URL with a query string: the delivery must keep it (DLV-METHOD-01).
QUERY = "source=conformance&note=a%20b"
WITH_QUERY = Scenario(kind="webhook.url", query=QUERY)


_DECIMAL = re.compile(r"[0-9]+")
# A delivery header under some brand word (DLV-HDR-08 names another word than declared).
_BRANDED = re.compile(r"x-([a-z0-9-]+)-(event|delivery|attempt|generation|signature)")


@pytest.fixture(scope="module")
def lab(labs: Labs) -> EventLab:
    return labs.events("delivery-headers", INLINE, CALLBACK, RETRIED)


def _other_brands(delivery: Delivery) -> dict[str, list[str]]:
    """Delivery headers under a brand word other than the declared one, by that word (as
    received: the receiver keeps the names' spelling)."""
    declared = delivery.wire.header_brand.lower()
    found: dict[str, list[str]] = {}
    for raw_name, _ in delivery.headers.raw:
        name = raw_name.decode("latin-1")
        match = _BRANDED.fullmatch(name.lower())
        if match and match.group(1) != declared:
            brand = name[2 : 2 + len(match.group(1))]
            found.setdefault(brand, []).append(name)
    return found


def _brand_hint(delivery: Delivery) -> str:
    """Why a declared header may be missing: the headers came under another brand word."""
    others = _other_brands(delivery)
    if not others:
        return ""
    word, names = next(iter(others.items()))
    return (
        f" (headers with another brand word: {names}; the profile declares "
        f'{delivery.wire.header_brand!r}: set [wire] header_brand = "{word}" with the '
        "deployment's spelling if that is its brand word)"
    )


def _header(delivery: Delivery, name: str, generated: Generated) -> str:
    """The value of delivery header *name* (``"Event"`` …, or a plain header name such as
    ``Content-Type``); its absence fails the check, naming a branded variant."""
    shown = delivery.wire.header(name) if name in DELIVERY_HEADER_NAMES else name
    value: str | None = delivery.headers.get(shown)
    if value is None:
        fail(
            f"expected a {shown} header, saw none{_brand_hint(delivery)}; "
            f"headers {sorted(delivery.headers)} {generated.describe()}"
        )
    return value


def _assert_header_equals(
    delivery: Delivery,
    name: str,
    expected: object,
    what: str,
    generated: Generated,
) -> None:
    """Delivery header *name* equals *expected* (*what* it is: "the body's event"); a
    missing header or another value fails the check."""
    value = _header(delivery, name, generated)
    if value != expected:
        fail(
            f"expected {delivery.wire.header(name)} to equal {what} {expected!r}, "
            f"saw {value!r} {generated.describe()}"
        )


@pytest.mark.requirement("DLV-METHOD-01")
def test_delivery_is_post_to_target_path_and_query(lab: EventLab) -> None:
    """A delivery is an HTTP POST to the target URL, with its path and query as given."""
    generated = lab.get(WITH_QUERY)
    delivery = generated.first
    assert delivery.method == "POST", (
        f"DLV-METHOD-01: expected POST, saw {delivery.method} {generated.describe()}"
    )
    assert delivery.path == generated.endpoint.path, (
        f"DLV-METHOD-01: expected the path {generated.endpoint.path}, saw {delivery.path}"
    )
    assert parse_qsl(delivery.query) == parse_qsl(QUERY), (
        f"DLV-METHOD-01: expected the query {QUERY!r}, saw {delivery.query!r}"
    )


@pytest.mark.parametrize("scenario", BY_TARGET)
@pytest.mark.requirement("DLV-HDR-01")
def test_delivery_content_type_is_application_json(lab: EventLab, scenario: Scenario) -> None:
    """A delivery carries Content-Type: application/json."""
    generated = lab.get(scenario)
    value = _header(generated.first, "Content-Type", generated)
    media_type = value.split(";", 1)[0].strip().lower()
    assert media_type == "application/json", (
        f"DLV-HDR-01: expected Content-Type application/json, saw {value!r} {generated.describe()}"
    )


@pytest.mark.parametrize("scenario", BY_TARGET_AND_FAILED)
@pytest.mark.requirement("DLV-HDR-02")
def test_event_header_equals_body_event(lab: EventLab, scenario: Scenario) -> None:
    """X-Service-Event equals the body's event."""
    generated = lab.get(scenario)
    event = generated.envelope().get("event")
    what = "the body's event"
    _assert_header_equals(generated.first, "Event", event, what, generated)


@pytest.mark.parametrize("scenario", BY_TARGET_AND_RETRIED)
@pytest.mark.requirement("DLV-HDR-03")
def test_delivery_header_equals_body_id(lab: EventLab, scenario: Scenario) -> None:
    """X-Service-Delivery equals the body's id, on every attempt."""
    generated = lab.get(scenario)
    for index, delivery in enumerate(generated.deliveries):
        body_id = generated.envelope(index).get("id")
        what = f"the body's id of attempt {index + 1}"
        _assert_header_equals(delivery, "Delivery", body_id, what, generated)


@pytest.mark.parametrize("scenario", BY_TARGET)
@pytest.mark.requirement("DLV-HDR-04")
def test_first_attempt_header_is_1(lab: EventLab, profile: Profile, scenario: Scenario) -> None:
    """The first attempt of a delivery carries X-Service-Attempt: 1."""
    generated = lab.get(scenario)
    value = _header(generated.first, "Attempt", generated)
    assert value == "1", (
        f"DLV-HDR-04: expected {profile.wire.header('Attempt')} '1' on the first attempt, "
        f"saw {value!r} {generated.describe()}"
    )


@pytest.mark.requirement("DLV-HDR-05")
def test_retry_attempt_header_counts_up_by_one(lab: EventLab, profile: Profile) -> None:
    """Each retry carries X-Service-Attempt one higher than the attempt before."""
    generated = lab.get(RETRIED)
    values = [_header(delivery, "Attempt", generated) for delivery in generated.deliveries]
    assert all(_DECIMAL.fullmatch(v) for v in values), (
        f"DLV-HDR-05: expected decimal integers, saw {values} {generated.describe()}"
    )
    numbers = [int(v) for v in values]
    steps = [later - earlier for earlier, later in itertools.pairwise(numbers)]
    assert steps == [1] * (len(numbers) - 1), (
        f"DLV-HDR-05: expected each retry's {profile.wire.header('Attempt')} one higher "
        f"than the one before (1, 2, 3), saw {values} {generated.describe()}"
    )


@pytest.mark.parametrize("scenario", BY_TARGET)
@pytest.mark.requirement("DLV-HDR-06")
def test_generation_header_equals_generation_id(lab: EventLab, scenario: Scenario) -> None:
    """X-Service-Generation equals the generation id, the id of the submit's 202 (the
    body's data.generation_id is judged by its own check)."""
    generated = lab.get(scenario)
    what, expected = "the generation id of the submit's 202", generated.generation_id
    _assert_header_equals(generated.first, "Generation", expected, what, generated)


@pytest.mark.parametrize("scenario", BY_TARGET_AND_RETRIED)
@pytest.mark.requirement("DLV-HDR-07")
def test_signature_header_has_spec_form(lab: EventLab, scenario: Scenario) -> None:
    """X-Service-Signature has the form t=<unix_timestamp>,v1=<hex_digest> on every attempt."""
    generated = lab.get(scenario)
    for index, delivery in enumerate(generated.deliveries):
        value = _header(delivery, "Signature", generated)
        try:
            parse_signature_header(value)
        except SignatureFormatError as error:
            fail(f"attempt {index + 1}: {error} {generated.describe()}")


@pytest.mark.requirement("DLV-HDR-08")
def test_delivery_headers_use_declared_brand_word(lab: EventLab, profile: Profile) -> None:
    """The delivery headers are named X-<brand>-* with the brand word the profile declares
    (the spec's document writes it as "Service")."""
    generated = lab.get(INLINE)
    delivery = generated.first
    expected = profile.wire.delivery_headers
    missing = [name for name in expected if name not in delivery.headers]
    assert not missing, (
        f"DLV-HDR-08: expected the headers {list(expected)}, missing {missing}"
        f"{_brand_hint(delivery)} {generated.describe()}"
    )
