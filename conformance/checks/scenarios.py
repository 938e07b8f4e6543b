"""The event scenarios the delivery, envelope and signature check modules share, and their
case lists (with the target kinds the event checks share). It holds no check.

A scenario is one generation with a delivery target
(:class:`conformance.observe.events.Scenario`); each module's lab (``labs.events(name)``)
runs its own generation of the scenarios it asks for, so sharing the descriptions here
shares no state between modules.
"""

from __future__ import annotations

from typing import Final

import pytest

from conformance.observe.events import Scenario
from conformance.target.setup import VIDEOS_PATH

__all__ = [
    "BY_OUTCOME",
    "BY_TARGET",
    "BY_TARGET_AND_FAILED",
    "BY_TARGET_AND_RETRIED",
    "CALLBACK",
    "FAILED_INLINE",
    "INLINE",
    "PER_REQUEST",
    "REGISTERED",
    "RETRIED",
    "VIDEO",
    "WITHOUT_SUBSCRIPTION",
]

#: One completed image generation per kind of target (spec §4 rule 1).
INLINE: Final = Scenario(kind="webhook.url")
CALLBACK: Final = Scenario(kind="callback_url")
REGISTERED: Final = Scenario(kind="webhook.id")
#: A generation that fails (the profile's sandbox prompt).
FAILED_INLINE: Final = Scenario(kind="webhook.url", outcome="failed")
#: A video generation.
VIDEO: Final = Scenario(kind="webhook.url", path=VIDEOS_PATH)
#: The receiver fails twice, then accepts: three attempts of one delivery (spec §6).
RETRIED: Final = Scenario(kind="webhook.url", replies=(500, 500, 200), count=3)

#: Cases over the per-request kinds of target, those a submit's body names alone.
PER_REQUEST: Final = [
    pytest.param(INLINE, id="webhook-url"),
    pytest.param(CALLBACK, id="callback-url"),
]
#: Cases over the kinds of target; a registered webhook needs a console session.
BY_TARGET: Final = [
    *PER_REQUEST,
    pytest.param(REGISTERED, id="webhook-id", marks=pytest.mark.console),
]
#: The kinds of target, and a failed generation (it needs the sandbox's prompt).
BY_TARGET_AND_FAILED: Final = [
    *BY_TARGET,
    pytest.param(FAILED_INLINE, id="failed", marks=pytest.mark.sandbox),
]
#: The kinds of target, and every attempt of a retried delivery.
BY_TARGET_AND_RETRIED: Final = [*BY_TARGET, pytest.param(RETRIED, id="retried")]
#: Cases over what the generation did: completed, failed (the sandbox's prompt).
BY_OUTCOME: Final = [
    pytest.param(INLINE, id="completed"),
    pytest.param(FAILED_INLINE, id="failed", marks=pytest.mark.sandbox),
]
#: Target kinds that carry no subscription: webhook.url without an events field, and a
#: bare callback_url, which has none (spec §4, §6 Events).
WITHOUT_SUBSCRIPTION: Final = [
    pytest.param("webhook.url", id="webhook-url-no-events"),
    pytest.param("callback_url", id="callback-url"),
]
