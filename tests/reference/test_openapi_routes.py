"""The reference serves exactly the operations the OpenAPI document describes."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.routing import Route

from genapi_spec import openapi_document
from reference.app import build_service, create_app
from reference.config import Config

_PARAM = re.compile(r"\{[^}]+\}")


def _operations_in_document() -> set[tuple[str, str]]:
    methods = {"get", "post", "put", "patch", "delete"}
    return {
        (method.upper(), _PARAM.sub("{}", path))
        for path, item in openapi_document()["paths"].items()
        for method in item
        if method in methods
    }


def test_routes_match_the_openapi_document(tmp_path: Path) -> None:
    service = build_service(Config(db_path=tmp_path / "s.sqlite3", master_secret="x" * 64))
    app = create_app(service)
    served = {
        (method, _PARAM.sub("{}", route.path))
        for route in app.routes
        if isinstance(route, Route)
        for method in route.methods or ()
        if method != "HEAD"
    }
    assert served == _operations_in_document()
    service.store.close()
