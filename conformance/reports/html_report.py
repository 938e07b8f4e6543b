"""``report.html``: one self-contained page a QA engineer can read offline and send on.

No script, no external asset: the style is inline and collapsing uses ``<details>``.
Everything that came from a run (bodies, headers, messages, node ids) is HTML-escaped
here and nowhere else, so a response body holding ``<script>`` shows as text.

Order: a summary table of verdict counts, the requirements that failed and the untested
ones listed by id (never hidden), then area → requirement → checks with the worst first;
each failing check shows expected vs seen (its assertion message), the redacted
exchanges, and lines to reproduce it.
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from typing import TYPE_CHECKING

from conformance.evidence import Exchange
from conformance.reports.reproduce import Reproduction
from conformance.verdicts import (
    SEVERITY,
    CheckResult,
    Outcome,
    RequirementVerdict,
    RunVerdicts,
    Verdict,
    check_judgement,
)

if TYPE_CHECKING:
    from conformance.reports import RunInfo

__all__ = ["render_html"]

#: A body longer than this is cut in the page (results.json keeps what the client kept).
MAX_BODY_CHARS = 8_000

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:72rem;padding:0 1rem;
color:#1d1d1f;background:#fff}
h1{font-size:1.5rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.25rem .6rem;
text-align:left;vertical-align:top}
pre{background:#f6f6f6;border:1px solid #e2e2e2;padding:.5rem;overflow-x:auto;
white-space:pre-wrap;word-break:break-all;font-size:12px}
details{margin:.3rem 0}summary{cursor:pointer}
.req{border:1px solid #ddd;border-left-width:6px;border-radius:4px;padding:.3rem .6rem;
margin:.5rem 0}
.badge{display:inline-block;min-width:4.5rem;text-align:center;border-radius:3px;
padding:0 .3rem;font-weight:600;color:#fff}
.v-fail{background:#c62828;border-color:#c62828}.v-error{background:#6a1b9a;border-color:#6a1b9a}
.v-warn{background:#ef6c00;border-color:#ef6c00}.v-pass{background:#2e7d32;border-color:#2e7d32}
.v-skip{background:#757575;border-color:#757575}
.v-untested{background:#455a64;border-color:#455a64}
.req.v-fail,.req.v-error,.req.v-warn,.req.v-pass,.req.v-skip,.req.v-untested{background:#fff}
.muted{color:#666}.ok{color:#2e7d32;font-weight:600}.bad{color:#c62828;font-weight:600}
"""


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _badge(verdict: Verdict) -> str:
    return f'<span class="badge v-{_e(verdict.value)}">{_e(verdict.value.upper())}</span>'


def _anchor(requirement_id: str) -> str:
    return "req-" + "".join(c if c.isalnum() or c in "-_" else "_" for c in requirement_id)


def _cut(text: str) -> str:
    if len(text) <= MAX_BODY_CHARS:
        return text
    return f"{text[:MAX_BODY_CHARS]}\n… ({len(text) - MAX_BODY_CHARS} more characters)"


def _headers(headers: Iterable[tuple[str, str]]) -> str:
    return "\n".join(f"{name}: {value}" for name, value in headers)


def _exchange(index: int, exchange: Exchange, again: Reproduction, *, shown: bool = False) -> str:
    status = exchange.status if exchange.status is not None else f"no response ({exchange.error})"
    request = f"{exchange.method} {exchange.url}\n{_headers(exchange.request_headers)}"
    if exchange.request_body:
        request += f"\n\n{_cut(exchange.request_body)}"
    response = f"{status}\n{_headers(exchange.response_headers)}"
    if exchange.response_body:
        response += f"\n\n{_cut(exchange.response_body)}"
    return (
        f"<details{' open' if shown else ''}><summary>exchange #{index}: "
        f"{_e(exchange.method)} {_e(exchange.url)} → "
        f"{_e(status)} <span class='muted'>({exchange.elapsed_ms:.0f} ms)</span></summary>"
        f"<p>request</p><pre>{_e(request)}</pre>"
        f"<p>response</p><pre>{_e(response)}</pre>"
        f"<p>reproduce this request</p><pre>{_e(again.curl(exchange))}</pre></details>"
    )


