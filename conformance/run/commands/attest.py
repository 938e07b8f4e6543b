"""``genapi-conformance attest RUN_DIR --key KEY``: sign a run's results.

Writes a DSSE envelope (an in-toto Statement over the run's reports, see
:mod:`conformance.attestation`) to ``RUN_DIR/attestation.dsse.json`` or ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from conformance.attestation import AttestationError, load_private_key, sign, statement
from conformance.run.commands import EXIT_OK, EXIT_USAGE

__all__ = ["ENVELOPE_NAME", "main", "register"]

#: Where the envelope goes in the run folder unless ``--out`` says otherwise.
ENVELOPE_NAME = "attestation.dsse.json"


def register(commands: argparse._SubParsersAction[Any]) -> None:
    parser = commands.add_parser(
        "attest",
        help="sign a run's results (an in-toto Statement in a DSSE envelope)",
        description="Sign the reports of a run folder with an Ed25519 key "
        "(`genapi-conformance keygen` makes one).",
    )
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
    parser.set_defaults(handler=main)


def main(options: argparse.Namespace) -> int:
    run_dir: Path = options.run_dir
    out: Path = options.out or run_dir / ENVELOPE_NAME
    try:
        envelope = sign(statement(run_dir), load_private_key(options.key))
    except AttestationError as error:
        print(f"genapi-conformance: {error}", file=sys.stderr)
        return EXIT_USAGE
    out.write_text(json.dumps(envelope, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out} (keyid {envelope['signatures'][0]['keyid']})")
    return EXIT_OK
