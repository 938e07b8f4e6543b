"""``python -m reference serve|faults``: run the reference service, list its faults.

``serve`` binds the listening socket first (``--port 0`` picks a free port, so
``base_url`` is known), opens the store, provisions when asked (the profile is written
before the service announces itself), starts uvicorn on that socket and prints
``listening on http://HOST:PORT`` on stdout once it accepts connections. SIGTERM/SIGINT
stop it gracefully; queued generations and pending deliveries resume at the next start.
``serve --workers N`` runs N processes over the one socket and store
(``reference.processes``); the parent announces them once every one accepts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import socket
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import uvicorn
from starlette.applications import Starlette

from reference.app import build_service, create_app
from reference.clock import TEST_CLOCK_PATH
from reference.config import (
    VARIANT,
    VARIANT_TIMER_SLACK_S,
    Choices,
    Config,
    load_master_secret,
)
from reference.faults import FAULTS, UnknownFault, known
from reference.logs import log_event
from reference.processes import serve_processes
from reference.provision import ACCOUNTS, provision
from reference.store import Store, StoreUnavailable
from reference.tiers import load_tiers
from reference.webhooks import SCHEMA_SQL

__all__ = ["main"]

STARTUP_TIMEOUT_S = 30.0
#: Spec §6: each delivery attempt times out after 10 s (``Config``'s default).
SPEC_DELIVERY_TIMEOUT_S = Config.delivery_timeout_s


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host.strip("[]"), int(port)


def _number(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {value!r}") from None


def _seconds(value: str) -> float:
    seconds = _number(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {value!r}")
    return seconds


#: Real HTTP clients' timers fire up to about a second late; more is another timeout.
MAX_TIMER_SLACK_S = 1.0


def _slack(value: str) -> float:
    seconds = _number(value)
    if not 0 <= seconds <= MAX_TIMER_SLACK_S:
        raise argparse.ArgumentTypeError(
            f"expected 0 to {MAX_TIMER_SLACK_S:g} seconds of timer slack, got {value!r}"
        )
    return seconds


#: Bound on ``serve --workers``.
MAX_WORKERS = 32


def _workers(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"expected 1 to {MAX_WORKERS} processes, got {value!r}")
    return int(value)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m reference", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the reference service")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    serve.add_argument("--db", type=Path, default=Path("reference.sqlite3"))
    serve.add_argument(
        "--provision",
        type=Path,
        metavar="PROFILE_PATH",
        help="create accounts, keys, sessions and write this profile (TOML)",
    )
    serve.add_argument(
        "--allow-cidr",
        action="append",
        default=[],
        metavar="CIDR",
        help="TEST MODE: treat this CIDR as public for callback targets",
    )
    serve.add_argument("--hosts-file", type=Path, help="TEST MODE: resolve callback hosts here")
    serve.add_argument(
        "--dns-server",
        type=_host_port,
        metavar="HOST:PORT",
        help="TEST MODE: resolve callback hosts through this DNS server",
    )
    serve.add_argument(
        "--egress",
        choices=["loopback", "any"],
        default="loopback",
        help="where deliveries may connect (default loopback only)",
    )
    serve.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="NAME",
        help="inject a registered fault (see `python -m reference faults`)",
    )
    serve.add_argument("--latency-ms", type=int, default=200)
    serve.add_argument(
        "--delivery-timeout",
        type=_seconds,
        default=SPEC_DELIVERY_TIMEOUT_S,
        metavar="SECONDS",
        help=f"per-attempt delivery timeout (default {SPEC_DELIVERY_TIMEOUT_S:g}, the spec's; "
        "any other value is logged as a WARNING)",
    )
    serve.add_argument(
        "--timer-slack",
        type=_slack,
        default=None,
        metavar="SECONDS",
        help="test mode: let the delivery timer fire up to SECONDS (at most 1) late, rounded "
        "to the loop clock's next whole second, as aiohttp's timers do (default 0; "
        f"{VARIANT_TIMER_SLACK_S:g} with --variant)",
    )
    serve.add_argument(
        "--test-clock",
        action="store_true",
        help="TEST MODE: let a harness move the calendar clock of the daily limits forward "
        '(POST /test/clock {"advance_seconds": N}); the provisioned profile declares it '
        "as its [clock]",
    )
    serve.add_argument(
        "--tiers",
        type=Path,
        metavar="FILE",
        help="tiers and prices from FILE (the shape of reference/tiers.toml, every tier the "
        "provisioned accounts use) instead of the shipped ones",
    )
    serve.add_argument("--key-prefix", default="gk")
    serve.add_argument(
        "--workers",
        type=_workers,
        default=1,
        metavar="N",
        help="serve from N processes over the one store (default 1): the rate windows and "
        "counters live in the store, the first process alone makes the delivery attempts",
    )
    serve.add_argument(
        "--variant",
        action="store_true",
        help="take the other legitimate side of every choice the spec leaves open "
        "(reference.config.VARIANT; the profile --provision writes declares it), with "
        f"delivery timers up to {VARIANT_TIMER_SLACK_S:g} s late unless --timer-slack says",
    )
    faults = commands.add_parser("faults", help="list the fault registry")
    faults.add_argument(
        "--json",
        action="store_true",
        help="one JSON array of {name, requirement_id, description} (for tools)",
    )
    return parser  # fmt: skip


def _timer_slack(args: argparse.Namespace) -> float:
    """``--timer-slack``, else the variant's slack with ``--variant``, else none."""
    if args.timer_slack is not None:
        slack: float = args.timer_slack
        return slack
    return VARIANT_TIMER_SLACK_S if args.variant else 0.0


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY on accepted connections only when
    # the listening socket says TCP, and without it every response waits ~40 ms (Nagle
    # against delayed ACK).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _warn_non_default(config: Config) -> None:
    if config.delivery_timeout_s != SPEC_DELIVERY_TIMEOUT_S:
        sys.stderr.write(
            f"WARNING: delivery timeout is {config.delivery_timeout_s:g} s, not the spec's "
            f"{SPEC_DELIVERY_TIMEOUT_S:g} s (--delivery-timeout)\n"
        )
        log_event(
            "warning",
            message="delivery timeout differs from the spec's",
            delivery_timeout_s=config.delivery_timeout_s,
        )
    if config.delivery_timer_slack_s:
        sys.stderr.write(
            f"WARNING: test mode: delivery timers may fire up to "
            f"{config.delivery_timer_slack_s:g} s late (--timer-slack)\n"
        )
    if config.test_clock:
        sys.stderr.write(
            "WARNING: TEST MODE: the calendar clock of the daily limits can be moved forward "
            f"by anyone who can reach POST {TEST_CLOCK_PATH} (--test-clock)\n"
        )
        log_event("warning", message="test mode: movable clock", path=TEST_CLOCK_PATH)
    if config.egress != "loopback":
        sys.stderr.write(
            f"WARNING: deliveries may connect beyond loopback (--egress {config.egress})\n"
        )
        log_event("warning", message="delivery egress beyond loopback", egress=config.egress)
    if not config.test_mode:
        return
    settings = {
        "allow_cidrs": list(config.allow_cidrs),
        "hosts_file": str(config.hosts_file) if config.hosts_file else None,
        "dns_server": config.dns_server,
    }
    sys.stderr.write(
        "WARNING: TEST MODE: callback URL rules are loosened "
        f"({', '.join(k for k, v in settings.items() if v)}); never run this against a "
        "network you care about\n"
    )
    log_event("warning", message="test mode: callback URL rules loosened", **settings)


