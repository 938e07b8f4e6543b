"""The signature construction (spec §6 Signature): HMAC-SHA256 with the webhook secret
over ``<t>.<raw body>``, hex-encoded after ``v1=``, on every attempt.

Verification is :func:`conformance.observe.signatures.verify_delivery`: the raw bytes as
received, the secret keyed as the profile declares (``[wire] secret_keying``: by default
its UTF-8 bytes, ``whsec_`` included), constant-time comparison. A mismatch names what
explains it (the other keying, with the profile setting that would declare it; a
re-serialized body; another key's secret).
"""

from __future__ import annotations

import time

import pytest

from conformance.checks import scenarios
from conformance.observe.events import (
    EventLab,
    Generated,
    Scenario,
    per_key_label,
    per_key_secrets,
    signing_secret,
)
from conformance.observe.receiver import Delivery
from conformance.observe.signatures import (
    KEYING_WORDS,
    Verification,
    resigning,
    verify_delivery,
)
from conformance.run.fixtures.labs import Labs
from conformance.secrets import Secret
from conformance.target.profile import Profile

#: SIG-TS-01's window (an interpretation: Stripe's default tolerance, 300 s).
TOLERANCE_WINDOW_SECONDS = 300


@pytest.fixture(scope="module")
def lab(labs: Labs) -> EventLab:
    return labs.events("signature-hmac", scenarios.INLINE, scenarios.CALLBACK, scenarios.RETRIED)


def secret_for(profile: Profile, generated: Generated) -> tuple[str, Secret]:
    """The secret that must sign this generation's deliveries, and its label (spec §5.6):
    the registered webhook's whsec_ secret, else the submitting key's per-key secret."""
    if generated.webhook is not None:
        return "the registered webhook's whsec_ secret", generated.webhook.secret
    role = generated.scenario.role
    return per_key_label(role), signing_secret(profile, role)


def verify(profile: Profile, generated: Generated, delivery: Delivery) -> Verification:
    """Verify one delivery of *generated* with the secret that must sign it."""
    label, secret = secret_for(profile, generated)
    others = {name: other for name, other in per_key_secrets(profile).items() if name != label}
    return verify_delivery(delivery, secret, label=label, others=others)


@pytest.mark.parametrize("scenario", scenarios.BY_TARGET_AND_FAILED)
@pytest.mark.requirement("SIG-HMAC-01", "SIG-STRING-01")
def test_signature_verifies_over_raw_body(
    lab: EventLab, profile: Profile, scenario: Scenario
) -> None:
    """v1 is the hex HMAC-SHA256, under the webhook secret, of t, a dot and the raw body."""
    generated = lab.get(scenario)
    result = verify(profile, generated, generated.first)
    assert result.ok, f"SIG-HMAC-01/SIG-STRING-01: {result.message} {generated.describe()}"


@pytest.mark.requirement("SIG-HMAC-02")
def test_signature_verifies_on_every_attempt(lab: EventLab, profile: Profile) -> None:
    """Every attempt of a delivery, retries included, carries a signature that verifies."""
    generated = lab.get(scenarios.RETRIED)
    failures = [
        f"attempt {index + 1}: {result.message}"
        for index, delivery in enumerate(generated.deliveries)
        if not (result := verify(profile, generated, delivery)).ok
    ]
    assert not failures, f"SIG-HMAC-02: {'; '.join(failures)} {generated.describe()}"


@pytest.mark.parametrize("scenario", scenarios.BY_TARGET)
@pytest.mark.requirement("SIG-HMAC-03")
def test_signature_keyed_with_literal_secret(
    lab: EventLab, profile: Profile, scenario: Scenario
) -> None:
    """The HMAC key is the secret string as shown, whsec_ included (an interpretation);
    a delivery signed another way is named by the keying that matches. A deployment that
    declares the other keying (and signs so) is named by that choice."""
    generated = lab.get(scenario)
    result = verify(profile, generated, generated.first)
    assert result.ok, f"SIG-HMAC-03: {result.message} {generated.describe()}"
    declared = profile.wire.secret_keying
    assert declared == "utf8", (
        f"SIG-HMAC-03: the deployment signs with {KEYING_WORDS[declared]}, as its profile "
        f'declares ([wire] secret_keying = "{declared}"); the literal reading of "HMAC-SHA256 '
        f'with the webhook secret" keys with {KEYING_WORDS["utf8"]} {generated.describe()}'
    )


@pytest.mark.parametrize("scenario", scenarios.BY_TARGET)
@pytest.mark.requirement("SIG-HEX-01")
def test_signature_hex_is_lowercase(lab: EventLab, profile: Profile, scenario: Scenario) -> None:
    """The v1 hex digest is lowercase (an interpretation: "hex-encoded" fixes no case)."""
    generated = lab.get(scenario)
    result = verify(profile, generated, generated.first)
    assert result.parsed is not None, f"SIG-HEX-01: {result.message}"
    assert result.parsed.lowercase, (
        f"SIG-HEX-01: expected a lowercase hex digest, saw {result.parsed.digest_hex!r} "
        f"{generated.describe()}"
    )


def _wall_clock(arrived_at: float) -> float:
    """The wall-clock time of a monotonic arrival time (the receiver stamps monotonic)."""
    return time.time() - (time.monotonic() - arrived_at)


@pytest.mark.parametrize("scenario", scenarios.BY_TARGET_AND_RETRIED)
@pytest.mark.requirement("SIG-TS-01")
def test_signature_timestamp_is_current(
    lab: EventLab, profile: Profile, scenario: Scenario
) -> None:
    """Each attempt's t is within 300 s of the receiver's clock (an interpretation)."""
    generated = lab.get(scenario)
    for index, delivery in enumerate(generated.deliveries):
        result = verify(profile, generated, delivery)
        assert result.parsed is not None, f"SIG-TS-01: {result.message}"
        skew = result.parsed.timestamp - _wall_clock(delivery.arrived_at)
        hint = " (t looks like milliseconds)" if result.parsed.timestamp > 10**11 else ""
        assert abs(skew) <= TOLERANCE_WINDOW_SECONDS, (
            f"SIG-TS-01: attempt {index + 1}: expected t within {TOLERANCE_WINDOW_SECONDS} s "
            f"of arrival, saw t={result.parsed.timestamp_text}, {skew:+.0f} s off{hint}"
        )


@pytest.mark.requirement("SIG-TS-02")
def test_retry_signed_with_its_own_time(lab: EventLab, profile: Profile) -> None:
    """Each retry is signed afresh: its t is the time of that attempt (an interpretation)."""
    generated = lab.get(scenarios.RETRIED)
    first, last = generated.deliveries[0], generated.deliveries[-1]
    parsed = [verify(profile, generated, d).parsed for d in (first, last)]
    assert parsed[0] is not None and parsed[1] is not None, (
        f"SIG-TS-02: a signature header is malformed {generated.describe()}"
    )
    # About 3 s apart: backoff 1 s, then 2 s.
    resigned = resigning(
        (first.arrived_at, parsed[0]),
        (last.arrived_at, parsed[1]),
        profile.timing.tolerance_seconds,
    )
    assert resigned.afresh, (
        f"SIG-TS-02: expected the last retry's t about {resigned.gap:.1f} s after the first's "
        f"(signed at each attempt), saw t moved by {resigned.moved} s {generated.describe()}"
    )
