"""The one error type handlers raise, and how it is rendered.

Errors other than 429 have the body ``{"detail": "<what is wrong and how to fix it>"}``
(ARCHITECTURE.md; the spec leaves that shape unshown, §7), or with the choice
``error_body = "error-object"`` (``serve --variant``) ``{"error": {"message", "status"}}``.
429 responses always have ``{"detail"}`` (spec §7 states it) plus the headers of spec §7,
passed through ``headers``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

__all__ = ["ApiError", "error_response", "error_shape", "render_api_error"]


class ApiError(Exception):
    """An error answer: HTTP ``status``, a human ``detail`` and optional extra headers."""

    def __init__(
        self,
        status: int,
        detail: str,
        headers: Mapping[str, str] | None = None,
        *,
        detail_field: str = "detail",
    ) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail
        self.headers: dict[str, str] = dict(headers or {})
        #: The body field of ``detail``; another name only under an injected fault.
        self.detail_field = detail_field


def error_response(
    status: int,
    detail: str,
    headers: Mapping[str, str] | None = None,
    *,
    shape: str = "detail",
) -> Response:
    """The JSON error body with ``status`` and ``headers``: ``{"detail": ...}``, or for
    ``shape="error-object"`` and any status but 429, ``{"error": {"message", "status"}}``."""
    body: dict[str, Any] = {"detail": detail}
    if shape == "error-object" and status != 429:
        body = {"error": {"message": detail, "status": status}}
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


def error_shape(request: Request) -> str:
    """The service's error body choice (``Config.choices.error_body``)."""
    config = getattr(request.app.state, "config", None)
    return "detail" if config is None else str(config.choices.error_body)


async def render_api_error(request: Request, exc: Exception) -> Response:
    """Starlette exception handler for :class:`ApiError`."""
    assert isinstance(exc, ApiError)
    if exc.detail_field != "detail":
        return JSONResponse(
            {exc.detail_field: exc.detail}, status_code=exc.status, headers=exc.headers
        )
    return error_response(exc.status, exc.detail, exc.headers, shape=error_shape(request))
