"""Target selection rules and bindings (spec §2 binding, §4 target selection, §6 events)."""

from __future__ import annotations

from pathlib import Path

import pytest
from webhook_harness import HarnessFactory, add_foreign_key, refused

from reference.config import Config
from reference.netguard import DnsServerResolver, HostsFileResolver, SystemResolver
from reference.webhooks import policy_from_config

# Its tests wait on real deliveries and processes: CI starts them early (tests/conftest.py).
pytestmark = [pytest.mark.anyio, pytest.mark.slow]

HOOK = "http://127.0.0.1:9/hook"
CALLBACK = "http://127.0.0.1:9/callback"


async def test_no_target_gives_no_binding(service_factory: HarnessFactory) -> None:
    h = await service_factory()
    assert await h.service.select_target({"prompt": "x"}, h.key) is None


async def test_webhook_id_wins_over_url_and_callback(service_factory: HarnessFactory) -> None:
    h = await service_factory()
    hook_id = await h.register(HOOK)
    body = {"webhook": {"id": hook_id, "url": CALLBACK + "-inline"}, "callback_url": CALLBACK}
    binding = await h.service.select_target(body, h.key)
    assert binding is not None
    assert (binding.mode, binding.webhook_id, binding.url) == ("registered", hook_id, HOOK)


async def test_webhook_url_wins_over_callback(service_factory: HarnessFactory) -> None:
    h = await service_factory()
    binding = await h.service.select_target(
        {"webhook": {"url": HOOK}, "callback_url": CALLBACK}, h.key
    )
    assert binding is not None
    assert (binding.mode, binding.webhook_id, binding.url) == ("inline", None, HOOK)


async def test_callback_url_binds_callback_mode(service_factory: HarnessFactory) -> None:
    h = await service_factory()
    binding = await h.service.select_target({"callback_url": CALLBACK}, h.key)
    assert binding is not None
    assert binding.mode == "callback"
    assert binding.events == ("generation.completed", "generation.failed")
    assert binding.address == "127.0.0.1"


async def test_losing_target_is_still_validated(service_factory: HarnessFactory) -> None:
    """A private callback_url is refused even though webhook.url wins (TARGET-ORDER-05)."""
    h = await service_factory()
    with refused(400) as raised:
        await h.service.select_target(
            {"webhook": {"url": HOOK}, "callback_url": "http://10.0.0.1:9/"}, h.key
        )
    assert "callback_url" in raised.value.detail


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("http://10.0.0.1:9/", id="private-10.0.0.1-400"),
        pytest.param("http://127.0.0.2:9/", id="loopback-outside-allowlist-400"),
        pytest.param("http://169.254.169.254/latest", id="metadata-400"),
        pytest.param("ftp://127.0.0.1:9/", id="scheme-ftp-400"),
        pytest.param("http://nowhere.invalid:9/", id="unresolvable-400"),
        pytest.param("http://127.0.0.1:9/" + "a" * 2048, id="too-long-400"),
        pytest.param(12, id="not-a-string-400"),
    ],
)
@pytest.mark.parametrize("field", ["callback_url", "webhook.url"])
async def test_bad_target_is_400(service_factory: HarnessFactory, url: object, field: str) -> None:
    h = await service_factory()
    body = {"callback_url": url} if field == "callback_url" else {"webhook": {"url": url}}
    with refused(400) as raised:
        await h.service.select_target(body, h.key)
    assert field in raised.value.detail


async def test_unknown_webhook_id_is_404(service_factory: HarnessFactory) -> None:
    h = await service_factory()
    with refused(404):
        await h.service.select_target({"webhook": {"id": "wh_nope"}}, h.key)


async def test_foreign_webhook_id_is_404(service_factory: HarnessFactory) -> None:
    h = await service_factory()
    hook_id = await h.register(HOOK)
    foreign = add_foreign_key(h)
    with refused(404):
        await h.service.select_target({"webhook": {"id": hook_id}}, foreign)


async def test_deleted_webhook_id_is_404(service_factory: HarnessFactory) -> None:
    h = await service_factory()
    hook_id = await h.register(HOOK)
    h.service.delete_webhook(h.account_id, hook_id)
    with refused(404):
        await h.service.select_target({"webhook": {"id": hook_id}}, h.key)


