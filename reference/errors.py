"""The one error type handlers raise, and how it is rendered.

Errors other than 429 have the body ``{"detail": "<what is wrong and how to fix it>"}``
(ARCHITECTURE.md; the spec leaves that shape unshown, §7). 429 responses use the same body
plus the headers of spec §7, passed through ``headers``.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

__all__ = ["ApiError", "error_response", "render_api_error"]


class ApiError(Exception):
    """An error answer: HTTP ``status``, a human ``detail`` and optional extra headers."""

    def __init__(self, status: int, detail: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail
        self.headers: dict[str, str] = dict(headers or {})


def error_response(status: int, detail: str, headers: Mapping[str, str] | None = None) -> Response:
    """The JSON error body ``{"detail": ...}`` with ``status`` and ``headers``."""
    return JSONResponse({"detail": detail}, status_code=status, headers=dict(headers or {}))


async def render_api_error(request: Request, exc: Exception) -> Response:
    """Starlette exception handler for :class:`ApiError`."""
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.detail, exc.headers)
