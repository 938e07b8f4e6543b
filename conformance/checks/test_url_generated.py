"""Callback URL rules against generated variants (spec §4 "Callback URL requirements", §7).

Hypothesis builds URLs from small pieces (:mod:`conformance.judge.strategies`): an address
drawn from one non-public range of ``fixtures/special_purpose_addresses.yaml`` (its
ends drawn often), in one of its spellings or IPv6 embeddings; schemes other than http(s);
lengths just past 2048; names under ``.invalid``. Every generated URL is one the
implementation must refuse with 400 (none is a deliverable public target), and the
canaries must see no connection. Runs are bounded and derandomised: the same URLs on
every run, EXAMPLES per case, no shrinking (a failure names the URL it sent).

A range case cites the requirement the address tables name for its range, and the tables
rank it: a range the spec names or every common classifier agrees on is a MUST (in
webhook.url it also breaks TARGET-BIND-03); a recent or disputed registry entry is an
interpretation, so accepting it warns, and the message names the entry, its RFC and year.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any, Final
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from conformance.findings import fail
from conformance.judge.asserts import describe
from conformance.judge.strategies import (
    FIELDS,
    AddressRange,
    aim,
    bad_schemes,
    case_ids,
    embedded_ipv6_hosts,
    embedding_requirement,
    ipv4_in,
    ipv4_spellings,
    ipv6_in,
    is_must,
    iut_on_this_machine,
    overlong_urls,
    reject_ranges,
    unresolvable_hosts,
)
from conformance.observe.events import TargetKind, target_body
from conformance.observe.receiver import CanaryView, Receiver
from conformance.target.client import ApiClient
from conformance.target.profile import Profile
from conformance.target.setup import IMAGES_PATH, SUBMIT_PROMPT

#: Generated URLs per parametrised case: enough to reach a range's edges and spellings,
#: few enough that the whole URL area stays well under a minute.
EXAMPLES: Final = 12

BOUNDED = settings(
    max_examples=EXAMPLES,
    derandomize=True,  # the same URLs on every run (xdist workers agree too)
    database=None,
    deadline=None,  # network round trips vary; the client's timeouts bound each one
    phases=(Phase.explicit, Phase.generate),  # no shrinking: every example is a request
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # api, canary: shared by the examples on purpose
        HealthCheck.filter_too_much,
        HealthCheck.too_slow,
    ],
)


#: Numeric spellings of a loopback address other than the dotted quad (127.2, 0x7f000002).
SPELLED_LOOPBACK: Final = "URL-LOOP-03"


def _range_ids(entry: AddressRange, form: str) -> tuple[str, ...]:
    """What a host drawn from *entry* breaks: the range's requirement (from the address
    tables, ranked there), or URL-LOOP-03 for a numeric spelling of loopback."""
    return (SPELLED_LOOPBACK,) if form == "spelled" else (str(entry.requirement),)


def _range_cases() -> Iterator[Any]:
    for entry in reject_ranges():
        for field in FIELDS:
            if entry.network.version == 6:
                forms = ["ipv6"]
            elif entry.rule == "loopback":
                forms = ["dotted", "spelled"]  # URL-LOOP-01 and URL-LOOP-03 apart
            else:
                forms = ["any-spelling"]
            for form in forms:
                yield pytest.param(
                    entry,
                    field,
                    form,
                    id=f"{field}-{entry.slug}-{form}-400",
                    marks=pytest.mark.requirement(*case_ids(field, *_range_ids(entry, form))),
                )


def _canary_port(profile: Profile, canary: CanaryView) -> int | None:
    on_this_machine = iut_on_this_machine(profile.base_url, profile.receiver.public_url)
    return canary.port if on_this_machine else None


def _receiver_address(receiver: Receiver) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The receiver's own address: public under the IUT's allowlist, so never drawn."""
    try:
        return [ipaddress.ip_address(receiver.host)]
    except ValueError:
        return []


def _submit_expecting_400(
    api: ApiClient, canary: CanaryView, field: TargetKind, url: str, why: str
) -> None:
    """Submit *url* in *field*: 400 expected (the failure names every id the case cites)."""
    body = {"prompt": SUBMIT_PROMPT, **target_body(field, url)}
    response = api.request("POST", IMAGES_PATH, json=body)
    if response.status_code != 400:
        fail(
            f"POST {IMAGES_PATH} with {field}={url[:160]!r} ({why}): expected 400, "
            f"saw {describe(response)}"
        )
    canary.assert_no_hits()


