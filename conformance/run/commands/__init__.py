"""Subcommands of ``genapi-conformance`` beyond ``run``, one module each.

Each module exposes ``register(commands)``, which adds its subparser to the CLI's
subparsers (and sets ``handler`` to its ``main``), and ``main(options) -> int``, which
runs it with the parsed options and returns the exit code. What they share (making
``register``, the error line, escaping what came from the network) is in :mod:`.common`.
"""

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE"]

#: The exit codes the commands share with ``run`` (see :mod:`conformance.run.cli`):
#: 0 done / verified, 1 the thing checked does not hold, 2 usage error.
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
