"""``genapi-conformance keygen``: an Ed25519 key pair to sign attestations with.

Writes ``PREFIX.key`` (PKCS#8 PEM, unencrypted, readable by its owner only) and
``PREFIX.pub`` (SubjectPublicKeyInfo PEM, to hand to whoever verifies).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization

from conformance.attestation import generate_key, key_id
from conformance.run.commands import EXIT_OK
from conformance.run.commands.common import fail, subcommand

__all__ = ["main", "register"]

#: What ``--help`` says of the command (one line in the list, then its own page).
HELP = "make an Ed25519 key pair to sign attestations with"
DESCRIPTION = "Write PREFIX.key (private, mode 0600) and PREFIX.pub (public)."


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("genapi-attestation"),
        metavar="PREFIX",
        help="path prefix of the two files (default: genapi-attestation)",
    )
    parser.add_argument("--force", action="store_true", help="replace existing files")


def main(options: argparse.Namespace) -> int:
    prefix: Path = options.out
    private_path = prefix.with_name(prefix.name + ".key")
    public_path = prefix.with_name(prefix.name + ".pub")
    taken = [str(p) for p in (private_path, public_path) if p.exists()]
    if taken and not options.force:
        return fail(f"{', '.join(taken)} exists (or pass --force)")
    key = generate_key()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    # Created with its final mode: the private key is never readable by others, not even
    # for a moment.
    private_path.unlink(missing_ok=True)
    descriptor = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as stream:
        stream.write(private_pem)
    public_path.write_bytes(public_pem)
    print(f"wrote {private_path} (keep it secret) and {public_path}")
    print(f"keyid {key_id(key.public_key())}")
    return EXIT_OK


#: Adds the subcommand to the CLI (:func:`~conformance.run.commands.common.subcommand`).
register = subcommand("keygen", HELP, DESCRIPTION, _arguments, main)
