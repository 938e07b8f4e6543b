"""Which secret signs a delivery (spec §5.6, §2 Registered webhook): per-request targets
with the per-key secret of the submitting key (stable, distinct per key, shown in the
console's key detail view, never returned by /v1), registered webhooks with their own
whsec_ secret.
"""

from __future__ import annotations

import base64
import dataclasses
from urllib.parse import quote

import httpx
import pytest

from conformance.checks.scenarios import INLINE, PER_REQUEST, REGISTERED
from conformance.judge.asserts import nested_values
from conformance.observe.events import (
    EventLab,
    Scenario,
    other_key,
    per_key_label,
    per_key_secrets,
    signing_secret,
    target_body,
)
from conformance.observe.receiver import Endpoint
from conformance.observe.signatures import verify_delivery
from conformance.observe.timing import delivery_deadline
from conformance.run.fixtures.labs import Labs
from conformance.secrets import Secret
from conformance.target.adapters import Adapter
from conformance.target.client import ApiClient
from conformance.target.profile import Profile
from conformance.target.setup import IMAGES_PATH, SUBMIT_PROMPT


@pytest.fixture(scope="module")
def lab(labs: Labs) -> EventLab:
    return labs.events("signature-keys", INLINE)


@pytest.mark.parametrize("scenario", PER_REQUEST)
@pytest.mark.requirement("SIG-KEY-01")
def test_per_request_delivery_signed_with_submitting_keys_secret(
    lab: EventLab, profile: Profile, scenario: Scenario
) -> None:
    """A webhook.url or callback_url delivery verifies with the per-key secret of the key
    that submitted it (a key other than the primary, so the key, not the account, counts)."""
    role = other_key(profile, "primary").role
    generated = lab.get(dataclasses.replace(scenario, role=role))
    result = verify_delivery(
        generated.first,
        signing_secret(profile, role),
        label=per_key_label(role),
        others=per_key_secrets(profile, but=role),
    )
    assert result.ok, f"SIG-KEY-01: {result.message} {generated.describe()}"


@pytest.mark.requirement("SIG-KEY-02")
def test_per_key_secret_stable_across_deliveries(
    lab: EventLab, api: ApiClient, endpoint: Endpoint, profile: Profile
) -> None:
    """Two deliveries of one key's generations, made at different times, verify with the
    same per-key secret."""
    earlier = lab.get(INLINE)
    body = {"prompt": SUBMIT_PROMPT, **target_body("webhook.url", endpoint.url)}
    response = api.request("POST", IMAGES_PATH, json=body)
    assert response.status_code == 202, f"setup: the submit answered {response.status_code}"
    later = endpoint.wait_for(1, timeout=delivery_deadline(profile))[0]
    secret = signing_secret(profile, "primary")
    results = {
        "earlier": verify_delivery(earlier.first, secret, label=per_key_label("primary")),
        "later": verify_delivery(
            later,
            secret,
            label=per_key_label("primary"),
            others=per_key_secrets(profile, but="primary"),
        ),
    }
    failing = {when: r.message for when, r in results.items() if not r.ok}
    assert not failing, f"SIG-KEY-02: expected both deliveries to verify, saw {failing}"


@pytest.mark.requirement("SIG-KEY-03")
def test_per_key_secret_distinct_per_key(lab: EventLab, profile: Profile) -> None:
    """A delivery for one key's generation verifies with no other key's secret."""
    other = other_key(profile, "primary")
    mine = signing_secret(profile, "primary")
    theirs = signing_secret(profile, other.role)
    assert mine != theirs, (
        f"SIG-KEY-03: the profile gives key roles 'primary' and {other.role!r} the same "
        "signing secret (the console shows one secret for two keys)"
    )
    for role in ("primary", other.role):
        generated = lab.get(Scenario(kind="webhook.url", role=role))
        delivery = generated.first
        crossed = [
            label
            for label, wrong in per_key_secrets(profile, but=role).items()
            if wrong != signing_secret(profile, role) and verify_delivery(delivery, wrong).ok
        ]
        assert not crossed, (
            f"SIG-KEY-03: a delivery of key role {role!r} verifies with {crossed} "
            f"{generated.describe()}"
        )


