"""Allure results that agree with the verdicts and carry the evidence.

While a check runs (:func:`allure_labels`): feature = area, story = requirement id, and
the check's node id as a label (how :func:`settle_allure` finds it again).

Once the run is over (:func:`settle_allure`, controller only), each result gets a
description that embeds each requirement's statement, the spec's own words and the text of
its spec section (a link to ``spec/generation-api.md`` would be relative, and relative
links break in the Allure UI), and is settled against the check's verdict: a warned check
is ``passed`` with the warning as its message and a ``warning`` tag (visible, never red), a
failed one ``failed``, a harness error ``broken``, a skip ``skipped``; the recorded
exchanges, their curl lines and a rerun line are attached; and the fixture containers
allure-pytest writes (several per check, thousands per run, nothing a reader of a
conformance verdict needs) are removed.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import genapi_spec
from conformance.catalog import Catalog, Requirement
from conformance.evidence import Exchange
from conformance.reports import Reproduction
from conformance.run.plugin.results import check_overall, warning_text
from conformance.verdicts import CheckResult, Verdict

__all__ = ["CHECK_LABEL", "WARNING_TAG", "allure_labels", "settle_allure", "spec_section"]

#: The label that names a result's check (its pytest node id).
CHECK_LABEL = "check"
#: The tag of a warned check's result.
WARNING_TAG = "warning"

#: Allure's status for a check's verdict.
_STATUS = {
    Verdict.PASS: "passed",
    Verdict.WARN: "passed",
    Verdict.FAIL: "failed",
    Verdict.ERROR: "broken",
    Verdict.SKIP: "skipped",
    Verdict.UNTESTED: "unknown",
}
#: Bounds: the results read, and the characters of one body in an attachment.
_MAX_RESULTS = 100_000
_MAX_BODY_CHARS = 16_000


def allure_labels(catalog: Catalog, ids: Sequence[str], nodeid: str) -> None:
    import allure  # only when allure-pytest is active

    dynamic: Any = allure.dynamic  # untyped library

    dynamic.label(CHECK_LABEL, nodeid)
    for requirement_id in ids:
        requirement = catalog[requirement_id]
        dynamic.feature(requirement.area)
        dynamic.story(requirement.id)


def _described(requirement: Requirement) -> str:
    quoted = "\n\n".join(
        "\n".join(f"> {line}" for line in quote.splitlines()) for quote in requirement.quotes
    )
    return (
        f"**{requirement.id}** ({requirement.level.value}): {requirement.statement}\n\n"
        f"{quoted}\n\n"
        f"Spec §{requirement.section} {requirement.heading}:\n\n"
        f"{spec_section(requirement.heading)}"
    )


@cache
def spec_section(heading: str) -> str:
    """The spec's text under *heading*, up to the next heading (empty when not found)."""
    lines = genapi_spec.spec_text().splitlines()
    title = re.compile(r"#+\s+(?:\d+\.\s+)?(.*?)\s*")
    for start, line in enumerate(lines):
        found = title.fullmatch(line)
        if found and found.group(1) == heading:
            body = []
            for following in lines[start + 1 :]:
                if following.startswith("#"):
                    break
                body.append(following)
            return "\n".join(body).strip()
    return ""


def settle_allure(
    directory: Path, checks: Mapping[str, CheckResult], catalog: Catalog, again: Reproduction
) -> None:
    """Settle every result in *directory* against its check's verdict (see the module)."""
    if not directory.is_dir():
        return
    for count, path in enumerate(sorted(directory.glob("*-container.json"))):
        if count >= _MAX_RESULTS:
            break
        path.unlink()
    for count, path in enumerate(sorted(directory.glob("*-result.json"))):
        if count >= _MAX_RESULTS:
            break
        result = json.loads(path.read_text(encoding="utf-8"))
        nodeid = next(
            (x["value"] for x in result.get("labels", ()) if x.get("name") == CHECK_LABEL), None
        )
        check = checks.get(nodeid) if isinstance(nodeid, str) else None
        if check is None:
            continue
        _settle(result, check, catalog, again, directory)
        path.write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")


def _settle(
    result: dict[str, Any],
    check: CheckResult,
    catalog: Catalog,
    again: Reproduction,
    directory: Path,
) -> None:
    verdict = check_overall(check, catalog)
    result["status"] = _STATUS[verdict]
    # Set here: allure-pytest replaces the description with the docstring after setup.
    described = [_described(catalog[i]) for i in check.requirement_ids]
    if result.get("description"):
        described.append(f"The check: {result['description']}")
    result["description"] = "\n\n".join(described)
    if verdict is Verdict.WARN:
        details = result.setdefault("statusDetails", {})
        details["message"] = (
            "WARN (an interpretation or an open choice: never a failure)\n"
            + warning_text(check, catalog)
        )
        result.setdefault("labels", []).append({"name": "tag", "value": WARNING_TAG})
    attachments = result.setdefault("attachments", [])
    if check.exchanges:
        attachments.append(_attach(directory, "exchanges", _exchanges_text(check.exchanges, check)))
        lines = [again.curl(exchange) for exchange in check.exchanges]
        attachments.append(_attach(directory, "curl (bash)", "\n\n".join(lines) + "\n"))
    attachments.append(
        _attach(directory, "rerun", again.rerun(tuple(check.requirement_ids)) + "\n")
    )


def _attach(directory: Path, name: str, text: str) -> dict[str, str]:
    source = f"{uuid.uuid4()}-attachment.txt"
    (directory / source).write_text(text, encoding="utf-8")
    return {"name": name, "source": source, "type": "text/plain"}


def _exchanges_text(exchanges: Sequence[Exchange], check: CheckResult) -> str:
    parts = []
    for index, exchange in enumerate(exchanges):
        status = (
            exchange.status if exchange.status is not None else f"no response ({exchange.error})"
        )
        request = "\n".join(f"{k}: {v}" for k, v in exchange.request_headers)
        response = "\n".join(f"{k}: {v}" for k, v in exchange.response_headers)
        parts.append(
            f"#{index} {exchange.method} {exchange.url} -> {status} "
            f"({exchange.elapsed_ms:.0f} ms)\n{request}\n\n"
            f"{exchange.request_body[:_MAX_BODY_CHARS]}\n--\n{response}\n\n"
            f"{exchange.response_body[:_MAX_BODY_CHARS]}"
        )
    if check.exchanges_omitted:
        parts.append(f"({check.exchanges_omitted} more exchanges in the middle were not kept)")
    return "\n\n====\n\n".join(parts) + "\n"
