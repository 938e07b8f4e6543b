"""``genapi-conformance attest RUN_DIR --key KEY``: sign a run's results.

Writes a DSSE envelope (an in-toto Statement over the run's reports, see
:mod:`conformance.attestation`) to ``RUN_DIR/attestation.dsse.json`` or ``--out``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from conformance.attestation import AttestationError, load_private_key, sign, statement
from conformance.run.commands import EXIT_OK
from conformance.run.commands.common import fail, subcommand

__all__ = ["ENVELOPE_NAME", "main", "register"]

#: What ``--help`` says of the command (one line in the list, then its own page).
HELP = "sign a run's results (an in-toto Statement in a DSSE envelope)"
DESCRIPTION = (
    "Sign the reports of a run folder with an Ed25519 key (`genapi-conformance keygen` makes one)."
)

#: Where the envelope goes in the run folder unless ``--out`` says otherwise.
ENVELOPE_NAME = "attestation.dsse.json"


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run's report folder")
    parser.add_argument(
        "--key", type=Path, required=True, metavar="KEY", help="Ed25519 private key (PEM)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="FILE",
        help=f"where the envelope goes (default: RUN_DIR/{ENVELOPE_NAME})",
    )


def main(options: argparse.Namespace) -> int:
    run_dir: Path = options.run_dir
    out: Path = options.out or run_dir / ENVELOPE_NAME
    try:
        envelope = sign(statement(run_dir), load_private_key(options.key))
    except AttestationError as error:
        return fail(error)
    out.write_text(json.dumps(envelope, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out} (keyid {envelope['signatures'][0]['keyid']})")
    return EXIT_OK


#: Adds the subcommand to the CLI (:func:`~conformance.run.commands.common.subcommand`).
register = subcommand("attest", HELP, DESCRIPTION, _arguments, main)
