"""``genapi-conformance listen``: a standalone webhook receiver that prints each delivery.

What ``stripe listen`` is to Stripe users: point a generation's ``callback_url`` (or a
registered webhook) at the URL it prints, and each delivery shows live, one line each:
arrival time and the gap since the previous attempt of the same delivery, event, delivery
id, generation id, attempt number, the reply given, and the signature verdict with its
diagnosis (:mod:`conformance.webhooks`; with no secret, "not verified"). Retries of a
delivery id already accepted (answered 2xx) are marked as duplicates (receivers dedupe on
it, spec §6).

The receiver is the suite's own (:mod:`conformance.observe.receiver`): replies are
scripted (``--statuses 500,500,200``, the last repeating; ``--delay`` holds each reply),
raw bodies can be saved (``--save-dir``). It listens on loopback unless told otherwise,
and stops after ``--count`` deliveries or ``--duration`` seconds, whichever comes first.
Exit 0 when it stopped as asked, 1 when ``--count`` deliveries did not arrive in time.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from conformance.run.commands import EXIT_FAILED, EXIT_OK
from conformance.run.commands.common import fail, printable, subcommand
from conformance.run.commands.verify_signature import (
    DEFAULT_SECRET_ENV,
    SecretInputError,
    add_secret_options,
    add_wire_options,
    secret_of,
)
from conformance.secrets import Secret
from conformance.target.profile import ReceiverProfile
from conformance.target.wire import SecretKeying, WireProfile
from conformance.webhooks import DeliveryDeduper, delivery_id_of, verify_webhook

if TYPE_CHECKING:
    from conformance.observe.receiver import Endpoint, Reply

__all__ = ["listen", "main", "register", "safe_file_name"]

#: What ``--help`` says of the command (one line in the list, then its own page).
HELP = "a standalone webhook receiver that prints each delivery live"
DESCRIPTION = (
    "Receive webhook deliveries, print each with its signature verdict, "
    "reply as scripted. Exit 0 when done, 1 when --count did not arrive in time."
)

#: The longest a listen may last, so that a forgotten one ends.
MAX_DURATION_S = 24 * 3600.0
#: How often the loop wakes to check its deadline while nothing arrives.
POLL_S = 0.5
#: The most delivery ids whose last attempt is remembered (for the gap between attempts).
MAX_TRACKED_IDS = 10_000
#: What a saved body's file name keeps of a delivery id (the rest is replaced).
_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9._-]")
#: The most characters of a delivery id kept in a file name.
MAX_NAME_CHARS = 64


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="listen address (default loopback)")
    parser.add_argument("--port", type=int, default=0, help="listen port (default: a free one)")
    parser.add_argument(
        "--statuses",
        default="200",
        metavar="S1,S2,...",
        help="reply with these statuses in turn, the last repeating (default 200)",
    )
    parser.add_argument(
        "--delay", type=float, default=0.0, metavar="SECONDS", help="hold each reply this long"
    )
    parser.add_argument("--count", type=int, metavar="N", help="stop after N deliveries")
    parser.add_argument(
        "--duration",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="stop after this long (default 600)",
    )
    parser.add_argument("--save-dir", type=Path, metavar="DIR", help="save each raw body here")
    add_secret_options(parser, required=False)
    add_wire_options(parser)


def _replies(statuses: str, delay: float) -> list[Reply]:
    # The receiver (and pytest-httpserver under it) is imported only when listening: the
    # CLI imports every command before it starts pytest, which must import pytest's
    # plugins itself to rewrite their assertions.
    from conformance.observe.receiver import Reply

    return [Reply(int(status), delay=delay) for status in statuses.split(",")]


def safe_file_name(delivery_id: str) -> str:
    """*delivery_id* (sent by whoever posts to the receiver) as one harmless file name part.

    Keeps ``[A-Za-z0-9._-]``, at most :data:`MAX_NAME_CHARS` of it, never a leading dot;
    when anything was replaced or cut, a short hash of the raw id follows, so that two
    hostile ids cannot collide into one name.
    """
    kept = _UNSAFE_IN_NAME.sub("_", delivery_id)[:MAX_NAME_CHARS].lstrip(".")
    if kept == delivery_id and kept:
        return kept
    digest = hashlib.sha256(delivery_id.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{kept or 'id'}-{digest}"


def listen(
    endpoint: Endpoint,
    out: TextIO,
    *,
    secret: Secret | None,
    brand: str = "Service",
    keying: SecretKeying = "utf8",
    count: int | None = None,
    duration_s: float,
    save_dir: Path | None = None,
) -> int:
    """Print *endpoint*'s deliveries as they arrive until *count* or *duration_s*; how many
    arrived."""
    deadline = time.monotonic() + duration_s
    accepted = DeliveryDeduper(MAX_TRACKED_IDS)
    # Arrival of each delivery id's last attempt, for the gap; as bounded as the deduper.
    last_attempt: dict[str, float] = {}
    shown = 0
    while (count is None or shown < count) and (remaining := deadline - time.monotonic()) > 0:
        # take(), not wait_for(): what was printed is forgotten, so a long listen keeps
        # no record of every delivery.
        for delivery in endpoint.take(timeout=min(POLL_S, remaining)):
            shown += 1
            wall = time.strftime("%H:%M:%S", time.localtime())
            delivery_id = delivery_id_of(delivery.headers, brand=brand) or "-"
            previous = last_attempt.pop(delivery_id, None)
            gap = "" if previous is None else f" (+{delivery.arrived_at - previous:.2f}s)"
            last_attempt[delivery_id] = delivery.arrived_at
            if len(last_attempt) > MAX_TRACKED_IDS:
                del last_attempt[next(iter(last_attempt))]
            if secret is None:
                verdict = "signature not verified (no secret)"
            else:
                result = verify_webhook(
                    delivery.raw_body, delivery.headers, secret, brand=brand, keying=keying
                )
                # A delivery counts as handled only when accepted (2xx): a retry after a
                # 500 is not a duplicate, a retry after a 200 is.
                duplicate = result.delivery_id is not None and result.delivery_id in accepted
                if result.valid and result.delivery_id and 200 <= delivery.replied.status <= 299:
                    accepted.seen_before(result.delivery_id)
                verdict = (
                    ("signature valid" + (", duplicate" if duplicate else ""))
                    if result.valid
                    else f"signature INVALID: {result.reason}"
                )
                if result.valid and result.warnings:
                    verdict += f" (warning: {'; '.join(result.warnings)})"
            line = (
                f"{wall}{gap} #{shown} {delivery.method} event={delivery.header('Event') or '-'} "
                f"delivery={delivery_id} generation={delivery.header('Generation') or '-'} "
                f"attempt={delivery.header('Attempt') or '-'} {len(delivery.raw_body)} bytes "
                f"-> replied {delivery.replied.status}; {verdict}"
            )
            # Every part but the counts came from the network (the reason may quote a
            # header): escaped, a delivery cannot forge a line or a terminal escape.
            print(printable(line), file=out, flush=True)
            if save_dir is not None:
                name = f"{shown:04d}-{safe_file_name(delivery_id)}.body"
                (save_dir / name).write_bytes(delivery.raw_body)
            if count is not None and shown >= count:
                break
    return shown


def main(options: argparse.Namespace) -> int:
    if not 0 < options.duration <= MAX_DURATION_S:
        return fail(f"--duration must be in (0, {MAX_DURATION_S:g}]")
    if options.count is not None and options.count < 1:
        return fail("--count must be 1 or more")
    try:
        replies = _replies(options.statuses, options.delay)
    except ValueError as error:
        return fail(f"--statuses/--delay: {error}")
    try:
        secret = secret_of(options, required=False)
    except SecretInputError as error:
        return fail(error)
    if options.save_dir is not None:
        try:
            options.save_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            return fail(f"--save-dir {options.save_dir}: {error.strerror}; give a folder")
    from conformance.observe.receiver import Receiver

    config = ReceiverProfile(listen_host=options.host, listen_port=options.port)
    try:
        wire = WireProfile(header_brand=options.brand, secret_keying=options.keying)
        receiver = Receiver(config, wire).start()
    except OSError as error:
        return fail(error)
    try:
        endpoint = receiver.endpoint("listen").respond_with(replies)
        print(f"listening: {endpoint.url}", flush=True)
        if secret is None:
            print(
                f"(no secret: ${DEFAULT_SECRET_ENV} is not set and no --secret-file or "
                "--key-role given; signatures are not verified)",
                flush=True,
            )
        try:
            shown = listen(
                endpoint,
                sys.stdout,
                secret=secret,
                brand=options.brand,
                keying=options.keying,
                count=options.count,
                duration_s=options.duration,
                save_dir=options.save_dir,
            )
        except KeyboardInterrupt:
            return EXIT_OK
    finally:
        receiver.stop()
    print(f"{shown} deliveries received", flush=True)
    return EXIT_FAILED if options.count is not None and shown < options.count else EXIT_OK


#: Adds the subcommand to the CLI (:func:`~conformance.run.commands.common.subcommand`).
register = subcommand("listen", HELP, DESCRIPTION, _arguments, main)
