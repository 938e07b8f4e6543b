"""A stand-in for ``python -m reference`` that the launcher tests start.

It speaks the launcher's side of the contract (ARCHITECTURE.md, "Running it"): ``serve``
with ``--port 0 --db --provision --allow-cidr [--fault]``, writes the profile, then prints
``listening on http://HOST:PORT`` once its socket accepts connections. ``FAKE_MODE`` picks
a misbehaviour: ``crash`` (exits with a message on stderr), ``silent`` (never says it is
listening), ``stubborn`` (ignores SIGTERM), ``no-profile`` (listens without a profile).
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import signal
import sys
import threading
from pathlib import Path


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"argv": sys.argv[1:]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--provision", required=True)
    parser.add_argument("--allow-cidr", action="append", default=[])
    parser.add_argument("--fault", action="append", default=[])
    parser.add_argument("--dns-server")
    parser.add_argument("--test-clock", action="store_true")
    args = parser.parse_args()
    mode = os.environ.get("FAKE_MODE", "ok")
    if mode == "crash":
        print("fatal: the store is locked", file=sys.stderr)
        return 7
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), _Handler)
    host, port = server.server_address[:2]
    dns = ""
    if args.dns_server:  # as the reference provisions; FAKE_DNS_DOMAIN makes it disagree
        domain = os.environ.get("FAKE_DNS_DOMAIN", "rebind.genapi.test")
        dns = f'[dns]\nserver = "{args.dns_server}"\ndomain = "{domain}"\n'
    if mode != "no-profile":
        Path(args.provision).write_text(
            f'name = "fake"\nbase_url = "http://{host}:{port}"\n'
            f"faults = {json.dumps(args.fault)}\n{dns}",
            encoding="utf-8",
        )
    Path(args.db).write_text("store", encoding="utf-8")
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    if mode != "silent":
        print(f"listening on http://{host}:{port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
