"""The reference implementation of the Generation API (the suite's embedded default target).

A real service: Starlette on uvicorn, one SQLite database in WAL mode. Start it with
``python -m reference serve`` (see ``reference/__main__.py`` and ARCHITECTURE.md).

Modules of the service core:

| module | holds |
| --- | --- |
| ``config`` | the frozen :class:`~reference.config.Config` of a running service |
| ``store`` | the SQLite store (WAL, per-thread connections, ``transaction()``) |
| ``errors`` | ``ApiError`` and the ``{"detail": ...}`` error body |
| ``faults`` | the registry of injectable faults, each naming a catalog requirement |
| ``auth`` | API keys on /v1 and console sessions (JWT) on /api |
| ``ratelimit`` | per-key minute and day limits and the 429 of spec §7 |
| ``tiers`` (+ ``tiers.toml``) | tier records and prices, as configuration |
| ``accounts`` | accounts, keys (hashed), the 10-active-keys limit |
| ``generations`` | submit, read, the durable worker queue, the sandbox contract |
| ``media`` | the small real output files (PNG, MP4, WAV, JSON) |
| ``bodies`` | bounded, checked JSON request bodies |
| ``console`` | the /api paths of the core (session, keys, tier) |
| ``provision`` | ``--provision``: accounts, keys, sessions, the target profile |
| ``app`` | wiring, routes, error rendering, request logs, lifespan |
| ``logs`` | one JSON log line per event on stderr |

``webhooks`` (registered webhooks, bindings, durable deliveries) and ``netguard``
(callback URL rules, resolvers, the egress-guarded delivery transport) are the other two
parts; the reference never imports ``conformance``.
"""

from __future__ import annotations
