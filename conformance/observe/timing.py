"""The delivery clock of spec §6 Behaviour: how long the suite waits, and how it judges
what it measured.

Spec §6: each attempt may take up to 10 s, and attempts 2 and 3 follow backoffs of 1 s
and 2 s. Waits are bounded by these figures plus the profile's generation time and timing
tolerance; a measured duration of a timed rule is judged by the bands the catalog gives
that rule (:func:`judge_timing`).
"""

from __future__ import annotations

from typing import Final

from conformance.catalog import load_catalog
from conformance.findings import measure
from conformance.target.profile import Profile

__all__ = ["ATTEMPT_TIMEOUT_SECONDS", "BACKOFF_SECONDS", "delivery_deadline", "judge_timing"]

#: The per-attempt timeout (spec §6 Behaviour): a first attempt may take this long.
ATTEMPT_TIMEOUT_SECONDS: Final = 10.0
#: Backoff before the 2nd and 3rd attempts (spec §6 Behaviour).
BACKOFF_SECONDS: Final = (1.0, 2.0)


def delivery_deadline(profile: Profile, attempts: int = 1) -> float:
    """Seconds to wait for *attempts* deliveries of one event: the generation's time
    (the profile's ``max_generation_seconds``), then per attempt the 10 s timeout and the
    backoff before it (spec §6 Behaviour), plus the timing tolerance."""
    backoff = sum(BACKOFF_SECONDS[: max(0, attempts - 1)])
    return (
        profile.sandbox.max_generation_seconds
        + attempts * ATTEMPT_TIMEOUT_SECONDS
        + backoff
        + profile.timing.tolerance_seconds
    )


def judge_timing(rule: str, value: float, profile: Profile, *, what: str = "") -> str:
    """Judge a measured duration of a timed rule by the bands the catalog gives it
    (``timing``), widened by the profile's measurement tolerance: pass, warn or fail.

    *what* adds which occurrence was measured (``2nd gap``) to the catalog's quantity.
    """
    timing = load_catalog()[rule].timing
    if timing is None:
        raise ValueError(f"{rule} has no timing bands in the catalog")
    quantity = f"{timing.measures} ({what})" if what else timing.measures
    return measure(rule, quantity, value, timing.bands(profile.timing.tolerance_seconds))
