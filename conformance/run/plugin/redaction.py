"""Redaction of what pytest reports: failure texts, sections, properties, artifacts.

The evidence is redacted where it is recorded (:class:`conformance.target.client.Recorder`); this
masks what pytest itself builds from exceptions and output, with the run's one
:class:`~conformance.secrets.Redactor`, before any report, terminal line or xdist message
carries it; and, once the run is over, every artifact in the report folder once more
(JUnit and Allure are written by other plugins, from unredacted exceptions).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import pytest

from conformance.reports import redact_tree
from conformance.run.plugin.state import RunState
from conformance.secrets import Redactor

__all__ = ["longrepr_text", "redact_artifacts", "redact_report"]


class _Crash(NamedTuple):
    """Where and why a check failed (what pytest's one-line summaries show): pytest's
    ``ReprFileLocation``, with the message masked."""

    path: str
    lineno: int
    message: str


@dataclass(frozen=True)
class _RedactedLongrepr:
    """A failure's text with the secrets masked, shaped like pytest's own repr (it has
    ``toterminal`` and ``reprcrash``), so terminal, JUnit and xdist treat it alike."""

    text: str
    reprcrash: _Crash | None

    def toterminal(self, tw: Any) -> None:
        for line in self.text.splitlines():
            tw.line(line)

    def __str__(self) -> str:
        return self.text


def redact_report(report: pytest.TestReport, redactor: Redactor) -> None:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):
        path, lineno, reason = longrepr
        report.longrepr = (path, lineno, redactor.text(reason))
    elif longrepr is not None:
        text = str(longrepr)
        masked = redactor.text(text)
        if masked != text:
            # Only then: pytest's structured repr (colours) is worth keeping otherwise.
            crash = getattr(longrepr, "reprcrash", None)
            # Duck-typed like pytest's TerminalRepr, which is not public API.
            report.longrepr = _RedactedLongrepr(  # type: ignore[assignment]
                masked,
                None
                if crash is None
                else _Crash(str(crash.path), crash.lineno, redactor.text(crash.message)),
            )
    report.sections = [(title, redactor.text(body)) for title, body in report.sections]
    report.user_properties = [
        (name, redactor.text(value) if isinstance(value, str) else value)
        for name, value in report.user_properties
    ]


def longrepr_text(report: pytest.TestReport) -> str:
    if report.longrepr is None or isinstance(report.longrepr, tuple):
        return ""
    return str(report.longrepr)


def redact_artifacts(state: RunState) -> None:
    if state.report_dir.is_dir():
        redact_tree(state.report_dir, state.redactor)