def _check(check: CheckResult, rv: RequirementVerdict, again: Reproduction) -> str:
    verdict = _judged(check, rv)
    parts = [
        f"<div class='check'><p>{_badge(verdict)} <code>{_e(check.nodeid)}</code> "
        f"<span class='muted'>{check.duration:.2f} s</span></p>"
    ]
    about = check.about(rv.requirement.id)
    if verdict is Verdict.UNTESTED:
        parts.append(
            "<p class='muted'>this check failed on another of its rules first "
            "and did not judge this one</p>"
        )
    if verdict is not Verdict.PASS and about:
        label = "reason" if check.outcome is Outcome.SKIPPED else "expected vs seen"
        parts.append(f"<p>{label}</p><pre>{_e(about)}</pre>")
    measured = check.measurements_for(rv.requirement.id)
    if measured:
        rows = "".join(
            f"<tr><td>{_e(m.quantity)}</td><td>{m.value:.2f} {_e(m.unit)}</td>"
            f"<td>{m.passing[0]:g} to {m.passing[1]:g}</td>"
            f"<td>{m.warning[0]:g} to {m.warning[1]:g}</td><td>{_e(m.band)}</td></tr>"
            for m in measured
        )
        parts.append(
            "<table><tr><th>measured</th><th>value</th><th>pass band</th>"
            f"<th>warn band</th><th>band</th></tr>{rows}</table>"
        )
    if check.outcome in (Outcome.FAILED, Outcome.ERROR):
        # The last exchange is usually the one asserted on: shown open.
        last = len(check.exchanges) - 1
        for index, exchange in enumerate(check.exchanges):
            parts.append(_exchange(index, exchange, again, shown=index == last))
        if check.exchanges_omitted:
            parts.append(
                f"<p class='muted'>{check.exchanges_omitted} more exchanges in the middle "
                "of this check are not kept</p>"
            )
        if check.longrepr:
            parts.append(
                f"<details><summary>traceback</summary><pre>{_e(check.longrepr)}</pre></details>"
            )
    elif check.exchanges:
        parts.append(
            f"<details><summary>{len(check.exchanges)} exchanges</summary>"
            + "".join(_exchange(i, x, again) for i, x in enumerate(check.exchanges))
            + "</details>"
        )
    parts.append("</div>")
    return "".join(parts)


def _requirement(rv: RequirementVerdict, again: Reproduction) -> str:
    requirement = rv.requirement
    is_open = " open" if rv.verdict in (Verdict.FAIL, Verdict.ERROR, Verdict.WARN) else ""
    parts = [
        f"<div class='req v-{_e(rv.verdict.value)}' id='{_e(_anchor(requirement.id))}'>"
        f"<details{is_open}><summary>{_badge(rv.verdict)} <strong>{_e(requirement.id)}</strong> "
        f"{_e(requirement.heading)} <span class='muted'>§{_e(requirement.section)} · "
        f"{_e(requirement.level.value)} · duty of the {_e(requirement.party.value)}"
        "</span></summary>",
        f"<p>{_e(requirement.statement)}</p>",
        f"<p><em>{_e(rv.reason)}</em></p>",
    ]
    parts += [_check(check, rv, again) for check in _worst_first(rv)]
    if rv.verdict in (Verdict.FAIL, Verdict.ERROR, Verdict.WARN):
        parts.append(
            f"<p>run again only this requirement</p><pre>{_e(again.rerun((requirement.id,)))}</pre>"
        )
    parts.append("</details></div>")
    return "".join(parts)


