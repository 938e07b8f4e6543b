"""The credit chain's set-up (``test_credits.py``; no check here): bursts of concurrent
submits, credits read until they settle, and the run of submits up to the daily credit
cap's 429, spent with as few submits as the implementation's prices allow.

Spec §1 shows no price ("Credit prices per operation: not shown"), but every final event
reports what its generation cost (``credits_used``, spec §3). So the cap run first
submits one image and one video and reads their prices from their events, then spends
with the dearer operation until the cap refuses it, and fills what is left with the
cheaper one until that is refused too: the day's credits are then spent to less than the
cheapest price, which the checks after the cap's 429 rely on. A price that cannot be
read (no video in the tier, no integer ``credits_used``) leaves images alone, one credit
at least each (CREDIT-SPEND-01).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, Final

import httpx
import pytest

from conformance.checks.low_limit import Chain, accepted_id, wait_finished
from conformance.judge.asserts import credits_used_today
from conformance.observe.receiver import Endpoint
from conformance.target.client import ApiClient, Recorder
from conformance.target.profile import Profile
from conformance.target.setup import IMAGES_PATH, VIDEOS_PATH, SetupFailed

__all__ = [
    "REFUND_READS",
    "CapRun",
    "concurrent_submits",
    "credits_settled",
    "event_price",
    "first_cap_run",
]

#: Reads of credits used today after a generation ended: its refund may land just after
#: the event, so the reading is repeated within the tolerance.
REFUND_READS: Final = 3


@dataclass(frozen=True)
class CapRun:
    """Submits on the credit chain's key, one at a time, up to the first 429."""

    cap: int  # the tier's max_credits_per_day
    statuses: tuple[int, ...]
    refused: httpx.Response | None  # the first 429
    refused_at: float  # time.time() when it arrived
    #: The price read for each operation tried (path → credits_used of its event).
    prices: tuple[tuple[str, int], ...] = ()

    @property
    def refused_before_cap(self) -> bool:
        """Whether a submit was refused and a later, cheaper one admitted: the refusal came
        before the cap was reached, for a price that would have passed it."""
        refused = [i for i, status in enumerate(self.statuses) if status == 429]
        return bool(refused) and any(
            200 <= status < 300 for status in self.statuses[refused[0] + 1 :]
        )

    @property
    def no_429(self) -> str:
        """Why there is no credit-cap 429 to examine (the credit-cap check judges that)."""
        return (
            f"no 429 within {len(self.statuses)} submits (max_credits_per_day {self.cap}): "
            "no credit-cap 429 to examine (the credit-cap check judges this)"
        )


class _Spender:
    """The cap run's submits, each with room in the key's window and waited for (none
    in flight: no concurrency 429), at most ``limit`` of them."""

    def __init__(
        self, chain: Chain, api: ApiClient, endpoint: Endpoint, profile: Profile, limit: int
    ) -> None:
        self.chain, self.api, self.endpoint, self.profile = chain, api, endpoint, profile
        self.recorder = api.recorder
        self.limit = limit
        self.statuses: list[int] = []
        self.refused: httpx.Response | None = None
        self.refused_at = 0.0

    def submit(self, path: str) -> int | None:
        """One submit to *path*: the price its event reports (None: not an integer, or
        refused with 429, which ends the spending with *path*)."""
        self.chain.make_room(self.recorder, 1, self.profile)
        response = self.chain.submit(self.api, self.endpoint, path=path)
        self.statuses.append(response.status_code)
        if response.status_code == 429:
            if self.refused is None:
                self.refused, self.refused_at = response, time.time()
            return None
        generation_id = accepted_id(
            self.api, response, f"submit number {len(self.statuses)} toward the cap"
        )
        wait_finished(self.endpoint, self.accepted, self.profile)
        return event_price(self.endpoint.deliveries, generation_id)

    @property
    def accepted(self) -> int:
        return sum(1 for status in self.statuses if status != 429)

    def spend(self, path: str) -> None:
        """Submit to *path* until it is refused (or the bound of submits is reached)."""
        while len(self.statuses) < self.limit:
            before = len(self.statuses)
            self.submit(path)
            if self.statuses[before] == 429:
                return


