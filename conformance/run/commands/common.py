"""What the subcommands share: showing text that came from the network.

(:mod:`conformance.run.commands` holds the exit codes.)
"""

from __future__ import annotations

import re

__all__ = ["printable"]

# C0 and C1 controls (tab, CR and LF too: one line stays one line), DEL, the line and
# paragraph separators and the bidirectional marks and overrides: what could forge a line
# or a terminal escape, or reorder what a terminal shows.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """*text* (header values, ids received from anyone) safe to print on a terminal:
    every control character written as a ``\\xNN`` / ``\\uNNNN`` escape."""
    return _UNPRINTABLE.sub(_escape, text)
