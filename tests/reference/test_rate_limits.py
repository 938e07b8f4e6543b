"""Tier limits: per-key minute and day limits, concurrency, the daily credit cap, 429s."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from running_reference import ReferenceFactory, RunningReference, bearer, wait_for_status

from reference.errors import ApiError
from reference.fault import Faults
from reference.ratelimit import RateLimiter, seconds_to_utc_midnight
from reference.store import Store
from reference.tiers import Tier, load_tiers

LOW = load_tiers().get("low-limit")
PRICES = load_tiers().prices


def assert_rate_limited(response: httpx.Response, *, limit: int) -> int:
    """Spec §7: 429 with Retry-After, X-RateLimit-Limit/-Remaining/-Reset, JSON detail."""
    assert response.status_code == 429, response.text
    retry_after = response.headers["Retry-After"]
    assert retry_after.isdigit() and int(retry_after) >= 1
    assert int(response.headers["X-RateLimit-Limit"]) == limit
    assert int(response.headers["X-RateLimit-Remaining"]) >= 0
    reset = int(response.headers["X-RateLimit-Reset"])
    assert time.time() - 1 <= reset <= time.time() + 61
    assert isinstance(response.json()["detail"], str) and response.json()["detail"]
    return int(retry_after)


def test_minute_limit_gives_429_with_headers(reference_factory: ReferenceFactory) -> None:
    service = reference_factory()
    client = service.client()
    key = bearer(service.key("low-limit"))
    # Every /v1 request counts, whatever the endpoint (spec §8).
    for n in range(LOW.requests_per_minute):
        path = "/v1/account/tier" if n % 2 else "/v1/generations/gen_nothing"
        assert client.get(path, headers=key).status_code in (200, 404)
    refused = client.get("/v1/account/tier", headers=key)
    retry_after = assert_rate_limited(refused, limit=LOW.requests_per_minute)
    assert refused.headers["X-RateLimit-Remaining"] == "0"
    assert retry_after <= 60
    # The limit is per key: another account's key is unaffected.
    assert client.get("/v1/account/tier", headers=bearer(service.key("primary"))).status_code == 200


def test_concurrency_limit_gives_429(reference_factory: ReferenceFactory) -> None:
    service = reference_factory(args=["--latency-ms", "3000"])
    client = service.client()
    key = service.key("low-limit")
    accepted = [
        client.post("/v1/images/generate", headers=bearer(key), json={"prompt": f"c{n}"})
        for n in range(LOW.concurrent_limit)
    ]
    assert [r.status_code for r in accepted] == [202] * LOW.concurrent_limit
    refused = client.post("/v1/images/generate", headers=bearer(key), json={"prompt": "one more"})
    assert_rate_limited(refused, limit=LOW.requests_per_minute)
    assert "concurrency" in refused.json()["detail"]
    for response in accepted:
        wait_for_status(client, key, response.json()["id"], interval_s=1.0)
    again = client.post("/v1/images/generate", headers=bearer(key), json={"prompt": "after"})
    assert again.status_code == 202


def test_credit_cap_gives_429_until_midnight_and_refunds_count(
    reference_factory: ReferenceFactory,
) -> None:
    service = reference_factory(args=["--latency-ms", "50"])
    client = service.client()
    key = service.key("low-limit")
    usage = lambda: client.get("/v1/account/usage", headers=bearer(key)).json()  # noqa: E731
    video = PRICES["video"]
    assert LOW.max_credits_per_day // video >= 2
    # A failed generation refunds its credits (spec §1).
    failed = client.post(
        "/v1/videos/generate", headers=bearer(key), json={"prompt": "[sandbox:fail]"}
    )
    assert failed.status_code == 202
    assert usage()["credits_used_today"] == video
    wait_for_status(client, key, failed.json()["id"], interval_s=0.3)
    assert usage()["credits_used_today"] == 0
    # Spend up to the cap, one generation at a time.
    spent = 0
    while spent + video <= LOW.max_credits_per_day:
        response = client.post("/v1/videos/generate", headers=bearer(key), json={"prompt": "v"})
        assert response.status_code == 202, response.text
        spent += video
        wait_for_status(client, key, response.json()["id"], interval_s=0.3)
    assert usage()["credits_used_today"] == spent
    refused = client.post("/v1/videos/generate", headers=bearer(key), json={"prompt": "over"})
    retry_after = assert_rate_limited(refused, limit=LOW.requests_per_minute)
    assert "credit" in refused.json()["detail"]
    # Retry-After points at 00:00 UTC, when the cap resets (spec §8).
    assert abs(retry_after - seconds_to_utc_midnight()) <= 5
    assert usage()["credits_used_today"] == spent
    assert usage()["credits_remaining_today"] == LOW.max_credits_per_day - spent


def _tier(rpm: int, rpd: int) -> Tier:
    return Tier("test", rpm, rpd, 1, 1, ("image",))


def test_day_limit_gives_429_until_midnight(tmp_path: Path) -> None:
    limiter = RateLimiter(Store(tmp_path / "s.sqlite3"), Faults())
    tier = _tier(rpm=100, rpd=3)
    for _ in range(3):
        limiter.admit("key_a", tier, "acct_1")
    with pytest.raises(ApiError) as refused:
        limiter.admit("key_a", tier, "acct_1")
    assert refused.value.status == 429
    assert abs(int(refused.value.headers["Retry-After"]) - seconds_to_utc_midnight()) <= 2
    limiter.admit("key_b", tier, "acct_1")  # per key
    assert limiter.requests_today(["key_a", "key_b"]) == 4


def test_day_count_survives_a_new_limiter(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite3")
    tier = _tier(rpm=100, rpd=2)
    RateLimiter(store, Faults()).admit("key_a", tier, "acct_1")
    RateLimiter(store, Faults()).admit("key_a", tier, "acct_1")
    with pytest.raises(ApiError):
        RateLimiter(store, Faults()).admit("key_a", tier, "acct_1")


def test_refused_requests_do_not_count(tmp_path: Path) -> None:
    limiter = RateLimiter(Store(tmp_path / "s.sqlite3"), Faults())
    tier = _tier(rpm=2, rpd=100)
    limiter.admit("key_a", tier, "acct_1")
    limiter.admit("key_a", tier, "acct_1")
    for _ in range(5):
        with pytest.raises(ApiError):
            limiter.admit("key_a", tier, "acct_1")
    assert limiter.requests_today(["key_a"]) == 2
    state = limiter.window_state("key_a", tier)
    assert state.remaining == 0 and state.limit == 2


def test_admitted_requests_carry_the_window_headers(reference_factory: ReferenceFactory) -> None:
    service = reference_factory()
    client = service.client()
    key = bearer(service.key("low-limit"))
    first = client.get("/v1/account/tier", headers=key)
    second = client.get("/v1/account/tier", headers=key)
    assert first.headers["X-RateLimit-Limit"] == str(LOW.requests_per_minute)
    assert int(first.headers["X-RateLimit-Remaining"]) == LOW.requests_per_minute - 1
    assert int(second.headers["X-RateLimit-Remaining"]) == LOW.requests_per_minute - 2
    assert time.time() - 1 <= int(second.headers["X-RateLimit-Reset"]) <= time.time() + 61
    # Console and unauthenticated paths carry none.
    assert "X-RateLimit-Limit" not in client.get("/healthz").headers


# -- the test-mode clock of the daily limits (serve --test-clock) -----------------------------


VIDEOS = "/v1/videos/generate"


def _spend_the_cap(client: httpx.Client, key: str) -> None:
    """Spend the low-limit account's daily credits, one video at a time (no concurrency
    429), until a submit is refused for the cap."""
    for _ in range(LOW.max_credits_per_day // PRICES["video"]):
        response = client.post(VIDEOS, json={"prompt": "v"}, headers=bearer(key))
        assert response.status_code == 202, response.text
        wait_for_status(client, key, response.json()["id"], interval_s=0.3)
    refused = client.post(VIDEOS, json={"prompt": "over"}, headers=bearer(key))
    assert refused.status_code == 429, refused.text


def test_test_clock_is_off_unless_asked(reference_server: RunningReference) -> None:
    with reference_server.client() as client:
        assert client.post("/test/clock", json={"advance_seconds": 60}).status_code == 404


@pytest.mark.parametrize("fault", [None, "credit-cap-resets-at-local-midnight"])
def test_credit_cap_resets_when_the_test_clock_passes_utc_midnight(
    reference_factory: ReferenceFactory, fault: str | None
) -> None:
    service = reference_factory(
        args=("--test-clock", "--latency-ms", "50"), faults=(fault,) if fault else ()
    )
    assert "TEST MODE" in service.stderr_text() and "/test/clock" in service.stderr_text()
    key = service.key("low-limit")
    with service.client() as client:
        _spend_the_cap(client, key)
        state = client.get("/test/clock").json()
        to_midnight = seconds_to_utc_midnight(state["now"])
        moved = client.post("/test/clock", json={"advance_seconds": to_midnight - 30})
        assert moved.status_code == 200, moved.text
        before = client.post(VIDEOS, json={"prompt": "v"}, headers=bearer(key))
        client.post("/test/clock", json={"advance_seconds": 60})
        after = client.post(VIDEOS, json={"prompt": "v"}, headers=bearer(key))
    statuses = (before.status_code, after.status_code)
    if fault is None:
        assert statuses == (429, 202), (before.text, after.text)
    else:  # the cap's day ends at 18:30 UTC: it resets on the wrong side of 00:00 UTC
        assert statuses != (429, 202)


def test_test_clock_moves_only_forward_and_within_a_week(
    reference_factory: ReferenceFactory,
) -> None:
    service = reference_factory(args=("--test-clock",))
    with service.client() as client:
        for bad in (-1, 8 * 86_400, "60", None):
            response = client.post("/test/clock", json={"advance_seconds": bad})
            assert response.status_code == 400, (bad, response.text)
