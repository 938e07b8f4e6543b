"""``results.json``: the run's verdicts per requirement, with references to the evidence."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from conformance.verdicts import RunVerdicts, Verdict, check_judgement

if TYPE_CHECKING:
    from conformance.reports import RunInfo

__all__ = ["FORMAT", "results_document"]

#: Bumped when a consumer of ``results.json`` would have to change.
FORMAT = "genapi-conformance/results/1"


def _coverage(verdicts: RunVerdicts) -> dict[str, Any]:
    """The verdict line and what it counts: MUST requirements checked, not checked,
    skipped per capability the profile lacks, and those no check can observe (with why)."""
    coverage = verdicts.coverage()
    return {
        "line": coverage.line(),
        "conformant": coverage.conformant,
        "must_checked": len(coverage.checked),
        "must_failed": [rv.requirement.id for rv in coverage.failed],
        "must_not_checked": [
            {"id": rv.requirement.id, "reason": rv.reason} for rv in coverage.unchecked
        ],
        "must_outside_selection": [r.id for r in coverage.outside],
        "must_skipped_for_capability": {
            capability: [rv.requirement.id for rv in rvs]
            for capability, rvs in coverage.lacking.items()
        },
        "not_observable": [
            {"id": rv.requirement.id, "reason": rv.requirement.unobservable_reason}
            for rv in coverage.unobservable
        ],
    }


def results_document(info: RunInfo, verdicts: RunVerdicts) -> dict[str, Any]:
    """The JSON document: run metadata, counts, one entry per requirement, the checks.

    A requirement's ``evidence`` names its checks by node id and the exchanges of each by
    index into that check's ``exchanges`` list under ``checks``.
    """
    requirements = []
    for rv in verdicts.requirements:
        requirement = rv.requirement
        requirements.append(
            {
                "id": requirement.id,
                "area": requirement.area,
                "section": requirement.section,
                "heading": requirement.heading,
                "level": requirement.level.value,
                "party": requirement.party.value,
                "observable": requirement.observable,
                "verdict": rv.verdict.value,
                "reason": rv.reason,
                "evidence": [
                    {
                        "check": check.nodeid,
                        "outcome": check.outcome.value,
                        "verdict": (check_judgement(check, requirement) or Verdict.UNTESTED).value,
                        "about": check.about(requirement.id),
                        "measurements": [
                            m.to_dict() for m in check.measurements_for(requirement.id)
                        ],
                        "exchanges": list(range(len(check.exchanges))),
                    }
                    for check in rv.checks
                ],
            }
        )
    return {
        "format": FORMAT,
        "suite_version": info.suite_version,
        "suite_sha256": info.suite_sha256,
        "catalog_sha256": info.catalog_sha256,
        "spec_version": info.spec_version,
        "api_version": info.api_version,
        "profile": {
            "name": info.profile_name,
            "sha256": info.profile_sha256,
            "base_url": info.base_url,
        },
        "started_at": info.started_at.isoformat(),
        "finished_at": info.finished_at.isoformat(),
        "duration_seconds": round((info.finished_at - info.started_at).total_seconds(), 3),
        "ok": verdicts.ok,
        "coverage": _coverage(verdicts),
        "counts": {verdict.value: count for verdict, count in verdicts.counts().items()},
        "requirements": requirements,
        "checks": [check.to_dict() for check in verdicts.checks],
    }