def _judged(check: CheckResult, rv: RequirementVerdict) -> Verdict:
    """The check's verdict on this requirement; ``untested`` when it did not judge it."""
    return check_judgement(check, rv.requirement) or Verdict.UNTESTED


def _worst_first(rv: RequirementVerdict) -> list[CheckResult]:
    def rank(check: CheckResult) -> int:
        return SEVERITY.index(_judged(check, rv))

    return sorted(rv.checks, key=rank)


def _id_list(title: str, verdicts: list[RequirementVerdict]) -> str:
    if not verdicts:
        return ""
    items = "".join(
        f"<li><a href='#{_e(_anchor(rv.requirement.id))}'>{_e(rv.requirement.id)}</a> "
        f"{_e(rv.requirement.heading)} <span class='muted'>{_e(rv.reason)}</span></li>"
        for rv in verdicts
    )
    return f"<h2>{_e(title)} ({len(verdicts)})</h2><ul>{items}</ul>"


def _legend(again: Reproduction) -> str:
    """Which environment variable each curl line expects, and what it holds."""
    rows = "".join(
        f"<tr><td><code>{_e(v)}</code></td><td>{_e(w)}</td></tr>" for v, w in again.legend()
    )
    return (
        "<h2>Variables in the curl lines</h2><p>export them before pasting a line (bash)</p>"
        f"<table><tr><th>variable</th><th>holds</th></tr>{rows}</table>"
    )


def render_html(info: RunInfo, verdicts: RunVerdicts) -> str:
    """The whole page as one string."""
    counts = verdicts.counts()
    summary_rows = "".join(
        f"<tr><td>{_badge(verdict)}</td><td>{count}</td></tr>" for verdict, count in counts.items()
    )
    result = (
        "<span class='ok'>conformant: no stated requirement failed</span>"
        if verdicts.ok
        else "<span class='bad'>not conformant: stated requirements failed or could not be "
        "checked</span>"
    )
    meta = [
        ("target", info.profile_name or "(no profile)"),
        ("base URL", info.base_url or ""),
        ("profile sha256 (redacted)", info.profile_sha256 or ""),
        ("api_version expected", info.api_version or ""),
        ("spec", info.spec_version),
        ("suite", info.suite_version),
        ("started", info.started_at.isoformat()),
        ("finished", info.finished_at.isoformat()),
    ]
    meta_rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in meta)
    by_area: dict[str, list[RequirementVerdict]] = {}
    for rv in verdicts.requirements:
        by_area.setdefault(rv.requirement.area, []).append(rv)

    def area_rank(area: str) -> tuple[int, str]:
        return (min(SEVERITY.index(rv.verdict) for rv in by_area[area]), area)

    sections = []
    for area in sorted(by_area, key=area_rank):
        ordered = sorted(
            by_area[area], key=lambda rv: (SEVERITY.index(rv.verdict), rv.requirement.id)
        )
        sections.append(
            f"<h2>area {_e(area)}</h2>"
            + "".join(_requirement(rv, info.reproduction) for rv in ordered)
        )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>Generation API conformance: {_e(info.profile_name or 'run')}</title>"
        f"<style>{_STYLE}</style></head><body>"
        f"<h1>Generation API conformance report</h1><p>{result}</p>"
        f"<table>{meta_rows}</table>"
        f"<h2>Summary by requirement</h2><table><tr><th>verdict</th><th>requirements</th></tr>"
        f"{summary_rows}</table>"
        + _id_list("Failed", verdicts.with_verdict(Verdict.FAIL))
        + _id_list("Harness errors", verdicts.with_verdict(Verdict.ERROR))
        + _id_list("Warnings (interpretations not met)", verdicts.with_verdict(Verdict.WARN))
        + _id_list("Untested", verdicts.with_verdict(Verdict.UNTESTED))
        + "".join(sections)
        + _legend(info.reproduction)
        + "</body></html>\n"
    )
