"""Callback URL rules against generated variants (spec §4 "Callback URL requirements", §7).

Hypothesis builds URLs from small pieces (:mod:`conformance.strategies`): an address
drawn from one non-public range of ``fixtures/special_purpose_addresses.yaml`` (its
ends drawn often), in one of its spellings or IPv6 embeddings; schemes other than http(s);
lengths just past 2048; names under ``.invalid``. Every generated URL is one the
implementation must refuse with 400 (none is a deliverable public target), and the
canaries must see no connection. Runs are bounded and derandomised: the same URLs on
every run, EXAMPLES per case, no shrinking (a failure names the URL it sent).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any, Final
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from conformance.asserts import describe
from conformance.catalog import Level, load_catalog
from conformance.client import ApiClient
from conformance.events import TargetKind, target_body
from conformance.findings import fail
from conformance.operations import SUBMIT_PROMPT
from conformance.profile import Profile
from conformance.receiver import CanaryView, Receiver
from conformance.strategies import (
    FIELDS,
    AddressRange,
    aim,
    bad_schemes,
    embedded_ipv6_hosts,
    ipv4_in,
    ipv4_spellings,
    ipv6_in,
    iut_on_this_machine,
    overlong_urls,
    range_requirement,
    reject_ranges,
    unresolvable_hosts,
)

#: Spec §4: image submits accept callback_url and webhook (scope images:generate).
SUBMIT: Final = "/v1/images/generate"
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


def _cited(field: str, *ids: str) -> list[str]:
    """The ids a case cites: with webhook.url, a broken MUST rule also breaks TARGET-BIND-03."""
    catalog = load_catalog()
    cited = list(ids)
    if field == "webhook.url" and all(catalog[i].level is Level.MUST for i in ids):
        cited.append("TARGET-BIND-03")
    return cited


def _range_cases() -> Iterator[Any]:
    for entry in reject_ranges():
        requirement = range_requirement(entry)
        assert requirement is not None
        for field in FIELDS:
            if entry.network.version == 6:
                forms = ["ipv6"]
            elif entry.rule == "loopback":
                forms = ["dotted", "spelled"]  # URL-LOOP-01 and URL-LOOP-03 apart
            else:
                forms = ["any-spelling"]
            for form in forms:
                ids = ("URL-LOOP-03",) if form == "spelled" else (requirement,)
                yield pytest.param(
                    entry,
                    field,
                    form,
                    id=f"{field}-{entry.slug}-{form}-400",
                    marks=pytest.mark.requirement(*_cited(field, *ids)),
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
    api: ApiClient, canary: CanaryView, field: TargetKind, url: str, case: str
) -> None:
    """Submit *url* in *field*: a 400 is expected, and no connection to the canaries. A
    failure is about every id the case cites (a webhook.url case also TARGET-BIND-03);
    *case* says which rule the URL breaks, for the message."""
    body = {"prompt": SUBMIT_PROMPT, **target_body(field, url)}
    response = api.request("POST", SUBMIT, json=body)
    if response.status_code != 400:
        fail(f"{case}, {field}={url[:160]!r}: expected 400, saw {describe(response)}")
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
    cited = "URL-LOOP-03" if form == "spelled" else str(range_requirement(entry))
    _submit_expecting_400(api, canary, field, url, cited)


def _embedding_cases() -> Iterator[Any]:
    for field in FIELDS:
        for kind, requirement in (("mapped", "URL-MAPPED-01"), ("translated", "URL-MAPPED-02")):
            yield pytest.param(
                field,
                kind,
                id=f"{field}-{kind}-400",
                marks=pytest.mark.requirement(*_cited(field, requirement)),
            )


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
    ranges = [entry for entry in reject_ranges() if entry.network.version == 4]
    entry = data.draw(st.sampled_from(ranges), label="range")
    address = data.draw(ipv4_in(entry, _receiver_address(receiver)), label="embedded")
    forms = embedded_ipv6_hosts(address)
    if kind == "mapped":
        forms = forms.filter(lambda pair: pair[1] == "ipv4-mapped")
    else:
        forms = forms.filter(lambda pair: pair[1] != "ipv4-mapped")
    host = data.draw(forms, label="form")[0]
    url = aim(f"http://{host}:9/conformance", _canary_port(profile, canary))
    cited = "URL-MAPPED-01" if kind == "mapped" else "URL-MAPPED-02"
    _submit_expecting_400(api, canary, field, url, cited)


@pytest.mark.parametrize(
    "field",
    [pytest.param(f, marks=pytest.mark.requirement(*_cited(f, "URL-SCHEME-03"))) for f in FIELDS],
)
@BOUNDED
@given(scheme=bad_schemes())
def test_url_generated_scheme_not_http_answered_400(
    api: ApiClient, receiver: Receiver, canary: CanaryView, field: TargetKind, scheme: str
) -> None:
    """A callback URL on the receiver with a scheme other than http or https is refused."""
    authority = urlsplit(receiver.url_for("/")).netloc
    _submit_expecting_400(
        api, canary, field, f"{scheme}://{authority}/conformance-scheme", "URL-SCHEME-03"
    )


@pytest.mark.parametrize(
    "field",
    [pytest.param(f, marks=pytest.mark.requirement(*_cited(f, "URL-LEN-02"))) for f in FIELDS],
)
@BOUNDED
@given(data=st.data())
def test_url_generated_longer_than_2048_answered_400(
    api: ApiClient, receiver: Receiver, canary: CanaryView, field: TargetKind, data: st.DataObject
) -> None:
    """A callback URL on the receiver longer than 2048 characters is refused with 400."""
    url = data.draw(overlong_urls(receiver.url_for("").rstrip("/")), label="url")
    _submit_expecting_400(api, canary, field, url, f"URL-LEN-02 ({len(url)} characters)")


@pytest.mark.parametrize(
    "field",
    [pytest.param(f, marks=pytest.mark.requirement(*_cited(f, "URL-RESOLVE-01"))) for f in FIELDS],
)
@BOUNDED
@given(host=unresolvable_hosts())
def test_url_generated_unresolvable_host_answered_400(
    api: ApiClient, canary: CanaryView, field: TargetKind, host: str
) -> None:
    """A callback URL whose host name is under .invalid (never resolves) is refused."""
    _submit_expecting_400(api, canary, field, f"http://{host}:9/conformance", "URL-RESOLVE-01")