async def _serve(server: uvicorn.Server, sock: socket.socket, announce: Callable[[], None]) -> None:
    task = asyncio.create_task(server.serve(sockets=[sock]))
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not server.started:
        if task.done() or time.monotonic() > deadline:
            server.should_exit = True
            await task
            raise SystemExit("the service failed to start (see the log above)")
        await asyncio.sleep(0.01)
    announce()
    await task


def _server(app: Starlette) -> uvicorn.Server:
    return uvicorn.Server(
        uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,  # our own JSON request log replaces it
            lifespan="on",
            timeout_graceful_shutdown=5,
            server_header=False,
        )
    )


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop when installed (a dependency: it roughly halves the service's
    CPU per request), else asyncio's own."""
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def _tiers_problem(path: Path, choices: Choices) -> str | None:
    """What is wrong with a ``--tiers`` file (None: nothing): unreadable, not the shape of
    tiers.toml (the field named), or lacking a tier a provisioned account uses."""
    try:
        tiers = load_tiers(choices.prices, path)
    except OSError as error:
        return f"cannot read {path}: {error.strerror or error}"
    except ValueError as error:
        return str(error)
    missing = sorted(set(ACCOUNTS.values()) - set(tiers.tiers))
    if missing:
        return f"{path}: tiers.{missing[0]} is missing (a provisioned account uses it)"
    return None


