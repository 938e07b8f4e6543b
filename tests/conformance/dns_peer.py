"""Another process of a run, for the DNS zone tests: joins a zone and edits it on command.

``python dns_peer.py ZONE_DIR PORT`` joins the zone (:meth:`DnsServer.join`), prints
``joined serving=<bool>``, then reads one command a line from stdin and answers each with
one line: ``set NAME ADDR...``, ``rebind NAME AFTER ADDR...``, ``remove NAME``,
``serving`` (``serving=<bool>``), ``queries NAME`` (how many the zone logged for NAME),
``stop LINGER`` (stops, prints ``stopped``, exits). End of input stops it too.
"""

from __future__ import annotations

import sys
from pathlib import Path

from conformance.observe.dns import DEFAULT_DOMAIN, DnsServer


def main() -> int:
    zone_dir, port = Path(sys.argv[1]), int(sys.argv[2])
    server = DnsServer.join(DEFAULT_DOMAIN, "127.0.0.1", port, zone_dir=zone_dir)
    print(f"joined serving={server.serving}", flush=True)
    for line in sys.stdin:
        command, *args = line.split()
        if command == "set":
            print(server.set(args[0], args[1:]), flush=True)
        elif command == "rebind":
            print(server.rebind(args[0], args[2:], after_queries=int(args[1])), flush=True)
        elif command == "remove":
            server.remove(args[0])
            print("removed", flush=True)
        elif command == "serving":
            print(f"serving={server.serving}", flush=True)
        elif command == "queries":
            print(len([q for q in server.queries if q.name == server.name(args[0])]), flush=True)
        elif command == "stop":
            server.stop(linger=float(args[0]))
            print("stopped", flush=True)
            return 0
        else:
            print(f"unknown command {command}", flush=True)
    server.stop(linger=0)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