@pytest.mark.parametrize(
    "events",
    [
        pytest.param([], id="empty"),
        pytest.param(["generation.done"], id="unknown-name"),
        pytest.param("generation.completed", id="not-an-array"),
        pytest.param([1], id="not-strings"),
    ],
)
async def test_bad_events_are_400(service_factory: HarnessFactory, events: object) -> None:
    h = await service_factory()
    with refused(400):
        await h.service.select_target({"webhook": {"url": HOOK, "events": events}}, h.key)


async def test_explicit_events_replace_defaults(service_factory: HarnessFactory) -> None:
    h = await service_factory()
    binding = await h.service.select_target(
        {"webhook": {"url": HOOK, "events": ["generation.cancelled"]}}, h.key
    )
    assert binding is not None and binding.events == ("generation.cancelled",)


async def test_registered_events_apply_unless_binding_names_its_own(
    service_factory: HarnessFactory,
) -> None:
    h = await service_factory()
    hook_id = await h.register(HOOK, events=["generation.failed"])
    plain = await h.service.select_target({"webhook": {"id": hook_id}}, h.key)
    own = await h.service.select_target(
        {"webhook": {"id": hook_id, "events": ["generation.completed"]}}, h.key
    )
    assert plain is not None and plain.events == ("generation.failed",)
    assert own is not None and own.events == ("generation.completed",)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"webhook": {"events": ["generation.failed"]}}, id="events-only"),
        pytest.param(
            {"webhook": {"events": ["generation.failed"]}, "callback_url": CALLBACK},
            id="events-only-with-callback",
        ),
        pytest.param({"webhook": "http://127.0.0.1:9/"}, id="not-an-object"),
    ],
)
async def test_webhook_without_id_or_url_is_400(
    service_factory: HarnessFactory, body: dict[str, object]
) -> None:
    h = await service_factory()
    with refused(400):
        await h.service.select_target(body, h.key)


async def test_binding_view_after_record(service_factory: HarnessFactory) -> None:
    h = await service_factory()
    generation_id = await h.submit({"webhook": {"url": HOOK}})
    assert h.service.binding_view(generation_id) == {
        "mode": "inline",
        "id": None,
        "url": HOOK,
        "events": ["generation.completed", "generation.failed"],
    }
    assert h.service.binding_view("gen_unknown") is None


async def test_registered_url_must_pass_callback_rules(service_factory: HarnessFactory) -> None:
    h = await service_factory()
    with refused(400):
        await h.service.create_webhook(h.account_id, {"url": "http://10.0.0.1/"})


async def test_registered_webhook_secret_shown_once(service_factory: HarnessFactory) -> None:
    h = await service_factory()
    created = await h.service.create_webhook(h.account_id, {"url": HOOK})
    assert created["secret"].startswith("whsec_")
    listing = h.service.list_webhooks(h.account_id)
    assert [w["id"] for w in listing["webhooks"]] == [created["id"]]
    assert created["secret"] not in repr(listing)
    other = await h.service.create_webhook(h.account_id, {"url": HOOK})
    assert other["secret"] != created["secret"]


def test_policy_from_config_wires_the_test_mode_resolvers(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    plain = policy_from_config(Config(db_path=tmp_path / "db"))
    assert isinstance(plain.resolver, SystemResolver) and plain.allow_cidrs == ()
    dns = policy_from_config(Config(db_path=tmp_path / "db", dns_server=("127.0.0.1", 5353)))
    assert isinstance(dns.resolver, DnsServerResolver)
    assert (dns.resolver.host, dns.resolver.port) == ("127.0.0.1", 5353)
    both = policy_from_config(
        Config(
            db_path=tmp_path / "db",
            hosts_file=hosts,
            dns_server=("127.0.0.1", 5353),
            allow_cidrs=("127.0.0.1/32",),
        )
    )
    assert isinstance(both.resolver, HostsFileResolver)
    assert isinstance(both.resolver.fallback, DnsServerResolver)
    assert [str(n) for n in both.allow_cidrs] == ["127.0.0.1/32"]