@pytest.mark.console
@pytest.mark.requirement("SIG-KEY-04")
def test_key_detail_view_shows_signing_secret(
    lab: EventLab, adapter: Adapter, profile: Profile
) -> None:
    """The console's key detail view shows a secret that verifies the key's deliveries."""
    key_id = profile.key("primary").key_id
    if key_id is None:
        pytest.skip("needs keys.primary.key_id in the profile (to open its detail view)")
    detail = adapter.key_detail("primary", key_id)
    generated = lab.get(INLINE)
    delivery = generated.first
    strings = [value for value in nested_values(detail.body) if isinstance(value, str)]
    verifying = [value for value in strings if verify_delivery(delivery, value).ok]
    assert verifying, (
        "SIG-KEY-04: expected the key detail view to show the secret that signs the key's "
        f"deliveries; none of its values verifies {generated.describe()}"
    )


def _forms(secret: str) -> dict[str, bytes]:
    """A secret as it could appear in a response: plain, URL-encoded, base64."""
    raw = secret.encode("utf-8")
    return {
        "as is": raw,
        "URL-encoded": quote(secret, safe="").encode("ascii"),
        "base64": base64.b64encode(raw),
        "base64url": base64.urlsafe_b64encode(raw).rstrip(b"="),
    }


def _leaks(response: httpx.Response, secrets: dict[str, Secret]) -> list[str]:
    """Where a per-key secret shows in *response* (body or header), by label and form."""
    haystacks = {"body": response.content}
    haystacks.update({f"header {k}": v.encode() for k, v in response.headers.items()})
    found = []
    for label, secret in secrets.items():
        for form, needle in _forms(secret.reveal()).items():
            for where, hay in haystacks.items():
                if needle in hay:
                    found.append(f"{label} ({form}) in the {where}")
    return found


@pytest.mark.requirement("SIG-KEY-05")
def test_per_key_secret_never_in_v1_response(
    lab: EventLab, api: ApiClient, profile: Profile
) -> None:
    """No /v1 response, success or error, body or header, holds a per-key secret."""
    secrets = per_key_secrets(profile)
    if not secrets:
        signing_secret(profile, "primary")  # raises the skip with its fix
    generated = lab.get(INLINE)
    gen = generated.generation_id
    delivery_id = generated.first.header("Delivery") or "evt_0"
    probes = [
        ("POST", IMAGES_PATH, {"prompt": SUBMIT_PROMPT}),
        (
            "POST",
            IMAGES_PATH,
            {"prompt": SUBMIT_PROMPT, "callback_url": "ftp://127.0.0.2:9/"},
        ),
        ("GET", f"/v1/generations/{gen}", None),
        ("GET", f"/v1/generations/{gen}/deliveries", None),
        ("GET", "/v1/generations/gen_conformance_unknown", None),
        ("GET", "/v1/account/tier", None),
        ("POST", f"/v1/webhooks/deliveries/{delivery_id}/redeliver", None),
    ]
    leaks = []
    for method, path, body in probes:
        response = api.request(method, path, json=body)
        leaks += [
            f"{method} {path} ({response.status_code}): {w}" for w in _leaks(response, secrets)
        ]
    assert not leaks, "SIG-KEY-05: per-key signing secrets appear in /v1 responses: " + "; ".join(
        leaks
    )


@pytest.mark.console
@pytest.mark.requirement("SIG-HOOK-01")
def test_registered_delivery_signed_with_whsec_secret(lab: EventLab, profile: Profile) -> None:
    """A webhook.id delivery verifies with the webhook's whsec_ secret, not the key's."""
    generated = lab.get(REGISTERED)
    assert generated.webhook is not None
    delivery = generated.first
    result = verify_delivery(
        delivery,
        generated.webhook.secret,
        label="the registered webhook's whsec_ secret",
        others=per_key_secrets(profile),
    )
    assert result.ok, f"SIG-HOOK-01: {result.message} {generated.describe()}"
    per_key = verify_delivery(delivery, signing_secret(profile, "primary"))
    assert not per_key.ok, "SIG-HOOK-01: the delivery also verifies with the per-key secret"
