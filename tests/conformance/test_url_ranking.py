"""The address ranking settles the dispute of issue 7: who fails, who is only warned.

An implementation that accepts ``http://[100:0:0:1::]:9/`` (RFC 9780's Dummy IPv6 Prefix,
a 2025 registry entry that Python's ipaddress 3.11 to 3.13 still calls global) gets a
warning that names the registry entry, its RFC and its year; one that accepts 10.0.0.1,
127.0.0.2, 169.254.169.254 or fe80::1 (categories the spec names) fails a MUST, and in
webhook.url TARGET-BIND-03 too. Unit level: the data (the address tables and the URL
vectors), the check's own code run against an implementation that accepts everything,
and the verdict module's judgement; no server, no network.
"""

from __future__ import annotations

import ipaddress
from types import SimpleNamespace
from typing import Any, cast
from urllib.parse import urlsplit

import httpx
import pytest

from conformance import findings
from conformance.catalog import load_catalog
from conformance.checks import test_url_vectors as vector_checks
from conformance.judge.strategies import FIELDS, UrlVector, case_ids, fixture_vectors
from conformance.observe.events import TargetKind
from conformance.observe.receiver import CanaryView, Receiver
from conformance.target.client import ApiClient
from conformance.target.profile import Profile
from conformance.verdicts import CheckResult, Outcome, RunVerdicts, Verdict, judge
from genapi_spec.address_tables import deciding_range

#: Spec §4 names these categories: private ranges, loopback, the metadata address,
#: link-local; each address with the MUST it breaks.
NAMED = {
    "10.0.0.1": "URL-PRIV-01",
    "127.0.0.2": "URL-LOOP-01",
    "169.254.169.254": "URL-LINK-02",
    "fe80::1": "URL-LINK-03",
}
#: The dummy prefix the issue's implementation accepted, and what the warning must name.
DUMMY, DUMMY_RFC, DUMMY_YEAR = "100:0:0:1::", "RFC 9780", "2025"


#: What the check reads of a profile: an implementation on this machine, no tunnel.
PROFILE = SimpleNamespace(base_url="http://127.0.0.1:8765", receiver=SimpleNamespace(public_url=""))


class _AcceptsEverything:
    """An implementation that answers every submit 202: it checks no callback URL."""

    def request(self, method: str, path: str, **_: Any) -> httpx.Response:
        request = httpx.Request(method, f"http://iut.invalid{path}")
        return httpx.Response(202, json={"id": "gen_1"}, request=request)


class _Receiver:
    def url_for(self, path: str) -> str:
        return f"http://127.0.0.1:8123{path}"


class _QuietCanary:
    port = 45678

    def assert_no_hits(self) -> None:
        return None


def _run_vector_check(vector: UrlVector, field: TargetKind) -> CheckResult:
    """The vector check of the suite, run against :class:`_AcceptsEverything`, as the
    plugin records it (ids from the case's marker, the failure's broken rules)."""
    ids = case_ids(field, vector.requirement)
    findings.begin(ids)
    try:
        vector_checks.test_url_vector_breaking_rule_answered_400(
            api=cast(ApiClient, _AcceptsEverything()),
            profile=cast(Profile, PROFILE),
            receiver=cast(Receiver, _Receiver()),
            canary=cast(CanaryView, _QuietCanary()),
            vector=vector,
            field=field,
        )
    except findings.RuleBroken as broken:
        outcome, message, broke = Outcome.FAILED, str(broken), broken.ids or ids
    else:
        outcome, message, broke = Outcome.PASSED, "", ()
    finally:
        findings.end()
    return CheckResult(
        nodeid=f"test_url_vectors.py::{field}-{vector.case_id}",
        requirement_ids=ids,
        outcome=outcome,
        duration=0.0,
        message=message,
        broken=broke,
    )


def _range_check(address: str, field: str) -> CheckResult:
    """A failed generated-range case (conformance/checks/test_url_generated.py) whose drawn
    host is *address*: it cites the range's requirement and names the range."""
    entry = deciding_range(ipaddress.ip_address(address))
    assert entry is not None and entry.requirement is not None
    ids = case_ids(field, entry.requirement)
    message = f"{', '.join(ids)}: expected 400, saw 202 ({entry.judged()})"
    return CheckResult(f"range-{address}-{field}", ids, Outcome.FAILED, 0.0, message, broken=ids)


def _vectors_on(address: str) -> list[UrlVector]:
    """The fixture vectors whose host is *address* itself (no spelling, no embedding)."""
    wanted = ipaddress.ip_address(address)
    found = []
    for vector in fixture_vectors():
        try:
            if ipaddress.ip_address(urlsplit(vector.template).hostname or "") == wanted:
                found.append(vector)
        except ValueError:
            continue
    return found


def _verdicts(address: str) -> RunVerdicts:
    checks = [_range_check(address, field) for field in FIELDS]
    checks += [_run_vector_check(v, f) for v in _vectors_on(address) for f in FIELDS]
    return judge(load_catalog(), checks)


def _judged(run: RunVerdicts) -> dict[str, Verdict]:
    return {rv.requirement.id: rv.verdict for rv in run.requirements if rv.checks}


def test_accepting_the_dummy_prefix_warns_naming_rfc_9780() -> None:
    run = _verdicts(DUMMY)
    assert _judged(run) == {"URL-IANA-04": Verdict.WARN}
    assert run.ok  # no MUST failed: the run's exit status stays 0
    (warned,) = run.with_verdict(Verdict.WARN)
    assert DUMMY_RFC in warned.reason and DUMMY_YEAR in warned.reason, warned.reason
    assert "Dummy IPv6 Prefix" in warned.reason


def test_accepting_the_dummy_vector_warns_in_both_fields() -> None:
    """The fixture vector on the dummy prefix, through the check's own code."""
    (vector,) = [v for v in fixture_vectors() if v.template == "http://[100:0:0:1::1]:9/"]
    checks = [_run_vector_check(vector, field) for field in FIELDS]
    assert all(c.outcome is Outcome.FAILED for c in checks)
    assert all(DUMMY_RFC in c.message and DUMMY_YEAR in c.message for c in checks)
    assert _judged(judge(load_catalog(), checks)) == {"URL-IANA-04": Verdict.WARN}


@pytest.mark.parametrize(("address", "must"), NAMED.items())
def test_accepting_a_named_category_fails_a_must(address: str, must: str) -> None:
    run = _verdicts(address)
    judged = _judged(run)
    assert judged[must] is Verdict.FAIL, judged
    assert judged["TARGET-BIND-03"] is Verdict.FAIL, judged  # the webhook.url cases
    assert not run.ok
