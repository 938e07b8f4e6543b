"""The set-up vocabulary every helper of the checks shares.

A check first creates what it runs against (a generation, a webhook, a key); when the
implementation refuses that set-up, the check cannot judge anything: that is
:class:`SetupFailed`, a harness error of the check, never a verdict on the implementation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from conformance.target.client import ApiClient

__all__ = ["SUBMIT_PROMPT", "SetupFailed", "submit_generation"]

#: The prompt of every generation the suite submits for set-up (harmless, recognisable).
SUBMIT_PROMPT: Final = "conformance suite: a red square"


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
    try:
        generation_id = response.json()["id"]
    except (ValueError, KeyError, TypeError):
        generation_id = None
    if response.status_code != 202 or not isinstance(generation_id, str):
        where = f"setup ({context})" if context else "setup"
        raise SetupFailed(
            f"{where}: POST {path} answered {response.status_code}, expected 202 with an "
            f"id: {client.recorder.redactor.text(response.text[:200])!r}"
        )
    return generation_id
