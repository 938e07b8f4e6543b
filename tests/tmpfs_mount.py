"""A tmpfs of a test's own, for the tests of full and read-only disks (loopback rules
unchanged: only the mount namespace is new).

:func:`tmpfs_prefix` gives a command prefix that runs its arguments in a mount namespace of
their own (``unshare -m``) with a fresh tmpfs on a folder; the process keeps its pid, so
``nsenter -t PID -m`` reaches that tmpfs later (to fill it, or to free it). Where mounting
is not permitted (not root, no ``unshare``), the calling test is skipped, saying so.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

__all__ = ["tmpfs_prefix"]

#: Bounds the probe mount.
PROBE_TIMEOUT_S = 30


def tmpfs_prefix(mount: Path, options: str) -> list[str]:
    """``unshare -m sh -c 'mount -t tmpfs -o OPTIONS tmpfs MOUNT && exec "$@"'``, to put
    before a command; skips the test where such a mount is not permitted."""
    if shutil.which("unshare") is None or shutil.which("nsenter") is None:
        pytest.skip("no unshare(1)/nsenter(1): cannot give the test a tmpfs of its own")
    mount.mkdir(parents=True, exist_ok=True)
    probe = subprocess.run(  # noqa: S603
        ["unshare", "-m", "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],  # noqa: S607
        capture_output=True,
        text=True,
        timeout=PROBE_TIMEOUT_S,
        check=False,
    )
    if probe.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {probe.stderr.strip()}")
    script = 'mount -t tmpfs -o "$1" tmpfs "$2" && shift 2 && exec "$@"'
    return ["unshare", "-m", "sh", "-c", script, "sh", options, str(mount)]
