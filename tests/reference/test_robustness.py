"""Bad input never gets a 5xx: malformed bodies, wrong types, huge bodies and headers."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import pytest
from running_reference import RunningReference, bearer

JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("content", "headers", "status"),
    [
        pytest.param(b"{not json", JSON, 400, id="malformed-json"),
        pytest.param(b"", JSON, 400, id="empty-body"),
        pytest.param(b"[1, 2]", JSON, 400, id="array-body"),
        pytest.param(b'"prompt"', JSON, 400, id="string-body"),
        pytest.param(b"null", JSON, 400, id="null-body"),
        pytest.param(b"\xff\xfe{}", JSON, 400, id="not-utf8"),
        pytest.param(b"[" * 100_000, JSON, 400, id="deeply-nested"),
        pytest.param(b'{"prompt": "x", "size": 1e999}', JSON, 400, id="infinite-number"),
        pytest.param(b'{"prompt": "x"}', {"Content-Type": "text/plain"}, 415, id="text-plain"),
        pytest.param(b'{"prompt": "x"}', {}, 415, id="no-content-type"),
        pytest.param(b'{"prompt": "x"', JSON, 400, id="truncated"),
        pytest.param(b'{"prompt": NaN}', JSON, 400, id="nan-prompt"),
        pytest.param(b'{"prompt": "x", "n": ' + b"9" * 5000 + b"}", JSON, 400, id="huge-int"),
    ],
)
def test_bad_bodies_get_4xx_with_detail(
    reference_server: RunningReference, content: bytes, headers: dict[str, str], status: int
) -> None:
    client = reference_server.client()
    response = client.post(
        "/v1/images/generate",
        content=content,
        headers={**headers, **bearer(reference_server.key("primary"))},
    )
    assert response.status_code == status, response.text
    assert response.json()["detail"]


@pytest.mark.parametrize(
    ("path", "body", "needle"),
    [
        pytest.param("/v1/images/generate", {}, "prompt", id="prompt-missing"),
        pytest.param("/v1/images/generate", {"prompt": ""}, "prompt", id="prompt-empty"),
        pytest.param("/v1/images/generate", {"prompt": "  "}, "prompt", id="prompt-blank"),
        pytest.param("/v1/images/generate", {"prompt": 5}, "prompt", id="prompt-number"),
        pytest.param("/v1/images/generate", {"prompt": ["a"]}, "prompt", id="prompt-array"),
        pytest.param("/v1/images/generate", {"prompt": "x" * 40_000}, "prompt", id="prompt-long"),
        pytest.param("/v1/images/generate", {"prompt": "x", "size": 2}, "size", id="size-number"),
        pytest.param("/v1/images/generate", {"prompt": "x", "model": {}}, "model", id="model-obj"),
        pytest.param("/v1/images/generate", {"prompt": "x", "webhook": "u"}, "webhook",
                     id="webhook-string"),
        pytest.param("/v1/images/generate", {"prompt": "x", "callback_url": 7}, "callback_url",
                     id="callback-number"),
        pytest.param("/v1/videos/generate", {"prompt": "x", "duration": "5"}, "duration",
                     id="duration-string"),
        pytest.param("/v1/videos/generate", {"prompt": "x", "duration": True}, "duration",
                     id="duration-bool"),
        pytest.param("/v1/videos/generate", {"prompt": "x", "duration": -1}, "duration",
                     id="duration-negative"),
        pytest.param("/v1/videos/generate", {"prompt": "x", "resolution": 720}, "resolution",
                     id="resolution-number"),
        pytest.param("/v1/images/edit", {"instruction": "x"}, "prompt", id="edit-no-prompt"),
    ],
)  # fmt: skip
def test_wrong_fields_get_400_naming_the_field(
    reference_server: RunningReference, path: str, body: dict[str, object], needle: str
) -> None:
    client = reference_server.client()
    response = client.post(path, json=body, headers=bearer(reference_server.key("primary")))
    assert response.status_code == 400, response.text
    assert needle in response.json()["detail"]


def test_unknown_fields_are_tolerated(reference_server: RunningReference) -> None:
    client = reference_server.client()
    response = client.post(
        "/v1/images/generate",
        json={"prompt": "x", "style": "vivid", "n": 3, "extra": {"nested": [1, None]}},
        headers=bearer(reference_server.key("primary")),
    )
    assert response.status_code == 202


def test_body_over_the_limit_is_413(reference_server: RunningReference) -> None:
    client = reference_server.client()
    response = client.post(
        "/v1/images/generate",
        content=b'{"prompt": "' + b"x" * (1024 * 1024 + 10) + b'"}',
        headers={**JSON, **bearer(reference_server.key("primary"))},
    )
    assert response.status_code == 413
    assert response.json()["detail"]


def test_chunked_body_over_the_limit_is_413(reference_server: RunningReference) -> None:
    def chunks() -> object:
        yield b'{"prompt": "'
        for _ in range(20):
            yield b"x" * 65536
        yield b'"}'

    client = reference_server.client()
    response = client.post(
        "/v1/images/generate",
        content=chunks(),  # type: ignore[arg-type]
        headers={**JSON, **bearer(reference_server.key("primary"))},
    )
    assert response.status_code == 413


def _raw_request(base_url: str, request: bytes) -> bytes:
    """Send raw bytes and read the status line (bounded by a socket timeout and a length)."""
    parts = urlsplit(base_url)
    assert parts.hostname is not None and parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(request)
        with sock.makefile("rb") as reply:
            return reply.readline(65536)


def test_64k_header_is_refused_without_5xx(reference_server: RunningReference) -> None:
    request = (
        b"GET /v1/account/tier HTTP/1.1\r\nHost: x\r\nX-Big: "
        + b"a" * 65536
        + b"\r\nConnection: close\r\n\r\n"
    )
    status_line = _raw_request(reference_server.base_url, request).split(b"\r\n")[0]
    status = int(status_line.split()[1])
    assert 400 <= status < 500, status_line


def test_garbage_request_line_is_400(reference_server: RunningReference) -> None:
    status_line = _raw_request(reference_server.base_url, b"HELLO\r\n\r\n").split(b"\r\n")[0]
    assert status_line.split()[1] == b"400"


def test_unknown_path_is_404_json(reference_server: RunningReference) -> None:
    response = reference_server.client().get("/v2/images/generate")
    assert response.status_code == 404 and response.json()["detail"]


def test_wrong_method_is_405_json(reference_server: RunningReference) -> None:
    response = reference_server.client().get("/v1/images/generate")
    assert response.status_code == 405 and response.json()["detail"]
    assert "POST" in response.headers["allow"]


def test_healthz(reference_server: RunningReference) -> None:
    response = reference_server.client().get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_no_request_so_far_was_a_500(reference_server: RunningReference) -> None:
    # The request log has one JSON line per request: none of this session's was a 5xx.
    assert '"status":500' not in reference_server.stderr_text()
    assert "Traceback" not in reference_server.stderr_text()
