"""The webhook side of the reference implementation (spec §2-§7).

Registered webhooks (console), per-request bindings, events, signatures, durable
delivery with retries, delivery records and redelivery. One job per module:

| module          | job                                                            |
| --------------- | -------------------------------------------------------------- |
| ``schema``      | the tables (``SCHEMA_SQL``, passed to ``Store(extra_schema=)``) |
| ``signing``     | ``X-Service-Signature`` (HMAC-SHA256 over ``t.`` + raw body)    |
| ``envelopes``   | event names, envelope and callback bodies, serialized once     |
| ``targets``     | target selection at submit, URL validation, bindings           |
| ``events``      | which event a finished generation fires; its queued delivery   |
| ``sender``      | one HTTP attempt (headers, timeout, no redirects)              |
| ``attempts``    | client, secrets and options of every attempt; manual attempts  |
| ``records``     | SQL of deliveries and attempts; the delivery record view       |
| ``dispatcher``  | the durable retry loop (resumes after a restart); its policy   |
| ``registered``  | the console's registered webhooks (create, list, delete, test) |
| ``lists``       | the two delivery list endpoints                                |
| ``redeliver``   | replaying a delivery                                           |
| ``service``     | ``WebhookService``, what the generation core and routes call   |
| ``routes``      | the HTTP handlers                                              |

Extension: the console test delivery sends the event ``webhook.test``.
"""

from __future__ import annotations

from .envelopes import ALL_EVENTS, DEFAULT_EVENTS, TEST_EVENT
from .routes import webhook_routes
from .schema import OUTCOMES, SCHEMA_SQL
from .service import WebhookService
from .signing import signature_digest, signature_header
from .targets import Binding, policy_from_config

__all__ = [
    "ALL_EVENTS",
    "DEFAULT_EVENTS",
    "OUTCOMES",
    "SCHEMA_SQL",
    "TEST_EVENT",
    "Binding",
    "WebhookService",
    "policy_from_config",
    "signature_digest",
    "signature_header",
    "webhook_routes",
]
