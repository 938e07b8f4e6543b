"""The 400 conditions of spec §7, each its own requirement.

§7 gives 400 for an "Invalid callback target (scheme, resolution, private address, over
2048 characters)". Each condition is tried here once, in ``callback_url`` and in
``webhook.url`` (both are callback targets, §2 binding: "Must satisfy the callback URL
rules"), with a URL that breaks that one condition and no other: the receiver's own
authority for the scheme and the length, an ``.invalid`` name (RFC 6761: never resolves)
for resolution, 10.0.0.1 (a private range the spec names) for the address. Whether each
rule refuses at all, over its whole range of URLs, is judged by the URL checks
(``test_url_*``); these judge the status. The other 400 conditions of §7 (an unknown
outcome filter, a redeliver to a now-private target) are judged with the delivery lists
and redelivery.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final
from urllib.parse import urlsplit

import pytest

from conformance.judge.asserts import assert_status
from conformance.judge.strategies import MAX_URL_LENGTH, must_reject_vector
from conformance.observe.events import TargetKind, target_body
from conformance.observe.receiver import Receiver
from conformance.target.client import ApiClient
from conformance.target.setup import IMAGES_PATH, SUBMIT_PROMPT


def _bad_scheme(receiver: Receiver) -> str:
    return f"ftp://{urlsplit(receiver.url_for('/')).netloc}/conformance-err-400"


def _unresolvable(receiver: Receiver) -> str:
    return "http://conformance-err-400.invalid:9/"


def _private(receiver: Receiver) -> str:
    return must_reject_vector("http://10.0.0.1:9/").template


def _too_long(receiver: Receiver) -> str:
    base = receiver.url_for("/conformance-err-400?pad=")
    return base + "a" * (MAX_URL_LENGTH + 1 - len(base))


#: Each condition of §7: its requirement and a URL that breaks it alone.
CONDITIONS: Final[dict[str, tuple[str, Callable[[Receiver], str]]]] = {
    "scheme": ("ERR-400-01", _bad_scheme),
    "resolution": ("ERR-400-02", _unresolvable),
    "private-address": ("ERR-400-03", _private),
    "over-2048": ("ERR-400-04", _too_long),
}


@pytest.mark.parametrize(
    ("condition", "field"),
    [
        pytest.param(
            condition,
            field,
            id=f"{condition}-{field}-400",
            marks=pytest.mark.requirement(rule),
        )
        for condition, (rule, _) in CONDITIONS.items()
        for field in ("callback_url", "webhook.url")
    ],
)
def test_invalid_callback_target_condition_answered_400(
    api: ApiClient, receiver: Receiver, condition: str, field: TargetKind
) -> None:
    """A submit whose callback target breaks one condition §7 lists (scheme, resolution,
    private address, over 2048 characters) is answered 400."""
    url = CONDITIONS[condition][1](receiver)
    body = {"prompt": SUBMIT_PROMPT, **target_body(field, url)}
    assert_status(api.request("POST", IMAGES_PATH, json=body), 400)
