"""What a deployment puts on the wire where the spec leaves it a word or a reading.

The spec writes the delivery headers ``X-Service-*`` and says the brand word was replaced
by "Service" in the document (§6); it says "HMAC-SHA256 with the webhook secret" without
saying how the secret string becomes the key; and it says the per-minute limit counts
requests without saying which. A target profile declares each (``[wire]``, ``[rate]``);
the defaults are the spec's literal readings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, get_args

__all__ = [
    "DELIVERY_HEADER_NAMES",
    "RATE_REQUESTS",
    "SECRET_KEYINGS",
    "RateProfile",
    "RateRequest",
    "SecretKeying",
    "WireProfile",
]

#: The delivery headers of spec §6 by the word after the brand: ``X-<brand>-<name>``.
DELIVERY_HEADER_NAMES: Final = ("Event", "Delivery", "Attempt", "Generation", "Signature")

#: How a signing secret becomes the HMAC key (spec §6 Signature 2, "HMAC-SHA256 with the
#: webhook secret"): ``utf8`` keys with the whole secret string's UTF-8 bytes, prefix
#: included (the literal reading, Stripe's way); ``base64-after-prefix`` base64-decodes the
#: text after the ``whsec_`` prefix (the whole text when it has none), as the Standard
#: Webhooks libraries do. ``conformance.observe.signatures`` applies them.
SecretKeying = Literal["utf8", "base64-after-prefix"]
SECRET_KEYINGS: Final[tuple[SecretKeying, ...]] = get_args(SecretKeying)

#: The request a check sends to exercise the per-minute limit (spec §8, "Requests per
#: minute | Per tier, per API key, rolling window"): ``reads`` (GET /v1/account/tier) or
#: ``submits`` (submits refused before any credit is spent).
RateRequest = Literal["reads", "submits"]
RATE_REQUESTS: Final[tuple[RateRequest, ...]] = get_args(RateRequest)


@dataclass(frozen=True)
class WireProfile:
    """How the deployment puts its deliveries on the wire where the spec leaves it a word.

    The spec writes the delivery headers ``X-Service-*`` and says the brand word was
    replaced by "Service" in the document (§6): a deployment sends its own word
    (``X-Acme-Signature``), named here once. The HMAC keying of a signing secret is
    declared too (:data:`SecretKeying`); signatures are verified with it.
    """

    header_brand: str = "Service"
    secret_keying: SecretKeying = "utf8"  # noqa: S105 (a keying's name, not a secret)

    def header(self, name: str) -> str:
        """The deployment's name of a delivery header: ``header("Signature")`` gives
        ``X-Acme-Signature`` for the brand word ``Acme``."""
        if name not in DELIVERY_HEADER_NAMES:
            raise ValueError(f"{name!r} is not a delivery header; one of {DELIVERY_HEADER_NAMES}")
        return f"X-{self.header_brand}-{name}"

    @property
    def delivery_headers(self) -> tuple[str, ...]:
        """The five delivery headers of spec §6, as the deployment names them."""
        return tuple(self.header(name) for name in DELIVERY_HEADER_NAMES)


@dataclass(frozen=True)
class RateProfile:
    """Which request exercises the per-minute limit (:data:`RateRequest`)."""

    request: RateRequest = "reads"
