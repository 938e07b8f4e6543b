"""The reference implementation of the Generation API (the suite's embedded default target).

A real service: Starlette on uvicorn, one SQLite database in WAL mode. Start it with
``python -m reference serve`` (see ``reference/__main__.py`` and ARCHITECTURE.md).

Modules of the service core:

| module | holds |
| --- | --- |
| ``config`` | the frozen :class:`~reference.config.Config` of a running service |
| ``store`` | the SQLite store (WAL, per-thread connections, ``transaction()``) |
| ``errors`` | ``ApiError`` and the ``{"detail": ...}`` error body |
| ``fault`` | the ``Fault`` type and ``Faults``, the set a running service switched on |
| ``faults`` | the registry: every fault, collected from the modules that declare it |
| ``auth`` | API keys on /v1 and console sessions (JWT) on /api |
| ``ratelimit`` | per-key minute and day limits (in the store with ``--workers``), the 429 |
| ``tiers`` (+ ``tiers.toml``) | tier records and prices, as configuration |
| ``accounts`` | accounts, keys (hashed), the 10-active-keys limit |
| ``generations`` | the submit endpoints (body checks, credits, concurrency) and reads |
| ``worker`` | the durable queue that runs generations; the sandbox contract |
| ``media`` | the small real output files (PNG, MP4, WAV, JSON) |
| ``bodies`` | bounded, checked JSON request bodies |
| ``console`` | the /api paths of the core (session, keys, tier) |
| ``provision`` | ``--provision``: accounts, keys, sessions, the target profile |
| ``app`` | wiring, routes, error rendering, request logs, lifespan |
| ``logs`` | one JSON log line per event on stderr |
| ``processes`` | ``serve --workers N``: N forked processes over one socket and one store |
| ``aio`` | asyncio helpers of the worker and the dispatcher |

``webhooks`` (registered webhooks, bindings, durable deliveries) and ``netguard``
(callback URL rules, resolvers, the egress-guarded delivery transport) are the other two
parts; the reference never imports ``conformance``.
"""

from __future__ import annotations
