"""The fault registry: deliberate, named deviations from the spec.

Each fault breaks exactly one catalogued requirement (``conformance/requirements.yaml``)
so the suite can prove it catches that deviation. Start the service with
``--fault NAME`` (repeatable); ``python -m reference faults`` lists them. With no fault
configured every check is a lookup in an empty frozenset.

To add a fault: append one ``Fault(...)`` line to ``_REGISTRY`` below (keep the table
sorted by owner, then name) and make the code path ask ``faults.on("name")``. A test
(``tests/reference/test_faults.py``) checks every id exists in the catalog and that every
fault changes behaviour.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["FAULTS", "Fault", "Faults", "UnknownFault"]


@dataclass(frozen=True)
class Fault:
    """One injectable deviation: its name, the requirement id it violates, what it does."""

    name: str
    requirement_id: str
    description: str


_REGISTRY: tuple[Fault, ...] = (
    # --- service core (engineer CORE) ---
    Fault("api-key-opens-console", "CON-AUTH-01", "an API key is accepted on /api console paths"),
    Fault("concurrency-not-enforced", "RATE-CONC-01", "the per-tier concurrency limit is ignored"),
    Fault("credit-cap-not-enforced", "RATE-CREDIT-01", "the daily credit cap is ignored"),
    Fault(
        "credits-spent-before-validation",
        "TGT-CREDIT-01",
        "credits are spent before the delivery target is validated (and kept on 400/404)",
    ),
    Fault("failed-not-refunded", "GEN-REFUND-01", "a failed generation keeps its credits"),
    Fault(
        "failure-output-url-set",
        "EVT-DATA-01",
        "a failed generation carries an output_url and no error_message",
    ),
    Fault("generation-id-missing", "GEN-SUBMIT-01", "the 202 response of a submit has no id"),
    Fault("key-limit-not-enforced", "KEY-LIMIT-01", "an account may hold more than 10 keys"),
    Fault("key-prefix-wrong", "KEY-PREFIX-01", "new API keys lack the <key_prefix>_ prefix"),
    Fault("key-shown-again", "KEY-ONCE-01", "the key detail view repeats the full secret value"),
    Fault("missing-retry-after", "RATE-HDR-01", "429 responses lack the Retry-After header"),
    Fault(
        "rate-limit-headers-missing",
        "RATE-HDR-02",
        "429 responses lack the X-RateLimit-* headers",
    ),
    Fault("rate-limit-never-enforced", "RATE-RPM-01", "the per-minute request limit is ignored"),
    Fault("revoked-key-accepted", "AUTH-REVOKE-01", "a revoked key keeps working"),
    Fault("scope-not-enforced", "AUTH-SCOPE-01", "keys may call endpoints outside their scopes"),
    Fault(
        "signing-secret-on-v1",
        "AUTH-SECRET-01",
        "GET /v1/generations/{id} shows the key's webhook signing secret",
    ),
    Fault("status-200-instead-of-202", "GEN-SUBMIT-02", "submits answer 200 instead of 202"),
    Fault(
        "tier-endpoint-wrong-type",
        "TIER-FIELD-01",
        "the tier record gives requests_per_minute as a string",
    ),
    Fault("console-token-opens-v1", "AUTH-KEY-01", "a console JWT is accepted as an API key"),
    # --- webhooks (engineer WEBHOOKS) ---
)

#: Every known fault by name.
FAULTS: Mapping[str, Fault] = MappingProxyType({fault.name: fault for fault in _REGISTRY})


class UnknownFault(ValueError):
    """A fault name that is not in the registry (refused at start-up)."""


class Faults:
    """The faults a running service has switched on."""

    def __init__(self, enabled: frozenset[str] = frozenset()) -> None:
        unknown = sorted(enabled - FAULTS.keys())
        if unknown:
            raise UnknownFault(
                f"unknown fault(s): {', '.join(unknown)}; "
                "`python -m reference faults` lists the known ones"
            )
        self.enabled = frozenset(enabled)

    def on(self, name: str) -> bool:
        """Whether fault ``name`` is active (``name`` must be registered)."""
        if name not in FAULTS:
            raise UnknownFault(f"code asks for unregistered fault {name!r}")
        return name in self.enabled

    # ARCHITECTURE.md spells the query ``faults.active(name)``.
    active = on

    def __repr__(self) -> str:
        return f"Faults({sorted(self.enabled)!r})"