@pytest.mark.parametrize(("entry", "field", "form"), list(_range_cases()))
@BOUNDED
@given(data=st.data())
def test_url_generated_host_in_non_public_range_answered_400(
    api: ApiClient,
    profile: Profile,
    receiver: Receiver,
    canary: CanaryView,
    entry: AddressRange,
    field: TargetKind,
    form: str,
    data: st.DataObject,
) -> None:
    """A callback URL whose host is any address of a non-public range is refused with 400."""
    avoid = _receiver_address(receiver)
    if entry.network.version == 6:
        address6 = data.draw(ipv6_in(entry, avoid), label="address")
        host = data.draw(
            st.sampled_from([address6.compressed, address6.exploded, address6.compressed.upper()])
        )
        host = f"[{host}]"
    else:
        address4 = data.draw(ipv4_in(entry, avoid), label="address")
        spellings = ipv4_spellings(address4)
        if form == "dotted":
            spellings = spellings.filter(lambda pair: pair[1])
        elif form == "spelled":
            spellings = spellings.filter(lambda pair: not pair[1])
        host = data.draw(spellings, label="spelling")[0]
    url = aim(f"http://{host}:9/conformance", _canary_port(profile, canary))
    why = f"a numeric spelling in {entry.describe()}" if form == "spelled" else entry.judged()
    _submit_expecting_400(api, canary, field, url, why)


#: The two kinds of embedding the generated check tells apart: the IPv4-mapped form
#: reaches the IPv4 address itself (``equivalent``); the others go through a translator.
EMBEDDING_KINDS: Final = {"mapped": True, "translated": False}


def _embedding_cases() -> Iterator[Any]:
    for field in FIELDS:
        for kind, equivalent in EMBEDDING_KINDS.items():
            requirement = embedding_requirement(equivalent=equivalent)
            yield pytest.param(
                field,
                kind,
                id=f"{field}-{kind}-400",
                marks=pytest.mark.requirement(*case_ids(field, requirement)),
            )


def _embeddable_ranges(kind: str) -> list[AddressRange]:
    """IPv4 ranges whose addresses a case embeds. The mapped form is the IPv4 address
    itself, judged as firmly as its range: its MUST case embeds only MUST ranges."""
    ranges = [entry for entry in reject_ranges() if entry.network.version == 4]
    if kind == "mapped":
        return [entry for entry in ranges if is_must(str(entry.requirement))]
    return ranges


@pytest.mark.parametrize(("field", "kind"), list(_embedding_cases()))
@BOUNDED
@given(data=st.data())
def test_url_generated_ipv6_embedding_non_public_ipv4_answered_400(
    api: ApiClient,
    profile: Profile,
    receiver: Receiver,
    canary: CanaryView,
    field: TargetKind,
    kind: str,
    data: st.DataObject,
) -> None:
    """A callback URL whose IPv6 host embeds a non-public IPv4 address is refused with 400."""
    entry = data.draw(st.sampled_from(_embeddable_ranges(kind)), label="range")
    address = data.draw(ipv4_in(entry, _receiver_address(receiver)), label="embedded")
    forms = embedded_ipv6_hosts(address)
    if kind == "mapped":
        forms = forms.filter(lambda pair: pair[1] == "ipv4-mapped")
    else:
        forms = forms.filter(lambda pair: pair[1] != "ipv4-mapped")
    host = data.draw(forms, label="form")[0]
    url = aim(f"http://{host}:9/conformance", _canary_port(profile, canary))
    _submit_expecting_400(api, canary, field, url, f"embeds {address}, in {entry.describe()}")


@pytest.mark.parametrize(
    "field",
    [pytest.param(f, marks=pytest.mark.requirement(*case_ids(f, "URL-SCHEME-03"))) for f in FIELDS],
)
@BOUNDED
@given(scheme=bad_schemes())
def test_url_generated_scheme_not_http_answered_400(
    api: ApiClient, receiver: Receiver, canary: CanaryView, field: TargetKind, scheme: str
) -> None:
    """A callback URL on the receiver with a scheme other than http or https is refused."""
    authority = urlsplit(receiver.url_for("/")).netloc
    url = f"{scheme}://{authority}/conformance-scheme"
    _submit_expecting_400(api, canary, field, url, "scheme neither http nor https")


@pytest.mark.parametrize(
    "field",
    [pytest.param(f, marks=pytest.mark.requirement(*case_ids(f, "URL-LEN-02"))) for f in FIELDS],
)
@BOUNDED
@given(data=st.data())
def test_url_generated_longer_than_2048_answered_400(
    api: ApiClient, receiver: Receiver, canary: CanaryView, field: TargetKind, data: st.DataObject
) -> None:
    """A callback URL on the receiver longer than 2048 characters is refused with 400."""
    url = data.draw(overlong_urls(receiver.url_for("").rstrip("/")), label="url")
    _submit_expecting_400(api, canary, field, url, f"{len(url)} characters")


@pytest.mark.parametrize(
    "field",
    [
        pytest.param(f, marks=pytest.mark.requirement(*case_ids(f, "URL-RESOLVE-01")))
        for f in FIELDS
    ],
)
@BOUNDED
@given(host=unresolvable_hosts())
def test_url_generated_unresolvable_host_answered_400(
    api: ApiClient, canary: CanaryView, field: TargetKind, host: str
) -> None:
    """A callback URL whose host name is under .invalid (never resolves) is refused."""
    url = f"http://{host}:9/conformance"
    _submit_expecting_400(api, canary, field, url, "a name under .invalid never resolves")
