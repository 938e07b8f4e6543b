"""HTTP routes of the webhook side: thin handlers over ``WebhookService`` (spec §4).

Console paths (/api/webhooks...) need a signed-in session; the delivery paths under /v1
take an API key with no particular scope ("API key allowed"; with the choice
``session_on_key_endpoints`` a signed-in session too) and only ever show the caller's own
account (404 otherwise, the same answer as for an unknown id, so ids of other accounts
cannot be probed; or 403, the choice ``foreign_resource_status``).

Payload choices applied here (``Config.choices``, the spec shows none of these):
``console_webhook_payloads`` (``url``, ``events``, ``secret`` / ``endpoint_url``,
``event_types``, ``signing_secret``; creation 201 with ``created_at`` / 200 with
``enabled``; the list an object ``{"webhooks", "total"}`` / a bare array; deletion 204 /
200 with a body; a test answer with ``id`` / ``delivery_id``), ``redeliver_answer`` (the attempt
too / outcome and status_code only) and ``record_extras`` (a record's ``id``, ``mode``,
``webhook_id`` and times / ``delivery_id``, ``generation_id`` and ``created_at``).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from reference.auth import Authenticator, require_session
from reference.bodies import read_json_object

from .service import WebhookService

__all__ = ["webhook_routes"]

#: The variant's names of a registered webhook's fields (choice console-webhook-payloads).
VARIANT_WEBHOOK_FIELDS = {
    "url": "endpoint_url",
    "events": "event_types",
    "secret": "signing_secret",
}
#: The spec's fields of a delivery record (§2) and of a redeliver answer (§4).
RECORD_FIELDS = ("event_type", "outcome", "status_code", "target_url", "attempts")
REDELIVER_FIELDS = ("outcome", "status_code")


def _renamed(body: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    return {names.get(name, name): value for name, value in body.items()}


def _only(answer: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {name: answer[name] for name in names if name in answer}


def _minimal_record(record: dict[str, Any]) -> dict[str, Any]:
    """A delivery record under ``record_extras = "minimal"``."""
    kept = {name: record.get(name) for name in RECORD_FIELDS}
    return {
        "delivery_id": record.get("id"),
        **kept,
        "generation_id": record.get("generation_id"),
        "created_at": record.get("created_at"),
    }


def webhook_routes(service: WebhookService) -> list[BaseRoute]:
    """Routes bound to one service instance."""
    choices = service.choices
    variant_console = choices.console_webhook_payloads == "variant"

    def account(request: Request) -> str:
        authenticator: Authenticator = request.app.state.authenticator
        return authenticator.account_for_key_allowed(request)

    def listing(answer: dict[str, Any]) -> Response:
        if choices.record_extras == "minimal":
            answer = {**answer, "deliveries": [_minimal_record(r) for r in answer["deliveries"]]}
        return JSONResponse(answer)

    async def create_webhook(request: Request) -> Response:
        session = await require_session(request)
        body = await read_json_object(request)
        if variant_console:
            body = _renamed(body, {new: old for old, new in VARIANT_WEBHOOK_FIELDS.items()})
        created = await service.create_webhook(session.account_id, body)
        if variant_console:
            del created["created_at"]
            return JSONResponse(_renamed({**created, "enabled": True}, VARIANT_WEBHOOK_FIELDS))
        return JSONResponse(created, status_code=201)

    async def list_webhooks(request: Request) -> Response:
        session = await require_session(request)
        webhooks = service.list_webhooks(session.account_id)
        if variant_console:
            listed = [
                _renamed({**w, "enabled": True}, VARIANT_WEBHOOK_FIELDS)
                for w in webhooks["webhooks"]
            ]
            return JSONResponse(listed)
        return JSONResponse(webhooks)

    async def delete_webhook(request: Request) -> Response:
        session = await require_session(request)
        webhook_id = request.path_params["webhook_id"]
        service.delete_webhook(session.account_id, webhook_id)
        if variant_console:
            return JSONResponse({"id": webhook_id, "deleted": True})
        return Response(status_code=204)

    async def test_webhook(request: Request) -> Response:
        session = await require_session(request)
        answer = await service.test_webhook(session.account_id, request.path_params["webhook_id"])
        if variant_console:
            answer = {"delivery_id": answer.get("id"), **_only(answer, REDELIVER_FIELDS)}
        return JSONResponse(answer)

    async def generation_deliveries(request: Request) -> Response:
        return listing(
            service.generation_deliveries(account(request), request.path_params["generation_id"])
        )

    async def webhook_deliveries(request: Request) -> Response:
        return listing(
            service.webhook_deliveries(
                account(request),
                request.path_params["webhook_id"],
                outcome=request.query_params.get("outcome"),
                limit=request.query_params.get("limit"),
            )
        )

    async def redeliver(request: Request) -> Response:
        answer = await service.redeliver(account(request), request.path_params["delivery_id"])
        if choices.redeliver_answer == "minimal":
            answer = _only(answer, REDELIVER_FIELDS)
        return JSONResponse(answer)

    return [
        Route("/api/webhooks", create_webhook, methods=["POST"]),
        Route("/api/webhooks", list_webhooks, methods=["GET"]),
        Route("/api/webhooks/{webhook_id}/test", test_webhook, methods=["POST"]),
        Route("/api/webhooks/{webhook_id}", delete_webhook, methods=["DELETE"]),
        Route("/v1/generations/{generation_id}/deliveries", generation_deliveries, methods=["GET"]),
        Route("/v1/webhooks/{webhook_id}/deliveries", webhook_deliveries, methods=["GET"]),
        Route("/v1/webhooks/deliveries/{delivery_id}/redeliver", redeliver, methods=["POST"]),
    ]
