"""Rate limits at scale: the records of a Locust run and the verdicts they support.

``genapi-conformance load`` drives one key of the profile past its per-minute limit from
Locust's workers (see ``locustfile.py``), while another key sends a little; every answer
is a :class:`Record`. :func:`judge_load` turns the records into a result per catalog id
it can judge, asking no more than each requirement states:

* RATE-RPM-02: no more than ``requests_per_minute`` requests of the key are answered other
  than 429 within a rolling minute ("the request after requests_per_minute requests ... is
  answered 429"). Times are the client's, so a request counts as inside a window only
  when both its sending and its answer are (its admission lies between the two): that is
  the tolerance at the window's edges, each request's own latency, and a violation is one
  the implementation cannot have avoided, whatever the latency or the replica.
* RATE-HDR-01, -03, -04: every 429 carries Retry-After, X-RateLimit-Limit equal to the
  tier's ``requests_per_minute``, X-RateLimit-Remaining a non-negative integer (0 on a
  rate-limit 429), across every replica that answered.
* RATE-RPM-03: the other key, when it is of the same account, is never answered 429 while
  the limited key is being refused.
* RATE-RPD-01 (:func:`judge_daily`): no more than ``requests_per_day`` requests of a key are
  answered other than 429 within one calendar day (UTC), a request counting in a day when
  sent and answered within it.
* RATE-CONC-02 (:func:`judge_concurrency`, an interpretation: it can only warn): no more
  than ``concurrent_limit`` generations of a key's account run at once, a submit beyond
  them being refused (4xx). A generation counts as running only while it certainly was:
  from its 202's arrival to the sending of the last read that showed it unfinished
  (``in-flight`` records), so a generation finished earlier than the suite saw is never
  counted too long.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple

__all__ = [
    "CHUNK_RECORDS",
    "HEADERS",
    "MAX_RECORDS",
    "RECORDS_WAIT_S",
    "WINDOW_S",
    "LoadJudgement",
    "Record",
    "judge_concurrency",
    "judge_daily",
    "judge_load",
    "max_overlap",
    "max_served_in_window",
]

#: The rolling window of spec §8's "Requests per minute".
WINDOW_S = 60.0
#: Bound on the records one worker keeps (a few MB of JSON), and on those the master
#: accepts from one worker.
MAX_RECORDS = 200_000
#: Records per message from a worker to the master (a few hundred kB of msgpack).
CHUNK_RECORDS = 2_000
#: How long the master waits, once the workers stopped, for every worker's last records.
RECORDS_WAIT_S = 30.0
#: The headers recorded from each answer, in :class:`Record` order.
HEADERS = ("Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")


class Record(NamedTuple):
    """One answer: which key sent it, when it left and came back (unix s), what it was."""

    role: str
    sent: float
    received: float
    status: int
    retry_after: str | None
    limit: str | None
    remaining: str | None
    reset: str | None


@dataclass(frozen=True)
class LoadJudgement:
    """The verdict of one requirement from a load run: passed, failed or skipped (why)."""

    requirement_id: str
    outcome: str  # "passed" | "failed" | "skipped"
    message: str


def max_served_in_window(served: Sequence[Record]) -> int:
    """The most served requests certainly admitted within one rolling window.

    For a window starting at a request's sending time ``a``: the requests sent at or after
    ``a`` and answered before ``a + WINDOW_S``. Requests are answered within seconds (the
    client's timeout), far less than a window, so that count is the number answered
    before ``a + WINDOW_S`` less the number sent before ``a``.
    """
    sent = sorted(r.sent for r in served)
    received = sorted(r.received for r in served)
    best = 0
    for index, start in enumerate(sent):
        best = max(best, bisect.bisect_left(received, start + WINDOW_S) - index)
    return best


def _integer(value: str | None) -> int | None:
    return int(value) if value is not None and value.strip().isdigit() else None


def judge_load(
    records: Sequence[Record], requests_per_minute: int, *, same_account: bool
) -> list[LoadJudgement]:
    limited = [r for r in records if r.role == "limited"]
    # Admitted: any answer but 429 (status 0 is no answer at all, which proves nothing).
    served = [r for r in limited if r.status not in (0, 429)]
    refused = [r for r in limited if r.status == 429]
    judgements = [_rpm_02(limited, served, refused, requests_per_minute)]
    judgements += _headers(refused, requests_per_minute)
    judgements.append(_rpm_03(records, refused, same_account=same_account))
    return judgements


def _rpm_02(
    limited: Sequence[Record], served: Sequence[Record], refused: Sequence[Record], rpm: int
) -> LoadJudgement:
    most = max_served_in_window(served)
    if most > rpm:
        return LoadJudgement(
            "RATE-RPM-02",
            "failed",
            f"{most} requests of the key were answered other than 429 within one rolling "
            f"minute, over its requests_per_minute of {rpm} ({len(limited)} sent, "
            f"{len(served)} answered other than 429, {len(refused)} answered 429; counting "
            f"only requests sent and answered within the minute)",
        )
    if not refused:
        return LoadJudgement(
            "RATE-RPM-02",
            "skipped",
            f"the load never reached the limit: {len(limited)} requests sent, none answered "
            f"429, at most {most} served within a minute (requests_per_minute {rpm})",
        )
    return LoadJudgement(
        "RATE-RPM-02",
        "passed",
        f"at most {most} of {len(served)} requests answered other than 429 within any "
        f"rolling minute (requests_per_minute {rpm}; a request counts in a minute when sent "
        f"and answered within it); {len(refused)} answered 429",
    )


def _headers(refused: Sequence[Record], rpm: int) -> list[LoadJudgement]:
    if not refused:
        reason = "no 429 was answered to inspect"
        return [
            LoadJudgement(rid, "skipped", reason)
            for rid in ("RATE-HDR-01", "RATE-HDR-03", "RATE-HDR-04")
        ]
    no_retry = [r for r in refused if r.retry_after is None]
    wrong_limit = [r for r in refused if _integer(r.limit) != rpm]
    # Spec §7: Remaining is "requests left in the window"; a rate-limit 429 has none left.
    wrong_remaining = [r for r in refused if _integer(r.remaining) != 0]
    return [
        _all_hold("RATE-HDR-01", refused, no_retry, "had no Retry-After"),
        _all_hold(
            "RATE-HDR-03",
            refused,
            wrong_limit,
            f"had X-RateLimit-Limit other than {rpm} (first: {_first(wrong_limit, 'limit')})",
        ),
        _all_hold(
            "RATE-HDR-04",
            refused,
            wrong_remaining,
            f"had X-RateLimit-Remaining other than 0 (first: "
            f"{_first(wrong_remaining, 'remaining')})",
        ),
    ]


def _first(records: Sequence[Record], field: str) -> str:
    return repr(getattr(records[0], field)) if records else "-"


def _all_hold(
    rid: str, refused: Sequence[Record], bad: Sequence[Record], what: str
) -> LoadJudgement:
    if bad:
        return LoadJudgement(rid, "failed", f"{len(bad)} of {len(refused)} 429 answers {what}")
    return LoadJudgement(rid, "passed", f"all {len(refused)} 429 answers hold")


def _rpm_03(
    records: Sequence[Record], refused: Sequence[Record], *, same_account: bool
) -> LoadJudgement:
    if not same_account:
        return LoadJudgement(
            "RATE-RPM-03", "skipped", "the other key is not of the limited key's account"
        )
    if not refused:
        return LoadJudgement("RATE-RPM-03", "skipped", "the limited key was never refused")
    start, end = min(r.sent for r in refused), max(r.received for r in refused)
    other = [r for r in records if r.role == "other" and start <= r.sent <= end]
    throttled = [r for r in other if r.status == 429]
    if throttled:
        return LoadJudgement(
            "RATE-RPM-03",
            "failed",
            f"the other key was answered 429 {len(throttled)} times of {len(other)} while "
            "the limited key was being refused",
        )
    if not other:
        return LoadJudgement(
            "RATE-RPM-03", "skipped", "the other key sent nothing while the first was refused"
        )
    return LoadJudgement(
        "RATE-RPM-03",
        "passed",
        f"the other key was served {len(other)} times while the limited key was refused",
    )


def _utc_day(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).date().isoformat()


def judge_daily(
    records: Sequence[Record], requests_per_day: int, requests_per_minute: int
) -> LoadJudgement:
    """RATE-RPD-01 from the records of the ``daily`` role: "the request after
    requests_per_day requests within a calendar day (UTC) is answered 429", so no more than
    ``requests_per_day`` answered other than 429 in one UTC day. A request counts in a day
    when sent and answered within it (the client's clock, as for the minute). More served
    fails whatever the tier's minute; a pass needs a tier whose minute allows more than its
    day (else the minute refuses first, and the 429s seen prove nothing of the day)."""
    daily = [r for r in records if r.role == "daily"]
    served = [r for r in daily if r.status not in (0, 429)]
    refused = sum(r.status == 429 for r in daily)
    per_day = Counter(_utc_day(r.sent) for r in served if _utc_day(r.sent) == _utc_day(r.received))
    day, most = per_day.most_common(1)[0] if per_day else ("-", 0)
    if most > requests_per_day:
        return LoadJudgement(
            "RATE-RPD-01",
            "failed",
            f"{most} requests of the daily key were answered other than 429 within the UTC "
            f"day {day}, over its requests_per_day of {requests_per_day} ({len(daily)} sent, "
            f"{refused} answered 429; counting only requests sent and answered within the day)",
        )
    if requests_per_minute <= requests_per_day:
        return LoadJudgement(
            "RATE-RPD-01",
            "skipped",
            f"the daily key's requests_per_minute ({requests_per_minute}) would refuse before "
            f"its requests_per_day ({requests_per_day}): no daily 429 to tell apart",
        )
    if not refused:
        return LoadJudgement(
            "RATE-RPD-01",
            "skipped",
            f"the daily key was never answered 429: {len(daily)} requests sent, at most "
            f"{most} served in a UTC day (requests_per_day {requests_per_day})",
        )
    return LoadJudgement(
        "RATE-RPD-01",
        "passed",
        f"at most {most} requests of the daily key answered other than 429 within a UTC day "
        f"(requests_per_day {requests_per_day}; a day already partly spent allows fewer); "
        f"{refused} of {len(daily)} answered 429",
    )


def max_overlap(intervals: Sequence[tuple[float, float]]) -> int:
    """The most intervals (start, end) that hold one moment together (touching ends do not
    overlap)."""
    moments = sorted(
        [(start, 1) for start, end in intervals if end > start]
        + [(end, -1) for start, end in intervals if end > start]
    )  # at one moment an end (-1) sorts before a start (+1)
    most = running = 0
    for _, step in moments:
        running += step
        most = max(most, running)
    return most


def judge_concurrency(records: Sequence[Record], concurrent_limit: int) -> LoadJudgement:
    """RATE-CONC-02 from the concurrency key's submits (``conc-submit`` records) and the
    spans its generations were certainly running (``in-flight`` records: sent = the 202's
    arrival, received = the sending of the last read that showed it unfinished)."""
    submits = [r for r in records if r.role == "conc-submit"]
    refused = sum(1 for r in submits if 400 <= r.status < 500)
    accepted = sum(1 for r in submits if 200 <= r.status < 300)
    most = max_overlap([(r.sent, r.received) for r in records if r.role == "in-flight"])
    counts = (
        f"{len(submits)} submits: {accepted} accepted, {refused} refused (4xx); at most {most} "
        f"generations certainly running at once (concurrent_limit {concurrent_limit})"
    )
    if most > concurrent_limit:
        return LoadJudgement(
            "RATE-CONC-02",
            "failed",
            f"{most} generations of the key were running at once, over its concurrent_limit "
            f"of {concurrent_limit}, rather than the submits beyond it refused ({counts})",
        )
    if not refused:
        return LoadJudgement(
            "RATE-CONC-02", "skipped", f"the load never reached the limit: {counts}"
        )
    return LoadJudgement("RATE-CONC-02", "passed", counts)
