"""``genapi-conformance verify-signature``: does a delivery's signature verify, and if not why.

Takes the delivery's raw body from a file (``-``: stdin, the exact bytes) and its headers
(``--header 'Name: value'``, repeatable, or ``--signature`` for the signature header's
value alone) and the secret from an environment variable or a file, never from the
command line (where the process list and the shell history would keep it). Prints
``valid`` or ``invalid: <why>`` with the diagnosis of :mod:`conformance.webhooks`.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from conformance.run.commands import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from conformance.secrets import Secret
from conformance.target.profile import ProfileError, load_profile
from conformance.target.wire import SECRET_KEYINGS, WireProfile
from conformance.webhooks import verify_webhook

__all__ = ["add_secret_options", "main", "register", "secret_of"]

DEFAULT_SECRET_ENV = "GENAPI_WEBHOOK_SECRET"  # noqa: S105 (a variable's name)


def register(commands: argparse._SubParsersAction[Any]) -> None:
    parser = commands.add_parser(
        "verify-signature",
        help="check a webhook delivery's signature (valid, or why not)",
        description="Verify X-<brand>-Signature over the raw body with the webhook secret. "
        "Exit 0 valid, 1 invalid, 2 usage error.",
    )
    parser.add_argument("body", type=Path, help="the raw request body ('-' reads stdin)")
    parser.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="a delivery header as received (repeatable)",
    )
    parser.add_argument("--signature", metavar="VALUE", help="the signature header's value")
    add_secret_options(parser)
    parser.add_argument("--brand", default="Service", help="header brand word (default Service)")
    parser.add_argument("--keying", choices=SECRET_KEYINGS, default="utf8")
    parser.add_argument(
        "--tolerance",
        type=float,
        metavar="SECONDS",
        help="also reject a t further than this from now (the spec states no window; "
        "off by default, as a saved delivery is checked later)",
    )
    parser.add_argument("--now", type=float, metavar="UNIX", help="judge t against this time")
    parser.set_defaults(handler=main)


def add_secret_options(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """``--secret-env VAR`` / ``--secret-file FILE``: where the webhook secret is read
    (never from the command line itself)."""
    secret = parser.add_mutually_exclusive_group()
    secret.add_argument(
        "--secret-env",
        default=DEFAULT_SECRET_ENV,
        metavar="VAR",
        help=f"environment variable holding the secret (default {DEFAULT_SECRET_ENV})"
        + ("" if required else "; without one, signatures are not verified"),
    )
    secret.add_argument("--secret-file", type=Path, metavar="FILE", help="file holding it")
    secret.add_argument(
        "--key-role",
        metavar="ROLE",
        help="the signing secret of this key role of the target profile (--profile)",
    )
    parser.add_argument(
        "--profile", type=Path, metavar="FILE", help="target profile, for --key-role"
    )


def _headers(options: argparse.Namespace) -> dict[str, str] | str:
    """The headers given, or what is wrong with them."""
    headers: dict[str, str] = {}
    for line in options.header:
        name, colon, value = line.partition(":")
        if not colon or not name.strip():
            return f"--header {line!r} is not 'Name: value'"
        headers[name.strip()] = value.strip()
    if options.signature is not None:
        headers[WireProfile(header_brand=options.brand).header("Signature")] = options.signature
    return headers


def _profile_secret(path: Path | None, role: str) -> Secret | str:
    """The signing secret of key *role* in the profile at *path*, or what is wrong."""
    if path is None:
        return "--key-role needs --profile FILE"
    try:
        key = load_profile(path).keys.get(role)
    except (OSError, ProfileError) as error:
        return f"--profile {path}: {error}"
    if key is None or key.signing_secret is None:
        return f"--profile {path}: no signing_secret for key role {role!r}"
    return key.signing_secret


def secret_of(options: argparse.Namespace) -> Secret | str:
    """The secret :func:`add_secret_options` names, or what is wrong (a str)."""
    if options.key_role is not None:
        return _profile_secret(options.profile, options.key_role)
    if options.secret_file is not None:
        try:
            return Secret(options.secret_file.read_text(encoding="utf-8").strip())
        except OSError as error:
            return f"cannot read --secret-file: {error.strerror}"
    value = os.environ.get(options.secret_env)
    if not value:
        return f"no secret: set {options.secret_env} or pass --secret-file"
    return Secret(value)


def main(options: argparse.Namespace) -> int:
    headers = _headers(options)
    secret = secret_of(options)
    if isinstance(headers, str) or isinstance(secret, str):
        problem = headers if isinstance(headers, str) else secret
        print(f"genapi-conformance: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        body = sys.stdin.buffer.read() if str(options.body) == "-" else options.body.read_bytes()
    except OSError as error:
        print(f"genapi-conformance: cannot read {options.body}: {error.strerror}", file=sys.stderr)
        return EXIT_USAGE
    result = verify_webhook(
        body,
        headers,
        secret,
        brand=options.brand,
        keying=options.keying,
        tolerance_s=options.tolerance,
        now=options.now,
    )
    detail = [f"{len(body)} bytes"]
    if result.delivery_id:
        detail.append(f"delivery {result.delivery_id}")
    if result.age_s is not None:
        detail.append(f"t is {result.age_s:.0f} s old")
    if result.valid:
        print(f"valid ({', '.join(detail)})")
        return EXIT_OK
    print(f"invalid: {result.reason} ({', '.join(detail)})")
    return EXIT_FAILED
