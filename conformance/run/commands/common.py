"""What the subcommands share: their parser, their error line, text from the network.

A command module's ``register`` is made by :func:`subcommand`; its ``main`` reports a
problem with :func:`fail` (one line on stderr, then the exit code of
:mod:`conformance.run.commands`) and prints what arrived from anyone through
:func:`printable`.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from typing import Any

from conformance.run.commands import EXIT_USAGE

__all__ = ["PROG", "fail", "printable", "subcommand"]

#: The name every error line starts with.
PROG = "genapi-conformance"

# C0 and C1 controls (tab, CR and LF too: one line stays one line), DEL, the line and
# paragraph separators and the bidirectional marks and overrides: what could forge a line
# or a terminal escape, or reorder what a terminal shows.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def subcommand(
    name: str,
    help_line: str,
    description: str,
    arguments: Callable[[argparse.ArgumentParser], None],
    main: Callable[[argparse.Namespace], int],
) -> Callable[[argparse._SubParsersAction[Any]], None]:
    """A command module's ``register(commands)``: it adds subcommand *name* (its
    ``--help`` lines *help_line* and *description*) with the options *arguments* adds,
    run by *main* (as ``options.handler``)."""

    def register(commands: argparse._SubParsersAction[Any]) -> None:
        parser = commands.add_parser(name, help=help_line, description=description)
        arguments(parser)
        parser.set_defaults(handler=main)

    return register


def fail(message: object, code: int = EXIT_USAGE) -> int:
    """Print ``genapi-conformance: <message>`` on stderr; *code* (a usage error unless
    said otherwise)."""
    print(f"{PROG}: {message}", file=sys.stderr)
    return code


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """*text* (header values, ids received from anyone) safe to print on a terminal:
    every control character written as a ``\\xNN`` / ``\\uNNNN`` escape."""
    return _UNPRINTABLE.sub(_escape, text)
