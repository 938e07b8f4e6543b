"""``report.html``: one self-contained page a QA engineer can read offline and send on.

No external asset: the style, a small filter script and the pictures (inline SVG) are in
the page. Everything that came from a run (bodies, headers, messages, node ids) is
HTML-escaped here and in :mod:`.html_charts`, and nowhere else, so a response body
holding ``<script>`` shows as text; control bytes and bidirectional overrides show as
``\\xNN`` / ``\\uNNNN`` escapes instead of acting on the page.

Order: a verdict banner (conformant or not, why, counts, duration), the run's identity,
filters, the requirements that failed, the untested ones and those no check can observe
listed by id (never hidden), then area → requirement (its statement) → checks, the worst
first. A failing or warned
check shows expected vs seen, its measurements, a timeline of each delivery chain it
looked at, the redacted exchanges and a line to reproduce it; a passing check shows one
line per exchange, so that a full run stays small.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from html import escape
from typing import TYPE_CHECKING

from conformance.evidence import Exchange
from conformance.reports.html_assets import SCRIPT, STYLE
from conformance.reports.html_charts import rate_chart, timeline_svg
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
#: The area whose checks get a chart of X-RateLimit-Remaining over time.
RATE_AREA = "RATE"

# C0 and C1 controls (tab and newline excepted) and the bidirectional overrides.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape_control(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _e(value: object) -> str:
    """*value* as HTML text or attribute: escaped, control bytes written as escapes."""
    return _CONTROL.sub(_escape_control, escape(str(value), quote=True))


def _pre(value: object) -> str:
    """*value* for a ``<pre>``: like :func:`_e`, with each escaped control byte marked."""
    return _CONTROL.sub(
        lambda m: f"<span class='ctl'>{_escape_control(m)}</span>", escape(str(value))
    )


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


def _status(exchange: Exchange) -> str:
    return (
        str(exchange.status) if exchange.status is not None else f"no response ({exchange.error})"
    )


def _exchange_line(index: int, exchange: Exchange) -> str:
    return (
        f"exchange #{index}: {_e(exchange.method)} {_e(exchange.url)} → {_e(_status(exchange))} "
        f"<span class='muted'>({exchange.elapsed_ms:.0f} ms)</span>"
    )


def _exchange(index: int, exchange: Exchange, again: Reproduction, *, shown: bool = False) -> str:
    request = f"{exchange.method} {exchange.url}\n{_headers(exchange.request_headers)}"
    if exchange.request_body:
        request += f"\n\n{_cut(exchange.request_body)}"
    response = f"{_status(exchange)}\n{_headers(exchange.response_headers)}"
    if exchange.response_body:
        response += f"\n\n{_cut(exchange.response_body)}"
    return (
        f"<details{' open' if shown else ''}><summary>{_exchange_line(index, exchange)}</summary>"
        f"<p>request</p><pre>{_pre(request)}</pre>"
        f"<p>response</p><pre>{_pre(response)}</pre>"
        f"<p>reproduce this request</p><pre>{_pre(again.curl(exchange))}</pre></details>"
    )


def _measurements(check: CheckResult, requirement_id: str) -> str:
    measured = check.measurements_for(requirement_id)
    if not measured:
        return ""
    rows = "".join(
        f"<tr><td>{_e(m.quantity)}</td><td>{m.value:.2f} {_e(m.unit)}</td>"
        f"<td>{m.passing[0]:g} to {m.passing[1]:g}</td>"
        f"<td>{m.warning[0]:g} to {m.warning[1]:g}</td><td>{_e(m.band)}</td></tr>"
        for m in measured
    )
    return (
        "<table><tr><th>measured</th><th>value</th><th>pass band</th>"
        f"<th>warn band</th><th>band</th></tr>{rows}</table>"
    )


_TIMELINE_LEGEND = (
    "<p class='legend'>green: when spec §6 allows the attempt (after the previous attempt's "
    "reply or its 10 s timeout, then 1 s, then 2 s of backoff, counted from the attempt's "
    "start or its end, plus the run's timing tolerance); red band: no attempt allowed "
    "(3 at most); grey bar: how long the suite's receiver held its reply; dashed red line: "
    "the 10 s per-attempt timeout; dot: the attempt's arrival (red when outside its window)."
    "</p>"
)


def _pictures(check: CheckResult, rv: RequirementVerdict) -> str:
    parts = []
    for chain in check.chains:
        parts.append(
            f"<figure class='chain'><figcaption>delivery chain <code>{_e(chain.name)}</code>"
            f"</figcaption>{timeline_svg(chain)}</figure>"
        )
    if parts:
        parts.append(_TIMELINE_LEGEND)
    if rv.requirement.area == RATE_AREA:
        chart = rate_chart(check.exchanges)
        if chart:
            parts.append(
                "<figure><figcaption>X-RateLimit-Remaining of each kept response over "
                "time (red: a 429)</figcaption>" + chart + "</figure>"
            )
    return "".join(parts)


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
        parts.append(f"<p>{label}</p><pre>{_pre(about)}</pre>")
    parts.append(_measurements(check, rv.requirement.id))
    parts.append(_pictures(check, rv))
    if check.outcome in (Outcome.FAILED, Outcome.ERROR) or verdict is Verdict.WARN:
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
                f"<details><summary>traceback</summary><pre>{_pre(check.longrepr)}</pre></details>"
            )
    elif check.exchanges:
        # A passing check's exchanges, one line each: the full ones are in results.json.
        lines = "<br>".join(_exchange_line(i, x) for i, x in enumerate(check.exchanges))
        parts.append(
            f"<details><summary>{len(check.exchanges)} exchanges "
            "<span class='muted'>(in full in results.json)</span></summary>"
            f"<p>{lines}</p></details>"
        )
    parts.append("</div>")
    return "".join(parts)


def _requirement(rv: RequirementVerdict, again: Reproduction) -> str:
    requirement = rv.requirement
    is_open = " open" if rv.verdict in (Verdict.FAIL, Verdict.ERROR, Verdict.WARN) else ""
    search = f"{requirement.id} {requirement.statement} {requirement.heading}".lower()
    parts = [
        f"<div class='req v-{_e(rv.verdict.value)}' id='{_e(_anchor(requirement.id))}' "
        f"data-verdict='{_e(rv.verdict.value)}' data-area='{_e(requirement.area)}' "
        f"data-search='{_e(search)}'>"
        f"<details{is_open}><summary>{_badge(rv.verdict)} <strong>{_e(requirement.id)}</strong> "
        f"{_e(requirement.statement)}</summary>"
        f"<p class='muted'>§{_e(requirement.section)} {_e(requirement.heading)} · "
        f"{_e(requirement.level.value)} · duty of the {_e(requirement.party.value)}</p>",
        f"<p><em>{_e(rv.reason)}</em></p>",
    ]
    parts += [_check(check, rv, again) for check in _worst_first(rv)]
    if rv.verdict in (Verdict.FAIL, Verdict.ERROR, Verdict.WARN):
        rerun = again.rerun((requirement.id,))
        parts.append(f"<p>run again only this requirement</p><pre>{_pre(rerun)}</pre>")
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
        f"{_e(rv.requirement.statement)} <span class='muted'>{_e(rv.reason)}</span></li>"
        for rv in verdicts
    )
    return f"<h2>{_e(title)} ({len(verdicts)})</h2><ul>{items}</ul>"


def _ids(verdicts: list[RequirementVerdict], most: int = 8) -> str:
    ids = [rv.requirement.id for rv in verdicts]
    more = f" and {len(ids) - most} more" if len(ids) > most else ""
    return ", ".join(ids[:most]) + more


def _banner(info: RunInfo, verdicts: RunVerdicts) -> str:
    """Conformant or not, why, the counts and the duration, in one coloured block."""
    failed = verdicts.with_verdict(Verdict.FAIL)
    errors = verdicts.with_verdict(Verdict.ERROR)
    warned = verdicts.with_verdict(Verdict.WARN)
    # The verdict in the words every output shares (Coverage.line), then what it counts.
    coverage = verdicts.coverage()
    headline = (
        "Conformant"
        if coverage.conformant
        else "Not conformant"
        if coverage.failed
        else "Not all checked"
    )
    reasons = [coverage.line()]
    if failed:
        reasons.append(f"{len(failed)} stated requirement(s) failed: {_ids(failed)}")
    if errors:
        reasons.append(
            f"{len(errors)} requirement(s) could not be checked (the suite broke, or the "
            f"target gave no answer): {_ids(errors)}"
        )
    why = "; ".join(reasons) + "."
    if warned:
        why += (
            f" {len(warned)} interpretation(s) not met, reported as warnings only: {_ids(warned)}."
        )
    details = "".join(f"<p>{_e(line)}</p>" for line in coverage.details())
    counts = "".join(
        f"<span>{count} {_e(verdict.value)}</span>" for verdict, count in verdicts.counts().items()
    )
    outcomes = {outcome: 0 for outcome in Outcome}
    for check in verdicts.checks:
        outcomes[check.outcome] += 1
    checks = ", ".join(f"{count} {outcome.value}" for outcome, count in outcomes.items())
    seconds = (info.finished_at - info.started_at).total_seconds()
    minutes, rest = divmod(round(seconds), 60)
    return (
        f"<div class='banner {'ok' if coverage.conformant else 'bad'}' id='verdict' "
        f"role='status'><p class='headline'>{headline}</p><p>{_e(why)}</p>{details}"
        f"<p class='counts'>requirements: {counts}</p>"
        f"<p>checks: {len(verdicts.checks)} ({_e(checks)}) · duration {minutes} min {rest} s"
        f" · target {_e(info.profile_name or 'embedded reference')}</p></div>"
    )


def _legend(again: Reproduction) -> str:
    """Which environment variable each curl line expects, and what it holds."""
    rows = "".join(
        f"<tr><td><code>{_e(v)}</code></td><td>{_e(w)}</td></tr>" for v, w in again.legend()
    )
    return (
        "<h2>Variables in the curl lines</h2><p>export them before pasting a line (bash)</p>"
        f"<table><tr><th>variable</th><th>holds</th></tr>{rows}</table>"
    )


def _filters(areas: Iterable[str]) -> str:
    boxes = "".join(
        f"<label><input type='checkbox' name='verdict' value='{_e(v.value)}' checked> "
        f"{_e(v.value)}</label>"
        for v in SEVERITY
    )
    options = "".join(f"<option value='{_e(a)}'>{_e(a)}</option>" for a in areas)
    return (
        "<div class='filters'>"
        f"{boxes}<label>area <select id='f-area'><option value=''>all</option>{options}"
        "</select></label><label>search <input type='search' id='f-text' "
        "placeholder='id or words of the statement'></label> "
        "<span id='f-shown' class='muted'></span></div>"
    )


def render_html(info: RunInfo, verdicts: RunVerdicts) -> str:
    """The whole page as one string."""
    meta = [
        ("target", info.profile_name or "(no profile)"),
        ("base URL", info.base_url or ""),
        ("profile sha256 (redacted)", info.profile_sha256 or ""),
        ("api_version expected", info.api_version or ""),
        ("spec", info.spec_version),
        ("suite", info.suite_version),
        ("suite files sha256", info.suite_sha256 or ""),
        ("catalog sha256", info.catalog_sha256 or ""),
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
            f"<section class='area'><h2>area {_e(area)}</h2>"
            + "".join(_requirement(rv, info.reproduction) for rv in ordered)
            + "</section>"
        )
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>Generation API conformance: {_e(info.profile_name or 'run')}</title>"
        f"<style>{STYLE}</style></head><body>"
        "<h1>Generation API conformance report</h1>"
        + _banner(info, verdicts)
        + f"<details><summary>run details</summary><table>{meta_rows}</table></details>"
        + _id_list("Failed", verdicts.with_verdict(Verdict.FAIL))
        + _id_list("Harness errors", verdicts.with_verdict(Verdict.ERROR))
        + _id_list("Warnings (interpretations not met)", verdicts.with_verdict(Verdict.WARN))
        + _id_list("Untested", verdicts.with_verdict(Verdict.UNTESTED))
        + _id_list(
            "Not observable from outside (never passed)",
            verdicts.with_verdict(Verdict.UNOBSERVABLE),
        )
        + "<h2>Requirements</h2>"
        + _filters(sorted(by_area))
        + "".join(sections)
        + _legend(info.reproduction)
        + f"<script>{SCRIPT}</script></body></html>\n"
    )
