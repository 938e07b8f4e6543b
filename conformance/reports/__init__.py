"""The reports of a run, organised by requirement.

One run writes one folder (``reports/<UTC timestamp>/`` or ``--report-dir``):

* ``results.json``: machine-readable verdicts and evidence (:mod:`.json_report`),
* ``report.html``: one self-contained page for people (:mod:`.html_report`),
* ``junit.xml``: pytest's JUnit XML, requirement ids as properties of each test case,
* ``allure-results/``: allure-pytest's results (feature = area, story = requirement id).

Secrets never reach any of them: the evidence is redacted where it is recorded, and
:func:`redact_tree` passes every artifact through the profile's redactor once more at
the end (JUnit and Allure are written by other plugins, from unredacted exceptions).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from conformance.reports.html_report import render_html
from conformance.reports.json_report import results_document
from conformance.reports.reproduce import Reproduction
from conformance.secrets import Redactor
from conformance.verdicts import RunVerdicts

__all__ = [
    "ALLURE_DIR",
    "HTML_NAME",
    "JSON_NAME",
    "JUNIT_NAME",
    "Reproduction",
    "RunInfo",
    "new_report_dir",
    "redact_tree",
    "render_html",
    "results_document",
    "write_reports",
]

#: The files and folders of a run's report folder: named here, and nowhere else.
JSON_NAME = "results.json"
HTML_NAME = "report.html"
JUNIT_NAME = "junit.xml"
ALLURE_DIR = "allure-results"


@dataclass(frozen=True)
class RunInfo:
    """What identifies a run: versions, target (never its secrets), and when it ran."""

    suite_version: str
    spec_version: str
    api_version: str | None
    profile_name: str | None
    profile_sha256: str | None
    base_url: str | None
    started_at: datetime
    finished_at: datetime
    reproduction: Reproduction = field(default_factory=Reproduction)
    #: What judged it: the digests of the installed suite's files and of its catalog
    #: (:mod:`conformance.provenance`), which an attestation binds to the verdicts.
    suite_sha256: str | None = None
    catalog_sha256: str | None = None


def new_report_dir(base: Path = Path("reports")) -> Path:
    """A fresh folder path ``<base>/<UTC timestamp>`` (suffixed if taken), not created."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    candidate, n = base / stamp, 1
    while candidate.exists() and n < 1000:
        candidate, n = base / f"{stamp}-{n}", n + 1
    return candidate.resolve()


def write_reports(directory: Path, info: RunInfo, verdicts: RunVerdicts) -> list[Path]:
    """Write ``results.json`` and ``report.html`` into *directory*; their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    json_path = directory / JSON_NAME
    json_path.write_text(
        json.dumps(results_document(info, verdicts), indent=2, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    html_path = directory / HTML_NAME
    html_path.write_text(render_html(info, verdicts), encoding="utf-8")
    return [json_path, html_path]


def redact_tree(directory: Path, redactor: Redactor, *, max_files: int = 100_000) -> int:
    """Mask every known secret in every file under *directory*; how many files changed.

    Bounded by *max_files* (Allure writes one file per test and attachment).
    """
    changed = 0
    for count, path in enumerate(sorted(directory.rglob("*"))):
        if count >= max_files:
            break
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        masked = redactor.bytes(data)
        if masked != data:
            path.write_bytes(masked)
            changed += 1
    return changed
