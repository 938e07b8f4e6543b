"""Generations: 202 on submit, the lifecycle, the sandbox prompts, outputs, 404s."""

from __future__ import annotations

import pytest
from running_reference import ReferenceFactory, RunningReference, bearer, wait_for_status
from test_media import assert_valid_mp4, assert_valid_png, assert_valid_wav

SUBMITS = [
    pytest.param("/v1/images/generate", {"size": "1K"}, "image", "image/png", id="image"),
    pytest.param("/v1/images/edit", {"image": "https://example.invalid/a.png"}, "image",
                 "image/png", id="image-edit"),
    pytest.param("/v1/videos/generate", {"duration": 5, "resolution": "720p"}, "video",
                 "video/mp4", id="video"),
    pytest.param("/v1/audio/generate", {"duration": 2.5}, "audio", "audio/wav", id="audio"),
    pytest.param("/v1/agents/run", {}, "agent", "application/json", id="agent"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "extra", "kind", "content_type"), SUBMITS)
def test_submit_is_202_then_completes_with_a_real_output(
    reference_server: RunningReference,
    path: str,
    extra: dict[str, object],
    kind: str,
    content_type: str,
) -> None:
    client = reference_server.client()
    key = reference_server.key("primary")
    response = client.post(path, headers=bearer(key), json={"prompt": "a harbour", **extra})
    assert response.status_code == 202, response.text
    accepted = response.json()
    assert accepted["id"].startswith("gen_")
    assert accepted["status"] == "queued" and accepted["type"] == kind
    done = wait_for_status(client, key, accepted["id"])
    assert done["status"] == "completed"
    assert done["error_message"] is None and done["credits_used"] > 0
    for field, value in extra.items():
        assert done[field] == value
    url = done["output_url"]
    assert url.startswith(reference_server.base_url + "/outputs/")
    output = client.get(url)
    assert output.status_code == 200
    assert output.headers["content-type"].split(";")[0] == content_type
    checks = {"image": assert_valid_png, "video": assert_valid_mp4, "audio": assert_valid_wav}
    if kind in checks:
        checks[kind](output.content)
    else:
        assert output.json()["generation_id"] == accepted["id"]


@pytest.mark.parametrize(
    ("path", "prompt", "status"),
    [
        ("/v1/images/generate", "x [sandbox:fail] y", "failed"),
        ("/v1/videos/generate", "[sandbox:cancel]", "cancelled"),
    ],
)
def test_sandbox_prompt_ends_with_null_output_and_credits_back(
    reference_server: RunningReference, path: str, prompt: str, status: str
) -> None:
    client = reference_server.client()
    key = reference_server.key("primary")
    response = client.post(path, headers=bearer(key), json={"prompt": prompt})
    done = wait_for_status(client, key, response.json()["id"])
    assert done["status"] == status
    assert done["output_url"] is None
    assert done["credits_used"] == 0  # refunded (spec §1, §6)
    if status == "failed":
        assert done["error_message"]


def test_generation_is_queued_before_it_completes(reference_factory: ReferenceFactory) -> None:
    slow = reference_factory(args=["--latency-ms", "1500"])  # ample margin for one GET
    client = slow.client()
    key = slow.key("primary")
    accepted = client.post("/v1/images/generate", headers=bearer(key), json={"prompt": "slow"})
    read = client.get(f"/v1/generations/{accepted.json()['id']}", headers=bearer(key))
    assert read.json()["status"] == "queued"
    assert read.json()["output_url"] is None
    assert wait_for_status(client, key, accepted.json()["id"])["status"] == "completed"


def test_unknown_generation_is_404(reference_server: RunningReference) -> None:
    client = reference_server.client()
    response = client.get(
        "/v1/generations/gen_doesnotexist", headers=bearer(reference_server.key("primary"))
    )
    assert response.status_code == 404 and response.json()["detail"]


@pytest.mark.parametrize(
    ("role", "status"),
    [
        pytest.param("foreign", 404, id="another-account-404"),
        pytest.param("without-images-generate", 200, id="any-key-of-the-account-200"),
    ],
)
def test_a_generation_is_read_by_the_keys_of_its_account_only(
    reference_server: RunningReference, role: str, status: int
) -> None:
    client = reference_server.client()
    mine = client.post(
        "/v1/images/generate",
        headers=bearer(reference_server.key("primary")),
        json={"prompt": "mine"},
    ).json()["id"]
    response = client.get(f"/v1/generations/{mine}", headers=bearer(reference_server.key(role)))
    assert response.status_code == status


def test_tier_without_video_gets_403(reference_server: RunningReference) -> None:
    client = reference_server.client()
    key = reference_server.key("restricted-models")
    response = client.post("/v1/videos/generate", headers=bearer(key), json={"prompt": "v"})
    assert response.status_code == 403
    assert "video" in response.json()["detail"]
    allowed = client.post("/v1/images/generate", headers=bearer(key), json={"prompt": "i"})
    assert allowed.status_code == 202


def test_callback_target_is_bound_and_shown(reference_server: RunningReference) -> None:
    client = reference_server.client()
    key = reference_server.key("primary")
    response = client.post(
        "/v1/images/generate",
        headers=bearer(key),
        json={"prompt": "bound", "webhook": {"url": "http://127.0.0.1:9/hook"}},
    )
    assert response.status_code == 202, response.text
    assert response.json()["webhook"]["mode"] == "inline"
    read = client.get(f"/v1/generations/{response.json()['id']}", headers=bearer(key))
    assert read.json()["webhook"]["url"] == "http://127.0.0.1:9/hook"


@pytest.mark.parametrize(
    "target",
    [
        pytest.param({"callback_url": "http://10.0.0.1:9/"}, id="callback-private"),
        pytest.param({"webhook": {"url": "ftp://127.0.0.1/"}}, id="inline-bad-scheme"),
    ],
)
def test_bad_target_is_400_and_spends_nothing(
    reference_server: RunningReference, target: dict[str, object]
) -> None:
    client = reference_server.client()
    key = reference_server.key("primary")
    before = client.get("/v1/account/usage", headers=bearer(key)).json()["credits_used_today"]
    response = client.post(
        "/v1/images/generate", headers=bearer(key), json={"prompt": "p", **target}
    )
    assert response.status_code == 400, response.text
    after = client.get("/v1/account/usage", headers=bearer(key)).json()["credits_used_today"]
    assert after == before


@pytest.mark.parametrize("path", ["/v1/audio/generate", "/v1/agents/run"])
def test_extensions_take_no_delivery_target(reference_server: RunningReference, path: str) -> None:
    client = reference_server.client()
    response = client.post(
        path,
        headers=bearer(reference_server.key("primary")),
        json={"prompt": "p", "callback_url": "http://127.0.0.1:9/"},
    )
    assert response.status_code == 400
    assert "spec §6" in response.json()["detail"]


def test_unknown_output_is_404(reference_server: RunningReference) -> None:
    client = reference_server.client()
    for name in ("0" * 32 + ".png", "../store.sqlite3", "x.png"):
        response = client.get(f"/outputs/{name}")
        assert response.status_code == 404
