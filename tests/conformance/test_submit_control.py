"""A refused submit of the fields §4 shows is judged against a control: the same submit
with §4's optional fields. Accepted, the check judges the refusal; refused too, only the
interpretation that the shown fields suffice is broken; anything else is a set-up error."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from conformance.checks.test_generation_submit import SHOWN_OPTIONAL, _control
from conformance.findings import RuleBroken
from conformance.target.client import ApiClient, Recorder
from conformance.target.profile import parse_profile
from conformance.target.setup import IMAGES_PATH, VIDEOS_PATH, SetupFailed

PROFILE = """
base_url = "http://127.0.0.1:9"
[keys.primary]
key = "gk_CONTROLcanary0primary0key00001"
scopes = ["images:generate", "videos:generate"]
"""
PLAIN = {"prompt": "a red square", "webhook": {"url": "http://127.0.0.1:9/hook"}}


def _client(
    answer: Callable[[dict[str, object]], int],
) -> tuple[ApiClient, list[dict[str, object]]]:
    """A client whose submits are answered with the status *answer* gives their body; the
    bodies it sent."""
    profile = parse_profile(PROFILE, env={})
    sent: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        return httpx.Response(answer(body), json={"id": "gen_1"})

    client = ApiClient(
        profile, Recorder(profile.redactor()), transport=httpx.MockTransport(handler)
    )
    return client, sent


def _refusal(path: str) -> httpx.Response:
    return httpx.Response(
        400, json={"detail": "no"}, request=httpx.Request("POST", f"http://127.0.0.1:9{path}")
    )


@pytest.mark.parametrize("path", [IMAGES_PATH, VIDEOS_PATH])
def test_an_accepted_control_is_returned_for_the_check_to_judge(path: str) -> None:
    client, sent = _client(lambda body: 202 if SHOWN_OPTIONAL[path].keys() <= body.keys() else 400)
    control = _control(client, path, PLAIN, _refusal(path))
    assert control.status_code == 202
    assert sent == [{**PLAIN, **SHOWN_OPTIONAL[path]}]


@pytest.mark.parametrize(
    ("path", "premise"), [(IMAGES_PATH, "GEN-IMAGE-09"), (VIDEOS_PATH, "GEN-VIDEO-08")]
)
def test_a_refused_control_breaks_only_the_premise(path: str, premise: str) -> None:
    client, _ = _client(lambda body: 400)
    with pytest.raises(RuleBroken) as broken:
        _control(client, path, PLAIN, _refusal(path))
    assert broken.value.ids == (premise,)
    assert "requires a body field §4 does not show" in str(broken.value)


def test_a_control_answered_5xx_tells_nothing() -> None:
    client, _ = _client(lambda body: 500)
    with pytest.raises(SetupFailed, match="cannot be told"):
        _control(client, IMAGES_PATH, PLAIN, _refusal(IMAGES_PATH))
