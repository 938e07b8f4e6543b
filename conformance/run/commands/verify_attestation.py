"""``genapi-conformance verify-attestation FILE --pubkey KEY [--run RUN_DIR]``.

Offline: checks the envelope's signature with the public key and, given the run folder,
that its reports are the attested ones. Exit 0 verified, 1 not verified (the reason on
stderr), 2 usage error (a key that cannot be read).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from conformance.attestation import AttestationError, load_public_key, verify
from conformance.run.commands import EXIT_FAILED, EXIT_OK
from conformance.run.commands.common import fail, subcommand

__all__ = ["main", "register"]

#: What ``--help`` says of the command (one line in the list, then its own page).
HELP = "verify a signed run (offline)"
DESCRIPTION = (
    "Verify an attestation's signature and, with --run, that the run "
    "folder's reports are the attested ones. Exit 0 verified, 1 not verified, 2 usage."
)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("envelope", type=Path, metavar="FILE", help="the DSSE envelope")
    parser.add_argument(
        "--pubkey", type=Path, required=True, metavar="KEY", help="Ed25519 public key (PEM)"
    )
    parser.add_argument(
        "--run", type=Path, metavar="RUN_DIR", help="also check this run folder's reports"
    )


def main(options: argparse.Namespace) -> int:
    try:
        public_key = load_public_key(options.pubkey)
    except AttestationError as error:
        return fail(error)
    try:
        verified = verify(options.envelope, public_key, options.run)
    except AttestationError as error:
        print(f"NOT VERIFIED: {error}", file=sys.stderr)
        return EXIT_FAILED
    predicate = verified.statement["predicate"]
    tally = Counter(verified.verdicts.values())
    print(f"verified: signed by keyid {verified.key_id}")
    print(
        f"suite {predicate['suite']['version']}, spec {predicate['spec_version']}, "
        f"target {predicate['target']['base_url']} (api_version "
        f"{predicate['target']['api_version']}), {predicate['started_at']} .. "
        f"{predicate['finished_at']}"
    )
    print("verdicts: " + ", ".join(f"{n} {v}" for v, n in sorted(tally.items())))
    if options.run is None:
        print("the run folder was not checked (pass --run RUN_DIR to check its files)")
    else:
        print(f"{options.run}: every attested file matches")
    return EXIT_OK


#: Adds the subcommand to the CLI (:func:`~conformance.run.commands.common.subcommand`).
register = subcommand("verify-attestation", HELP, DESCRIPTION, _arguments, main)
