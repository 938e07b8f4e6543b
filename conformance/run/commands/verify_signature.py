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

from conformance.run.commands import EXIT_FAILED, EXIT_OK
from conformance.run.commands.common import fail, subcommand
from conformance.secrets import Secret
from conformance.target.profile import ProfileError, load_profile
from conformance.target.wire import SECRET_KEYINGS, WireProfile
from conformance.webhooks import verify_webhook

__all__ = [
    "SecretInputError",
    "add_secret_options",
    "add_wire_options",
    "main",
    "register",
    "secret_of",
]

#: What ``--help`` says of the command (one line in the list, then its own page).
HELP = "check a webhook delivery's signature (valid, or why not)"
DESCRIPTION = (
    "Verify X-<brand>-Signature over the raw body with the webhook secret. "
    "Exit 0 valid, 1 invalid, 2 usage error."
)

DEFAULT_SECRET_ENV = "GENAPI_WEBHOOK_SECRET"  # noqa: S105 (a variable's name)


def _arguments(parser: argparse.ArgumentParser) -> None:
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
    add_wire_options(parser)
    parser.add_argument(
        "--tolerance",
        type=float,
        metavar="SECONDS",
        help="also reject a t further than this from now (the spec states no window; "
        "off by default, as a saved delivery is checked later)",
    )
    parser.add_argument("--now", type=float, metavar="UNIX", help="judge t against this time")


def add_secret_options(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """``--secret-env VAR`` / ``--secret-file FILE`` / ``--profile FILE --key-role ROLE``:
    where the webhook secret is read (never from the command line itself)."""
    secret = parser.add_mutually_exclusive_group()
    secret.add_argument(
        "--secret-env",
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


def add_wire_options(parser: argparse.ArgumentParser) -> None:
    """``--brand`` and ``--keying``: the deployment's header brand word and secret keying
    (the profile's ``[wire]``)."""
    parser.add_argument("--brand", default="Service", help="header brand word (default Service)")
    parser.add_argument("--keying", choices=SECRET_KEYINGS, default="utf8")


class SecretInputError(ValueError):
    """The secret named by the options cannot be had; the message (one line) names the
    option and the fix."""


def _profile_secret(path: Path | None, role: str) -> Secret:
    """The signing secret of key *role* in the profile at *path*."""
    if path is None:
        raise SecretInputError(
            f"--key-role {role} needs --profile FILE, the target profile holding that role"
        )
    try:
        keys = load_profile(path).keys
    except ProfileError as error:
        raise SecretInputError(f"--profile {path}: {'; '.join(error.problems)}") from None
    except UnicodeDecodeError:
        raise SecretInputError(
            f"--profile {path}: is not UTF-8 text; give a TOML profile"
        ) from None
    key = keys.get(role)
    if key is None:
        raise SecretInputError(
            f"--key-role {role}: {path} has no such key role (it has: {', '.join(keys)})"
        )
    if key.signing_secret is None:
        raise SecretInputError(
            f"--key-role {role}: {path} gives no signing_secret for key role {role!r}; add "
            f"signing_secret (or signing_secret_env) to its [keys.{role}]"
        )
    return key.signing_secret


def _file_secret(path: Path) -> Secret:
    try:
        value = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        problem = "does not exist"
    except OSError as error:
        problem = f"cannot be read ({error.strerror})"
    except UnicodeDecodeError:
        problem = "is not UTF-8 text"
    else:
        if value:
            return Secret(value)
        problem = "is empty"
    raise SecretInputError(
        f"--secret-file {path}: {problem}; give a readable file holding the webhook secret"
    )


def secret_of(options: argparse.Namespace, *, required: bool = True) -> Secret | None:
    """The secret :func:`add_secret_options` names; None when none was asked for and it is
    not *required* (the default variable unset). Raises :class:`SecretInputError`."""
    if options.key_role is not None:
        return _profile_secret(options.profile, options.key_role)
    if options.profile is not None:
        raise SecretInputError(
            f"--profile {options.profile} needs --key-role ROLE: the key role whose "
            "signing_secret verifies the deliveries"
        )
    if options.secret_file is not None:
        return _file_secret(options.secret_file)
    name = options.secret_env or DEFAULT_SECRET_ENV
    value = os.environ.get(name)
    if value is None and not required and options.secret_env is None:
        return None
    if value is None:
        raise SecretInputError(
            f"no secret: ${name} is not set; set it, or pass --secret-file FILE or "
            "--profile FILE --key-role ROLE"
        )
    if not value.strip():
        raise SecretInputError(
            f"no secret: ${name} is empty; put the webhook secret in it, or pass "
            "--secret-file FILE or --profile FILE --key-role ROLE"
        )
    return Secret(value)


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


def main(options: argparse.Namespace) -> int:
    headers = _headers(options)
    if isinstance(headers, str):
        return fail(headers)
    try:
        secret = secret_of(options)
    except SecretInputError as error:
        return fail(error)
    assert secret is not None  # required: never None
    try:
        body = sys.stdin.buffer.read() if str(options.body) == "-" else options.body.read_bytes()
    except OSError as error:
        return fail(f"cannot read {options.body}: {error.strerror}")
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
    detail += [f"warning: {warning}" for warning in result.warnings if result.valid]
    if result.valid:
        print(f"valid ({', '.join(detail)})")
        return EXIT_OK
    print(f"invalid: {result.reason} ({', '.join(detail)})")
    return EXIT_FAILED


#: Adds the subcommand to the CLI (:func:`~conformance.run.commands.common.subcommand`).
register = subcommand("verify-signature", HELP, DESCRIPTION, _arguments, main)
