"""The set-up vocabulary every helper of the checks shares.

A check first creates what it runs against (a generation, a webhook, a key); when the
implementation refuses that set-up, the check cannot judge anything: that is
:class:`SetupFailed`, a harness error of the check, never a verdict on the implementation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import httpx

from conformance.target.client import ApiClient
from conformance.target.profile import Profile

__all__ = [
    "EDIT_PATH",
    "IMAGES_PATH",
    "SUBMIT_PROMPT",
    "TIER_PATH",
    "VIDEOS_PATH",
    "GenerationOutcome",
    "RateRequest",
    "SetupFailed",
    "outcome_prompt",
    "rate_request_of",
    "submit_generation",
    "submitted_id",
]

#: The prompt of every generation the suite submits for set-up (harmless, recognisable).
SUBMIT_PROMPT: Final = "conformance suite: a red square"
#: Spec §8: the tier record of the key's account.
TIER_PATH: Final = "/v1/account/tier"
#: Spec §4: the image submit, the suite's usual generation; it accepts callback_url and
#: webhook (scope images:generate).
IMAGES_PATH: Final = "/v1/images/generate"
#: Spec §4: the image edit and the video submit (scopes images:edit, videos:generate).
EDIT_PATH: Final = "/v1/images/edit"
VIDEOS_PATH: Final = "/v1/videos/generate"
#: The callback of a ``submits`` rate request: its scheme fails the callback URL rules, so
#: the submit is answered 400 before credits are spent (spec §4 rule 4): no credit, no
#: generation in flight, nothing dialled.
REFUSED_CALLBACK: Final = "ftp://127.0.0.1:9/rate-limit"

#: How a generation ends, as its prompt drives it (the profile's ``[sandbox]`` prompts).
GenerationOutcome = Literal["completed", "failed", "cancelled"]


def outcome_prompt(profile: Profile, outcome: GenerationOutcome) -> str:
    """The prompt of a generation meant to end *outcome*: :data:`SUBMIT_PROMPT`, followed
    by the profile's sandbox prompt for ``"failed"`` or ``"cancelled"``."""
    if outcome == "failed":
        return f"{SUBMIT_PROMPT} {profile.sandbox.fail_prompt}"
    if outcome == "cancelled":
        return f"{SUBMIT_PROMPT} {profile.sandbox.cancel_prompt}"
    return SUBMIT_PROMPT


@dataclass(frozen=True)
class RateRequest:
    """The request that exercises a key's per-minute limit (the profile's ``[rate]
    request``), the same for the checks and for ``genapi-conformance load``."""

    method: str
    path: str
    body: Mapping[str, Any] | None
    #: Which request it is and the setting to change, for messages.
    words: str


def rate_request_of(profile: Profile) -> RateRequest:
    """``reads``: GET /v1/account/tier (no credits, and the tier record with the first
    answer); ``submits``: an image submit refused with 400 for its callback URL."""
    if profile.rate.request == "submits":
        return RateRequest(
            "POST",
            IMAGES_PATH,
            {"prompt": SUBMIT_PROMPT, "callback_url": REFUSED_CALLBACK},
            f'POST {IMAGES_PATH} refused for its callback URL, as [rate] request = "submits" says',
        )
    return RateRequest(
        "GET",
        TIER_PATH,
        None,
        f'GET {TIER_PATH}, as [rate] request = "reads" says; set request = "submits" if the '
        "deployment counts only submits",
    )


class SetupFailed(RuntimeError):
    """Creating the resources a check runs against failed: an error, not a verdict."""


def submit_generation(
    client: ApiClient,
    path: str,
    body: Mapping[str, Any],
    *,
    role: str = "primary",
    context: str = "",
) -> str:
    """POST *body* to the submit *path* as *role*; the generation id its 202 carries.

    Any other answer (another status, no string ``id``) is a set-up error: the checks that
    judge submits send their own. *context* says which set-up it was, for the message.
    """
    response = client.request("POST", path, role=role, json=dict(body))
    return submitted_id(client, response, context=context)


def submitted_id(client: ApiClient, response: httpx.Response, *, context: str = "") -> str:
    """The generation id a submit's 202 *response* carries, for a set-up: any other
    answer (another status, no string ``id``) is a set-up error, *context* saying which."""
    try:
        generation_id = response.json()["id"]
    except (ValueError, KeyError, TypeError):
        generation_id = None
    if response.status_code != 202 or not isinstance(generation_id, str):
        where = f"setup ({context})" if context else "setup"
        raise SetupFailed(
            f"{where}: {response.request.method} {response.request.url.path} answered "
            f"{response.status_code}, expected 202 with an id: "
            f"{client.recorder.redactor.text(response.text[:200])!r}"
        )
    return generation_id