def serve(args: argparse.Namespace) -> int:
    try:
        faults = known(args.fault)
    except UnknownFault as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.workers > 1 and args.test_clock:
        print(
            "error: --test-clock keeps its clock in one process's memory: use --workers 1",
            file=sys.stderr,
        )
        return 2
    choices = VARIANT if args.variant else Choices()
    if args.tiers is not None:
        problem = _tiers_problem(args.tiers, choices)
        if problem:
            print(f"error: --tiers {problem}", file=sys.stderr)
            return 2
    sock = _bind(args.host, args.port)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}"
    try:
        args.db.parent.mkdir(parents=True, exist_ok=True)
        store = Store(args.db, extra_schema=[SCHEMA_SQL])
    except (OSError, StoreUnavailable) as error:
        sock.close()
        print(f"error: {error}", file=sys.stderr)
        return 2
    config = Config(
        db_path=args.db,
        host=host,
        port=port,
        base_url=url,
        key_prefix=args.key_prefix,
        latency_ms=args.latency_ms,
        allow_cidrs=tuple(args.allow_cidr),
        hosts_file=args.hosts_file,
        dns_server=args.dns_server,
        egress=args.egress,
        delivery_timeout_s=args.delivery_timeout,
        delivery_timer_slack_s=_timer_slack(args),
        test_clock=args.test_clock,
        faults=faults,
        master_secret=load_master_secret(store),
        choices=choices,
        tiers_file=args.tiers,
        workers=args.workers,
    )
    _warn_non_default(config)
    if faults:
        log_event("warning", message="faults injected", faults=sorted(faults))
    if args.variant:
        log_event("variant", choices=config.choices.differing(Choices()))
    service = build_service(config, store)
    if args.provision is not None:
        provision(service, args.provision)
        log_event("provisioned", profile=str(args.provision))
    if config.workers > 1:
        # Each process opens its own connections: none may cross the fork.
        store.close()
        try:
            return serve_processes(config, sock, url, serve_child)
        finally:
            sock.close()
    server = _server(create_app(service))
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(_serve(server, sock, lambda: print(f"listening on {url}", flush=True)))
    except KeyboardInterrupt:
        # uvicorn re-raises SIGINT after its graceful shutdown: already handled.
        return 130
    finally:
        store.close()
        sock.close()
    return 0


def serve_child(config: Config, sock: socket.socket, announce: Callable[[], None]) -> int:
    """One of the ``--workers`` processes (after the fork): its own store connections,
    service and event loop on the shared listening socket; ``announce`` once it accepts."""
    store = Store(config.db_path, extra_schema=[SCHEMA_SQL])
    server = _server(create_app(build_service(config, store)))
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(_serve(server, sock, announce))
    except KeyboardInterrupt:
        return 130
    finally:
        store.close()
    return 0


def list_faults(*, as_json: bool = False) -> int:
    if as_json:
        # Machine-readable, for tools outside this package (the project's fault matrix
        # reads it through this command, the path users have).
        rows = [
            {"name": f.name, "requirement_id": f.requirement_id, "description": f.description}
            for f in FAULTS.values()
        ]
        print(json.dumps(rows, indent=2))
        return 0
    width = max(len(name) for name in FAULTS)
    for fault in FAULTS.values():
        print(f"{fault.name:<{width}}  {fault.requirement_id:<16}  {fault.description}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "faults":
        return list_faults(as_json=args.json)
    return serve(args)


if __name__ == "__main__":
    sys.exit(main())
