"""Registered webhooks, created and deleted through the console for set-up.

Spec §4 Console endpoints lists ``POST /api/webhooks`` and ``DELETE /api/webhooks/{id}``
without showing their payloads: the requests and where the answer holds the id and the
``whsec_`` secret (spec §2) come from the profile's ``[adapter.create_webhook]`` and
``[adapter.delete_webhook]`` declarations. A console that differs from its declaration
fails the set-up (:class:`SetupFailed`), an error, never a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass

from conformance.secrets import Secret
from conformance.target.adapters import console_request, declared
from conformance.target.client import ApiClient
from conformance.target.setup import SetupFailed

__all__ = ["RegisteredWebhook", "delete_webhook", "register_webhook"]


@dataclass(frozen=True)
class RegisteredWebhook:
    """A webhook registered through the console, with its whsec_ secret (spec §2)."""

    id: str
    secret: Secret
    session: str


def register_webhook(
    client: ApiClient,
    url: str,
    *,
    session: str = "primary",
    events: tuple[str, ...] | None = None,
) -> RegisteredWebhook:
    """Register *url* with the console (spec §4 Console endpoints: POST /api/webhooks).

    The payload is the profile's ``[adapter.create_webhook]`` declaration; by default
    ``url`` and ``events`` in, ``id`` and ``secret`` out, which the spec does not show
    (catalog HOOK-CREATE-01): an IUT that differs from its declaration fails this set-up,
    an error.
    """
    create = declared(client.profile, "create_webhook")
    response = console_request(
        client,
        "create_webhook",
        session=session,
        url=url,
        events=None if events is None else list(events),
    )
    where = f"{create.method} {create.path}"
    if not create.accepts(response.status_code):
        raise SetupFailed(
            f"setup: {where} answered {response.status_code}, expected {create.expected}: "
            f"{client.recorder.redactor.text(response.text[:200])!r}"
        )
    try:
        answer = response.json()
    except ValueError:
        answer = None
    webhook_id, secret = create.read_id(answer, "id"), create.read(answer, "secret")
    if webhook_id is None or not isinstance(secret, str):
        raise SetupFailed(
            f"setup: {where} did not answer the webhook id at {create.where('id')} and its "
            f"secret at {create.where('secret')} (HOOK-CREATE-01; the profile's "
            "[adapter.create_webhook] declares them)"
        )
    return RegisteredWebhook(webhook_id, Secret(secret), session)


def delete_webhook(client: ApiClient, webhook: RegisteredWebhook) -> None:
    """Delete a webhook this suite registered; a failure is raised (a leftover webhook
    would receive later events). Already gone (404) is fine."""
    response = console_request(client, "delete_webhook", session=webhook.session, id=webhook.id)
    delete = declared(client.profile, "delete_webhook")
    if not (delete.accepts(response.status_code) or response.status_code == 404):
        raise SetupFailed(
            f"teardown: {delete.method} {delete.path} answered {response.status_code}, "
            f"expected {delete.expected}"
        )
