"""The launcher starts a server process, waits for it with a deadline and always stops it."""

from __future__ import annotations

import os
import sys
import time
import tomllib
from pathlib import Path

import dns.exception
import dns.message
import dns.query
import httpx
import pytest

from conformance.run.launcher import (
    REFERENCE_COMMAND_ENV,
    EmbeddedReference,
    LaunchError,
    reference_command,
)

FAKE = (sys.executable, str(Path(__file__).with_name("fake_reference.py")))


@pytest.fixture
def fake_mode(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setenv("FAKE_MODE", "ok")
    return monkeypatch


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_launcher_started_server_yields_profile_and_serves(fake_mode: pytest.MonkeyPatch) -> None:
    reference = EmbeddedReference(command=FAKE, faults=["sig-wrong-secret", "retry-none"])
    with reference as profile:
        assert profile.is_file()
        assert 'name = "fake"' in profile.read_text(encoding="utf-8")
        assert reference.base_url is not None and reference.base_url.startswith("http://127.0.0.1:")
        argv = httpx.get(reference.base_url, timeout=5).json()["argv"]
        pid = reference.pid
    assert argv[0] == "serve"
    assert argv[argv.index("--port") + 1] == "0"
    assert argv[argv.index("--allow-cidr") + 1] == "127.0.0.1/32"
    assert argv[argv.index("--db") + 1].endswith("store.sqlite3")
    faults = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--fault"]
    assert faults == ["sig-wrong-secret", "retry-none"]
    assert pid is not None and _gone(pid)
    assert not profile.parent.exists(), "the temporary store must be removed at exit"


def test_launcher_dead_server_raises_with_stderr_tail(fake_mode: pytest.MonkeyPatch) -> None:
    fake_mode.setenv("FAKE_MODE", "crash")
    with pytest.raises(LaunchError, match=r"exited \(status 7\)") as error:
        with EmbeddedReference(command=FAKE):
            pytest.fail("a crashed reference must not be entered")
    assert "fatal: the store is locked" in str(error.value)


def test_launcher_silent_server_times_out_and_is_stopped(
    fake_mode: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake_mode.setenv("FAKE_MODE", "silent")
    reference = EmbeddedReference(command=FAKE, startup_timeout=1.0, workdir=tmp_path)
    started = time.monotonic()
    with pytest.raises(LaunchError, match=r"did not print 'listening on' within 1 s"):
        with reference:
            pytest.fail("a silent reference must not be entered")
    assert time.monotonic() - started < 15
    assert reference.pid is None
    assert (tmp_path / "store.sqlite3").is_file(), "a given workdir is kept for inspection"


def test_launcher_stubborn_server_is_killed_after_bounded_wait(
    fake_mode: pytest.MonkeyPatch,
) -> None:
    fake_mode.setenv("FAKE_MODE", "stubborn")
    reference = EmbeddedReference(command=FAKE, stop_timeout=1.0)
    with reference:
        pid = reference.pid
    assert pid is not None and _gone(pid)


def test_launcher_server_without_profile_is_an_error(fake_mode: pytest.MonkeyPatch) -> None:
    fake_mode.setenv("FAKE_MODE", "no-profile")
    reference = EmbeddedReference(command=FAKE)
    with pytest.raises(LaunchError, match="wrote no profile"):
        with reference:
            pytest.fail("a reference without a profile must not be entered")
    assert reference.pid is None


def test_launcher_default_command_is_the_reference_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(REFERENCE_COMMAND_ENV, raising=False)
    argv = EmbeddedReference(faults=["x"]).argv(tmp_path)
    assert argv[:4] == [sys.executable, "-m", "reference", "serve"]
    assert argv[-2:] == ["--fault", "x"]


def test_the_environment_can_name_another_command_given_the_same_arguments() -> None:
    assert reference_command({}) == (sys.executable, "-m", "reference")
    assert reference_command({REFERENCE_COMMAND_ENV: "  "}) == reference_command({})
    named = {REFERENCE_COMMAND_ENV: "/opt/py -S '/a b/client.py' reference"}
    assert reference_command(named) == ("/opt/py", "-S", "/a b/client.py", "reference")


def _resolve(address: tuple[str, int], name: str) -> list[str]:
    host, port = address
    response = dns.query.udp(dns.message.make_query(name, "A"), host, port=port, timeout=2)
    return [r.to_text() for rrset in response.answer for r in rrset]


def test_launcher_serves_dns_for_the_run_and_describes_it_in_the_profile(
    fake_mode: pytest.MonkeyPatch,
) -> None:
    """The reference is started with the DNS server's address; the profile's [dns] says where
    the server and its zone are, so the workers attach instead of binding the port."""
    reference = EmbeddedReference(command=FAKE)
    with reference as profile:
        server = reference.dns_server
        assert server is not None and server.serving
        host, port = server.address
        assert reference.base_url is not None
        argv = httpx.get(reference.base_url, timeout=5).json()["argv"]
        assert argv[argv.index("--dns-server") + 1] == f"127.0.0.1:{port}"
        document = tomllib.loads(profile.read_text(encoding="utf-8"))
        assert document["dns"] == {
            "server": f"127.0.0.1:{port}",
            "domain": "rebind.genapi.test",
            "zone_dir": str(server.zone_dir),
        }
        assert document["name"] == "fake", "the rest of the profile is kept"
        assert oct(profile.stat().st_mode & 0o777) == "0o600", "it holds keys"
        name = server.set("launched", ["127.0.0.9"])
        assert _resolve((host, port), name) == ["127.0.0.9"]
    assert not server.serving and reference.dns_server is None
    with pytest.raises(dns.exception.Timeout):
        _resolve((host, port), name)


def test_launcher_without_dns_starts_no_server(fake_mode: pytest.MonkeyPatch) -> None:
    reference = EmbeddedReference(command=FAKE, dns=False)
    with reference as profile:
        assert reference.dns_server is None
        assert reference.base_url is not None
        assert "--dns-server" not in httpx.get(reference.base_url, timeout=5).json()["argv"]
        assert "dns" not in tomllib.loads(profile.read_text(encoding="utf-8"))


def test_launcher_reference_disagreeing_about_dns_is_an_error(
    fake_mode: pytest.MonkeyPatch,
) -> None:
    """A [dns] the reference wrote must be the server the suite started, or the run stops."""
    fake_mode.setenv("FAKE_DNS_DOMAIN", "elsewhere.test")
    reference = EmbeddedReference(command=FAKE)
    with pytest.raises(LaunchError, match=r"says \[dns\].*elsewhere\.test.*--dns-server"):
        with reference:
            pytest.fail("a disagreeing profile must not be entered")
    assert reference.pid is None and reference.dns_server is None


def test_launcher_dns_server_that_cannot_start_is_a_launch_error(
    fake_mode: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A zone directory others may write to is refused before the reference starts."""
    (tmp_path / "dns-zone").mkdir()
    (tmp_path / "dns-zone").chmod(0o777)
    reference = EmbeddedReference(command=FAKE, workdir=tmp_path)
    with pytest.raises(LaunchError, match=r"cannot start the run's DNS server: .*not private"):
        with reference:
            pytest.fail("the reference must not start without its DNS server")
    assert reference.pid is None and reference.dns_server is None
