"""Ending the child processes the tests start, within a bound."""

from __future__ import annotations

import subprocess

__all__ = ["wait_or_kill"]


def wait_or_kill(process: subprocess.Popen[str] | subprocess.Popen[bytes], timeout: float) -> int:
    """Wait up to *timeout* seconds for *process* to end (it has been asked to), else kill
    it and wait as long again; its exit status. A test never hangs on a child that
    ignores the request to stop."""
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait(timeout=timeout)
