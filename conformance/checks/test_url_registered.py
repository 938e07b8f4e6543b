"""Registered webhooks and the callback URL rules (spec §4 Console endpoints, catalog HOOK-URL-01).

The spec states the callback URL rules for callback_url and webhook.url; registering a
private target through the console would bypass them, so the suite reads them as
applying to POST /api/webhooks too (an interpretation: a failing check only warns). The
payload of POST /api/webhooks is not shown; the suite sends what the profile's
``[adapter.create_webhook]`` declares (by default ``{"url": ...}``), as for the other
console checks (conformance.target.webhooks.register_webhook).
"""

from __future__ import annotations

from typing import Final

import pytest

from conformance.judge.asserts import describe
from conformance.judge.strategies import aim, iut_on_this_machine
from conformance.observe.receiver import CanaryView, Receiver
from conformance.target.adapters import console_request, declared
from conformance.target.client import ApiClient
from conformance.target.profile import Profile

#: Reject vectors from each family of the rules (spec §4), aimed at the discard port.
REFUSED_TARGETS: Final = (
    pytest.param("http://127.0.0.2:9/hook", id="registered-loopback-127.0.0.2-4xx"),
    pytest.param("http://[::1]:9/hook", id="registered-loopback-::1-4xx"),
    pytest.param("http://10.0.0.1:9/hook", id="registered-private-10.0.0.1-4xx"),
    pytest.param("http://169.254.169.254:9/hook", id="registered-metadata-169.254.169.254-4xx"),
    pytest.param("http://nothing.invalid:9/hook", id="registered-unresolvable-4xx"),
    pytest.param("ftp://{receiver}/hook", id="registered-scheme-ftp-4xx"),
)


@pytest.mark.console
@pytest.mark.requirement("HOOK-URL-01")
@pytest.mark.parametrize("template", REFUSED_TARGETS)
def test_url_registered_webhook_breaking_rule_refused(
    api: ApiClient, profile: Profile, receiver: Receiver, canary: CanaryView, template: str
) -> None:
    """Registering a webhook whose URL breaks a callback URL rule is refused with a 4xx."""
    local = iut_on_this_machine(profile.base_url, profile.receiver.public_url)
    authority = receiver.url_for("").split("//", 1)[1]
    url = aim(template.replace("{receiver}", authority), canary.port if local else None)
    response = console_request(api, "create_webhook", session="primary", url=url)
    if 200 <= response.status_code < 300:
        # Accepted by mistake: remove it so it receives nothing later.
        try:
            webhook_id = declared(profile, "create_webhook").read_id(response.json())
        except ValueError:
            webhook_id = None
        if webhook_id is not None:
            console_request(api, "delete_webhook", session="primary", id=webhook_id)
    assert 400 <= response.status_code < 500, (
        f"HOOK-URL-01: expected POST /api/webhooks with url={url!r} to be refused (4xx), "
        f"saw {describe(response)}"
    )
    canary.assert_no_hits()
