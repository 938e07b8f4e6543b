"""The reports of a run, organised by requirement.

One run writes one folder (``reports/<UTC timestamp>/`` or ``--report-dir``):

* ``results.json``: machine-readable verdicts and evidence (:mod:`.json_report`),
* ``report.html``: one self-contained page for people (:mod:`.html_report`),
* ``junit.xml``: pytest's JUnit XML, requirement ids as properties of each test case,
* ``allure-results/``: allure-pytest's results (feature = area, story = requirement id).

Secrets never reach any of them: the evidence is redacted where it is recorded, and
:func:`redact_tree` passes every artifact through the profile's redactor once more at
the end (JUnit and Allure are written by other plugins, from unredacted exceptions).

A folder that cannot take them is found before the run (:func:`prepare_report_dir`); a
disk that fills during the run costs only the files that did not fit: each file is
written whole or removed, the next one is still tried, and :class:`ReportWriteError`
then names every file that failed and why.
"""

from __future__ import annotations

import json
import tempfile
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
    "ReportWriteError",
    "Reproduction",
    "RunInfo",
    "new_report_dir",
    "prepare_report_dir",
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


class ReportWriteError(Exception):
    """Report files that could not be written; :attr:`problems` names each path and why."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


def prepare_report_dir(directory: Path) -> None:
    """Create *directory* and prove a file can be made in it, before any check runs
    (a run that cannot keep its reports is not worth starting); else
    :class:`ReportWriteError` says which path is in the way and why."""
    for path in (directory, *directory.parents):
        if path.is_dir():
            break
        if path.exists() or path.is_symlink():
            raise ReportWriteError(
                [f"cannot use {directory} as the report folder: {path} is not a folder"]
            )
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ReportWriteError(
            [f"cannot create the report folder {directory}: {error.strerror or error}"]
        ) from None
    try:
        # An empty probe file: creating one is what every report needs first.
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".write-test-"):
            pass
    except OSError as error:
        raise ReportWriteError(
            [f"cannot create a file in the report folder {directory}: {error.strerror or error}"]
        ) from None


def _write_whole(path: Path, data: bytes) -> str | None:
    """Write *data* to *path*; on failure remove what was written (a truncated report
    misleads, and a truncated rewrite may keep part of a secret) and say why."""
    try:
        path.write_bytes(data)
    except OSError as error:
        path.unlink(missing_ok=True)
        return f"could not write {path}: {error.strerror or error}"
    return None


def write_reports(directory: Path, info: RunInfo, verdicts: RunVerdicts) -> list[Path]:
    """Write ``results.json``, then ``report.html``, into *directory*; their paths.

    A file that fails is removed and the next still tried; then :class:`ReportWriteError`
    names each failure.
    """
    directory.mkdir(parents=True, exist_ok=True)
    document = json.dumps(results_document(info, verdicts), indent=2, ensure_ascii=False)
    contents = {
        directory / JSON_NAME: document + "\n",
        directory / HTML_NAME: render_html(info, verdicts),
    }
    problems = []
    for path, text in contents.items():
        problem = _write_whole(path, text.encode("utf-8"))
        if problem:
            problems.append(problem)
    if problems:
        raise ReportWriteError(problems)
    return list(contents)


def redact_tree(directory: Path, redactor: Redactor, *, max_files: int = 100_000) -> int:
    """Mask every known secret in every file under *directory*; how many files changed.

    Bounded by *max_files* (Allure writes one file per test and attachment). A file that
    cannot be rewritten masked is removed; :class:`ReportWriteError` then names it.
    """
    changed = 0
    problems = []
    for count, path in enumerate(sorted(directory.rglob("*"))):
        if count >= max_files:
            break
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        masked = redactor.bytes(data)
        if masked != data:
            problem = _write_whole(path, masked)
            if problem:
                problems.append(f"{problem} (removed: it held a secret to mask)")
            else:
                changed += 1
    if problems:
        raise ReportWriteError(problems)
    return changed
