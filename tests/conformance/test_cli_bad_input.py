"""Bad input to ``genapi-conformance run`` and a hostile disk: a clear message, never a
traceback.

A profile whose secrets cannot be read, or that cannot be read itself, and a report folder
that cannot be written are usage errors (exit 2), found before any check runs and naming
the path and why. A disk that fills during the run costs only the files that did not fit:
each report file is whole or absent, the run names what failed and where, and exits 3.

The read-only and full-disk cases mount a tmpfs inside ``unshare -m`` (the tests run as
root in a namespace); where mounting is not permitted they skip, saying so.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer
from tmpfs_mount import tmpfs_prefix

from conformance.reports import (
    HTML_NAME,
    JSON_NAME,
    ReportWriteError,
    RunInfo,
    redact_tree,
    write_reports,
)
from conformance.run.cli import EXIT_HARNESS, EXIT_USAGE, main
from conformance.secrets import Redactor
from conformance.verdicts import judge

#: What a run against the fake target checks (the tier record: one request each).
TIER_IDS = ("TIER-READ-01", "TIER-FIELD-02")
#: The variable the secrets of the profiles below come from (never set by these tests' caller).
VAR = "GENAPI_BADINPUT_KEY"
#: Bounds a subprocess run of the suite against the fake target.
RUN_TIMEOUT_S = 180


def _profile(
    path: Path, base_url: str, *, key_line: str = 'key = "gk_badinput0123456789abcdef"'
) -> Path:
    path.write_text(
        f'''name = "bad input target"
base_url = "{base_url}"
adapter = "none"
[keys.primary]
{key_line}
account = "primary"
scopes = ["images:generate"]
''',
        encoding="utf-8",
    )
    return path


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["run", *argv, "--workers", "0", "-q", "--only", TIER_IDS[0]])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


# -- the profile's secrets and the profile file ------------------------------------------------


@pytest.mark.parametrize(
    ("key_line", "env", "named"),
    [
        pytest.param(f'key_env = "{VAR}"', None, "keys.primary.key_env", id="key-env-unset"),
        pytest.param(f'key_env = "{VAR}"', "", "keys.primary.key_env", id="key-env-empty"),
        pytest.param(
            'key = "gk_badinput0123456789abcdef"\nsigning_secret_env = "GENAPI_BADINPUT_KEY"',
            None,
            "keys.primary.signing_secret_env",
            id="signing-secret-env-unset",
        ),
    ],
)  # fmt: skip
def test_a_secret_from_an_unset_or_empty_variable_is_a_usage_error(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    httpserver: HTTPServer,
    key_line: str,
    env: str | None,
    named: str,
) -> None:
    if env is None:
        monkeypatch.delenv("GENAPI_BADINPUT_KEY", raising=False)
    else:
        monkeypatch.setenv("GENAPI_BADINPUT_KEY", env)
    profile = _profile(tmp_path / "p.toml", httpserver.url_for("").rstrip("/"), key_line=key_line)
    code, said = _run(["--profile", str(profile), "--report-dir", str(tmp_path / "out")], capsys)
    assert code == EXIT_USAGE, said
    assert named in said and "GENAPI_BADINPUT_KEY is not set (or empty)" in said, said
    assert "Traceback" not in said
    assert not httpserver.log, "no check ran"


def _dangling(tmp_path: Path) -> Path:
    link = tmp_path / "dangling.toml"
    link.symlink_to(tmp_path / "gone.toml")
    return link


def _folder(tmp_path: Path) -> Path:
    (tmp_path / "folder.toml").mkdir()
    return tmp_path / "folder.toml"


def _latin1(tmp_path: Path) -> Path:
    path = tmp_path / "latin1.toml"
    path.write_bytes('name = "caf\u00e9"\n'.encode("latin-1"))
    return path


@pytest.mark.parametrize(
    ("make", "why"),
    [
        pytest.param(_dangling, "a symbolic link to", id="dangling-symlink"),
        pytest.param(_folder, "it is a folder", id="a-folder"),
        pytest.param(_latin1, "not UTF-8", id="not-utf8"),
        pytest.param(lambda tmp: tmp / "missing.toml", "init-profile", id="missing"),
    ],
)
def test_an_unreadable_profile_file_is_a_usage_error_naming_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: object, why: str
) -> None:
    assert callable(make)
    profile = make(tmp_path)
    code, said = _run(["--profile", str(profile), "--report-dir", str(tmp_path / "out")], capsys)
    assert code == EXIT_USAGE, said
    assert str(profile) in said and why in said, said
    assert "Traceback" not in said


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="root reads a chmod 000 file; the folder and dangling-symlink cases stand in",
)
def test_a_profile_without_read_permission_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = _profile(tmp_path / "p.toml", "http://127.0.0.1:9")
    profile.chmod(0)
    code, said = _run(["--profile", str(profile), "--report-dir", str(tmp_path / "out")], capsys)
    assert code == EXIT_USAGE and "Permission denied" in said, said


# -- a report folder that cannot be written ----------------------------------------------------


def _under_a_file(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "plain").write_text("x", encoding="utf-8")
    return tmp_path / "plain" / "reports", tmp_path / "plain"


def _is_a_file(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "plain").write_text("x", encoding="utf-8")
    return tmp_path / "plain", tmp_path / "plain"


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(_under_a_file, id="under-a-regular-file"),
        pytest.param(_is_a_file, id="is-a-regular-file"),
    ],
)
def test_an_unwritable_report_dir_is_named_before_any_check_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], httpserver: HTTPServer, make: object
) -> None:
    assert callable(make)
    report_dir, culprit = make(tmp_path)
    profile = _profile(tmp_path / "p.toml", httpserver.url_for("").rstrip("/"))
    code, said = _run(["--profile", str(profile), "--report-dir", str(report_dir)], capsys)
    assert code == EXIT_USAGE, said
    assert f"{culprit} is not a folder" in said and str(report_dir) in said, said
    assert "Traceback" not in said
    assert not httpserver.log, "the folder is checked before any check runs"


def test_load_names_an_unwritable_report_dir_before_sending_any_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], httpserver: HTTPServer
) -> None:
    report_dir, culprit = _under_a_file(tmp_path)
    profile = _profile(tmp_path / "p.toml", httpserver.url_for("").rstrip("/"))
    code = main(["load", "--profile", str(profile), "--report-dir", str(report_dir)])
    said = capsys.readouterr().err
    assert code == EXIT_USAGE, said
    assert f"{culprit} is not a folder" in said, said
    assert not httpserver.log, "no request was sent"


def _in_tmpfs(mount: Path, options: str, command: list[str]) -> subprocess.CompletedProcess[str]:
    """*command* in a mount namespace where *mount* is a fresh tmpfs with *options*."""
    return subprocess.run(  # noqa: S603
        [*tmpfs_prefix(mount, options), *command],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "GENAPI_PROFILE"},
    )


def _suite(*args: str) -> list[str]:
    return [sys.executable, "-m", "conformance.run.cli", "run", "--workers", "0", *args]


def test_a_read_only_report_dir_is_a_usage_error_before_any_check(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    profile = _profile(tmp_path / "p.toml", httpserver.url_for("").rstrip("/"))
    mount = tmp_path / "ro"
    done = _in_tmpfs(
        mount,
        "ro,size=64k",
        _suite("--profile", str(profile), "--report-dir", str(mount / "r"), "--only", TIER_IDS[0]),
    )
    said = done.stdout + done.stderr
    assert done.returncode == EXIT_USAGE, said
    assert f"cannot create the report folder {mount / 'r'}: Read-only file system" in said, said
    assert "Traceback" not in said
    assert not httpserver.log, "no check ran"


# -- a disk that fills up during the run --------------------------------------------------------


def test_a_full_disk_names_what_failed_and_where_and_exits_3(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    # What the target answers is not this test's business: the disk is.
    httpserver.expect_request("/v1/account/tier").respond_with_json({})
    profile = _profile(tmp_path / "p.toml", httpserver.url_for("").rstrip("/"))
    mount = tmp_path / "full"
    report_dir = mount / "r"
    only = [word for i in TIER_IDS for word in ("--only", i)]
    # 64 KiB, of which a filler takes all but 8 KiB: the folder and its probe fit, the
    # reports do not (Allure, JUnit and results.json each need a page or more).
    fill = f'dd if=/dev/zero of={mount / "filler"} bs=1k count=56 2>/dev/null; exec "$@"'
    done = _in_tmpfs(
        mount,
        "size=64k",
        [
            "sh", "-c", fill, "sh",
            *_suite("--profile", str(profile), "--report-dir", str(report_dir), *only),
        ],
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == EXIT_HARNESS, said
    assert "Traceback" not in said, said
    assert "No space left on device" in said and str(report_dir) in said, said
    assert f"the reports in {report_dir} are incomplete" in done.stderr, said


# -- the report files: each whole or absent -----------------------------------------------------


def _info() -> RunInfo:
    now = datetime.now(UTC)
    return RunInfo("0", "0", None, "t", None, None, now, now)


def _failing_for(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Writes to files called *name* fail half-way, as on a full disk."""
    write_bytes = Path.write_bytes

    def writer(self: Path, data: bytes) -> int:
        if self.name != name:
            return write_bytes(self, data)
        write_bytes(self, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_bytes", writer)


@pytest.mark.parametrize(("failing", "kept"), [(HTML_NAME, JSON_NAME), (JSON_NAME, HTML_NAME)])
def test_a_report_file_that_does_not_fit_is_removed_and_the_other_still_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str, kept: str
) -> None:
    _failing_for(monkeypatch, failing)
    with pytest.raises(ReportWriteError) as raised:
        write_reports(tmp_path, _info(), judge([], []))
    assert raised.value.problems == [
        f"could not write {tmp_path / failing}: {os.strerror(errno.ENOSPC)}"
    ]
    assert not (tmp_path / failing).exists(), "never a truncated report"
    assert (tmp_path / kept).is_file()
    if kept == JSON_NAME:
        assert json.loads((tmp_path / JSON_NAME).read_text(encoding="utf-8"))["format"]


def test_a_file_that_cannot_be_rewritten_masked_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "gk_badinputSECRET0123456789"
    (tmp_path / "a.txt").write_text(f"key={secret}", encoding="utf-8")
    (tmp_path / "b.txt").write_text(f"key={secret}", encoding="utf-8")
    _failing_for(monkeypatch, "a.txt")
    with pytest.raises(ReportWriteError) as raised:
        redact_tree(tmp_path, Redactor({"keys.primary.key": secret}))
    assert str(tmp_path / "a.txt") in str(raised.value)
    assert not (tmp_path / "a.txt").exists(), "a half-masked file may keep part of a secret"
    assert secret not in (tmp_path / "b.txt").read_text(encoding="utf-8")