def event_price(deliveries: Sequence[Any], generation_id: str) -> int | None:
    """``credits_used`` of the generation's final event among *deliveries*, if an integer
    (what the generation cost, spec §3)."""
    for delivery in deliveries:
        try:
            data = delivery.json().get("data") or {}
        except (ValueError, AttributeError):
            continue
        used = data.get("credits_used") if isinstance(data, dict) else None
        if data.get("generation_id") == generation_id and isinstance(used, int):
            return None if isinstance(used, bool) else used
    return None


def first_cap_run(
    chain: Chain,
    api: ApiClient,
    make_endpoint: Callable[..., Endpoint],
    profile: Profile,
) -> CapRun:
    """The submits up to the credit cap's 429, sent by the first check that asks.

    Every accepted submit spends at least one credit (CREDIT-SPEND-01), so of
    max_credits_per_day + 1 submits one at least must be refused: that bounds the run
    (plus one, for the operation after the first refusal).
    """
    if chain.cap_run is not None:
        cap_run: CapRun = chain.cap_run
        return cap_run
    tier = chain.read_tier(api)
    cap = int(tier["max_credits_per_day"])
    if cap + 2 > profile.budgets.max_requests_per_rate_check:
        pytest.skip(
            f"max_credits_per_day {cap} needs more submits than the budget of "
            f"{profile.budgets.max_requests_per_rate_check}"
        )
    spender = _Spender(chain, api, make_endpoint("credit-cap"), profile, cap + 2)
    prices: dict[str, int] = {}
    video = "video" in tier.get("allowed_model_types", ()) and profile.key(chain.role).has_scope(
        "videos:generate"
    )
    for path in (IMAGES_PATH, VIDEOS_PATH) if video else (IMAGES_PATH,):
        price = spender.submit(path)
        if spender.refused is not None:
            break
        if price is not None and price > 0:
            prices[path] = price
    dearest_first = sorted(prices, key=lambda path: -prices[path])
    for path in [p for p in dearest_first if p != IMAGES_PATH] + [IMAGES_PATH]:
        spender.spend(path)
    made = CapRun(
        cap, tuple(spender.statuses), spender.refused, spender.refused_at, tuple(prices.items())
    )
    chain.cap_run = made
    return made


def concurrent_submits(
    chain: Chain,
    clients: Sequence[ApiClient],
    endpoint: Endpoint,
    prompt: str,
    profile: Profile,
    recorder: Recorder,
) -> list[int]:
    """One burst for the concurrency check: a submit per client, all at once, once the
    window has room for them; their statuses. The accepted ones are waited for, so the
    next burst starts with nothing in flight."""
    chain.make_room(recorder, len(clients), profile)

    def send(client: ApiClient) -> httpx.Response:
        return chain.submit(client, endpoint, prompt)

    with ThreadPoolExecutor(max_workers=len(clients)) as pool:
        statuses = [r.status_code for r in pool.map(send, clients)]
    accepted = sum(1 for status in statuses if 200 <= status < 300)
    if accepted:
        wait_finished(endpoint, accepted, profile)
    return statuses


def credits_settled(
    chain: Chain, api: ApiClient, profile: Profile, settled: Callable[[int], bool], *, day: date
) -> int:
    """Credits used today, re-read (:data:`REFUND_READS` times within the tolerance) until
    *settled* holds of the reading; the last reading. A UTC *day* (the one of the reading
    it is compared with) that ended meanwhile is a set-up error: the count was reset at
    00:00 UTC, so the readings cannot be compared."""
    deadline = time.monotonic() + profile.timing.tolerance_seconds
    used = credits_used_today(api, chain.role)
    for _ in range(REFUND_READS - 1):
        if settled(used) or time.monotonic() >= deadline:
            break
        time.sleep(profile.timing.tolerance_seconds / REFUND_READS)
        used = credits_used_today(api, chain.role)
    if datetime.now(UTC).date() != day:
        raise SetupFailed("setup: 00:00 UTC passed between the readings of credits used today")
    return used
