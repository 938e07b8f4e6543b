"""The set-up vocabulary every helper of the checks shares.

A check first creates what it runs against (a generation, a webhook, a key); when the
implementation refuses that set-up, the check cannot judge anything: that is
:class:`SetupFailed`, a harness error of the check, never a verdict on the implementation.
"""

from __future__ import annotations

from typing import Final

__all__ = ["SUBMIT_PROMPT", "SetupFailed"]

#: The prompt of every generation the suite submits for set-up (harmless, recognisable).
SUBMIT_PROMPT: Final = "conformance suite: a red square"


class SetupFailed(RuntimeError):
    """Creating the resources a check runs against failed: an error, not a verdict."""
