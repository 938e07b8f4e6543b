"""HTTP routes of the webhook side: thin handlers over ``WebhookService`` (spec §4).

Console paths (/api/webhooks...) need a signed-in session; the delivery paths under /v1
take an API key with no particular scope ("API key allowed") and only ever show the
key's own account (404 otherwise, the same answer as for an unknown id, so ids of other
accounts cannot be probed).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from reference.auth import require_key, require_session
from reference.bodies import read_json_object

from .service import WebhookService

__all__ = ["webhook_routes"]


def webhook_routes(service: WebhookService) -> list[BaseRoute]:
    """Routes bound to one service instance."""

    async def create_webhook(request: Request) -> Response:
        session = await require_session(request)
        created = await service.create_webhook(session.account_id, await read_json_object(request))
        return JSONResponse(created, status_code=201)

    async def list_webhooks(request: Request) -> Response:
        session = await require_session(request)
        return JSONResponse(service.list_webhooks(session.account_id))

    async def delete_webhook(request: Request) -> Response:
        session = await require_session(request)
        service.delete_webhook(session.account_id, request.path_params["webhook_id"])
        return Response(status_code=204)

    async def test_webhook(request: Request) -> Response:
        session = await require_session(request)
        answer = await service.test_webhook(session.account_id, request.path_params["webhook_id"])
        return JSONResponse(answer)

    async def generation_deliveries(request: Request) -> Response:
        key = await require_key(request)
        listing = service.generation_deliveries(
            key.account_id, request.path_params["generation_id"]
        )
        return JSONResponse(listing)

    async def webhook_deliveries(request: Request) -> Response:
        key = await require_key(request)
        listing = service.webhook_deliveries(
            key.account_id,
            request.path_params["webhook_id"],
            outcome=request.query_params.get("outcome"),
            limit=request.query_params.get("limit"),
        )
        return JSONResponse(listing)

    async def redeliver(request: Request) -> Response:
        key = await require_key(request)
        answer = await service.redeliver(key.account_id, request.path_params["delivery_id"])
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
