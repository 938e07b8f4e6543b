"""``genapi-conformance``: the command line of the suite."""

from __future__ import annotations

import argparse
import os
import sys


def _reference(argv: list[str]) -> int:
    # The suite never imports the reference implementation: it runs it as a process.
    os.execv(sys.executable, [sys.executable, "-m", "reference", *argv])  # noqa: S606
    return 0  # pragma: no cover (execv does not return)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "serve-reference":
        return _reference(["serve", *args[1:]])
    if args and args[0] == "faults":
        return _reference(["faults", *args[1:]])
    parser = argparse.ArgumentParser(prog="genapi-conformance")
    parser.add_subparsers(dest="command", metavar="{serve-reference,faults}")
    parser.parse_args(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
