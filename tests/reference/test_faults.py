"""The fault registry: every declared fault is registered and acted on, names and ids are
unique, every id is in the catalog, and every core fault changes behaviour.

Each probe below checks one rule against a running service and returns whether it holds.
An honest service must pass every probe; the service started with the probe's fault must
fail it. (Webhook faults are probed in ``tests/reference/webhooks/``.)
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import jwt
import pytest
import yaml
from running_reference import ReferenceFactory, RunningReference, bearer, wait_for_status

import reference
from reference.fault import Fault, Faults
from reference.faults import FAULTS, UnknownFault, known
from reference.tiers import load_tiers

# Its tests wait on real deliveries and processes: CI starts them early (tests/conftest.py).
pytestmark = pytest.mark.slow

CATALOG = Path(__file__).resolve().parents[2] / "conformance" / "requirements.yaml"
PACKAGE = Path(reference.__file__).resolve().parent
LOW = load_tiers().get("low-limit")
Probe = Callable[[RunningReference], bool]


def _get(service: RunningReference, path: str, token: str) -> tuple[int, str]:
    response = service.client().get(path, headers=bearer(token))
    return response.status_code, response.text


def _submit(service: RunningReference, role: str, path: str, body: dict[str, object]) -> dict:  # type: ignore[type-arg]
    response = service.client().post(path, headers=bearer(service.key(role)), json=body)
    return {"status": response.status_code, "body": response.json(), "headers": response.headers}


def _credits(service: RunningReference, role: str = "primary") -> int:
    usage = service.client().get("/v1/account/usage", headers=bearer(service.key(role)))
    value: int = usage.json()["credits_used_today"]
    return value


def _finish(service: RunningReference, role: str, generation_id: str) -> dict:  # type: ignore[type-arg]
    return wait_for_status(service.client(), service.key(role), generation_id, interval_s=0.2)


def _over_minute_limit(service: RunningReference) -> dict:  # type: ignore[type-arg]
    """Send requests_per_minute + 1 reads with the low-limit key; the last response."""
    client = service.client()
    key = bearer(service.key("low-limit"))
    for _ in range(LOW.requests_per_minute):
        client.get("/v1/account/tier", headers=key)
    last = client.get("/v1/account/tier", headers=key)
    return {"status": last.status_code, "headers": last.headers}


def _new_key(service: RunningReference) -> tuple[str, str]:
    created = service.client().post(
        "/api/keys",
        headers=bearer(service.session("second")),
        json={"name": "probe", "scopes": ["images:generate"]},
    )
    assert created.status_code == 201, created.text
    return created.json()["id"], created.json()["key"]


def probe_console_refuses_api_key(service: RunningReference) -> bool:
    return _get(service, "/api/tier", service.key("primary"))[0] == 401


def probe_concurrency(service: RunningReference) -> bool:
    answers = [
        _submit(service, "low-limit", "/v1/images/generate", {"prompt": f"c{n}"})["status"]
        for n in range(LOW.concurrent_limit + 1)
    ]
    return answers[-1] == 429


def probe_console_tier(service: RunningReference) -> bool:
    console = _get(service, "/api/tier", service.session("primary"))
    return console == _get(service, "/v1/account/tier", service.key("primary"))


def probe_credit_cap(service: RunningReference) -> bool:
    price = load_tiers().prices["video"]
    for _ in range(LOW.max_credits_per_day // price):
        accepted = _submit(service, "low-limit", "/v1/videos/generate", {"prompt": "v"})
        assert accepted["status"] == 202
        _finish(service, "low-limit", accepted["body"]["id"])
    return _submit(service, "low-limit", "/v1/videos/generate", {"prompt": "v"})["status"] == 429


def probe_credits_spent(service: RunningReference) -> bool:
    before = _credits(service)
    _submit(service, "primary", "/v1/images/generate", {"prompt": "spend"})
    return _credits(service) > before


def probe_unknown_webhook_id_spends_nothing(service: RunningReference) -> bool:
    before = _credits(service)
    answer = _submit(
        service, "primary", "/v1/images/generate", {"prompt": "p", "webhook": {"id": "wh_none"}}
    )
    return answer["status"] == 404 and _credits(service) == before


def probe_minute_limit_not_below_reported(service: RunningReference) -> bool:
    client = service.client()
    key = bearer(service.key("low-limit"))
    statuses = [
        client.get("/v1/account/tier", headers=key).status_code
        for _ in range(LOW.requests_per_minute)
    ]
    return 429 not in statuses


def probe_failure_refunds(service: RunningReference) -> bool:
    before = _credits(service)
    failed = _submit(service, "primary", "/v1/images/generate", {"prompt": "[sandbox:fail]"})
    _finish(service, "primary", failed["body"]["id"])
    return _credits(service) == before


def probe_failure_has_no_output(service: RunningReference) -> bool:
    failed = _submit(service, "primary", "/v1/images/generate", {"prompt": "[sandbox:fail]"})
    done = _finish(service, "primary", failed["body"]["id"])
    return done["status"] == "failed" and done["output_url"] is None and bool(done["error_message"])


def probe_generation_id(service: RunningReference) -> bool:
    answer = _submit(service, "primary", "/v1/images/generate", {"prompt": "id"})
    return isinstance(answer["body"].get("id"), str) and bool(answer["body"]["id"])


def probe_key_limit(service: RunningReference) -> bool:
    for _ in range(11):
        created = service.client().post(
            "/api/keys",
            headers=bearer(service.session("second")),
            json={"name": "fill", "scopes": ["agent:run"]},
        )
        if created.status_code != 201:
            return 400 <= created.status_code < 500
    return False


def probe_key_prefix(service: RunningReference) -> bool:
    return _new_key(service)[1].startswith("gk_")


def probe_key_not_shown_again(service: RunningReference) -> bool:
    key_id, value = _new_key(service)
    detail = _get(service, f"/api/keys/{key_id}", service.session("second"))[1]
    listing = _get(service, "/api/keys", service.session("second"))[1]
    return value not in detail and value not in listing


def probe_retry_after(service: RunningReference) -> bool:
    return "retry-after" in _over_minute_limit(service)["headers"]


def probe_model_category(service: RunningReference) -> bool:
    answer = _submit(service, "restricted-models", "/v1/videos/generate", {"prompt": "v"})
    return answer["status"] == 403


def probe_ratelimit_headers(service: RunningReference) -> bool:
    headers = _over_minute_limit(service)["headers"]
    return all(f"x-ratelimit-{h}" in headers for h in ("limit", "remaining", "reset"))


def probe_minute_limit(service: RunningReference) -> bool:
    return _over_minute_limit(service)["status"] == 429


def probe_revocation_immediate(service: RunningReference) -> bool:
    key_id, value = _new_key(service)
    assert _get(service, "/v1/account/tier", value)[0] == 200
    service.client().delete(f"/api/keys/{key_id}", headers=bearer(service.session("second")))
    return _get(service, "/v1/account/tier", value)[0] == 401


def probe_revoked_key(service: RunningReference) -> bool:
    return _get(service, "/v1/account/tier", service.key("revoked"))[0] == 401


def probe_scope(service: RunningReference) -> bool:
    answer = _submit(service, "without-images-generate", "/v1/images/generate", {"prompt": "s"})
    return answer["status"] == 403


def probe_session_signature(service: RunningReference) -> bool:
    claims = jwt.decode(service.session("primary"), options={"verify_signature": False})
    forged = jwt.encode(claims, "not-the-service-key-but-long-enough-for-hs256!", "HS256")
    return _get(service, "/api/keys", forged)[0] == 401


def probe_signing_secret_hidden(service: RunningReference) -> bool:
    answer = _submit(service, "primary", "/v1/images/generate", {"prompt": "s"})
    text = _get(service, f"/v1/generations/{answer['body']['id']}", service.key("primary"))[1]
    return service.profile["keys"]["primary"]["signing_secret"] not in text


def probe_status_202(service: RunningReference) -> bool:
    return _submit(service, "primary", "/v1/images/generate", {"prompt": "s"})["status"] == 202


def probe_tier_types(service: RunningReference) -> bool:
    response = service.client().get("/v1/account/tier", headers=bearer(service.key("primary")))
    return type(response.json()["requests_per_minute"]) is int


#: fault name → (probe, extra serve arguments)
PROBES: dict[str, tuple[Probe, list[str]]] = {
    "api-key-opens-console": (probe_console_refuses_api_key, []),
    "concurrency-not-enforced": (probe_concurrency, ["--latency-ms", "3000"]),
    "console-tier-differs": (probe_console_tier, []),
    "credit-cap-not-enforced": (probe_credit_cap, ["--latency-ms", "20"]),
    "credits-not-spent": (probe_credits_spent, []),
    "credits-spent-before-validation": (probe_unknown_webhook_id_spends_nothing, []),
    "enforced-limit-below-reported": (probe_minute_limit_not_below_reported, []),
    "failed-not-refunded": (probe_failure_refunds, ["--latency-ms", "20"]),
    "failure-output-url-set": (probe_failure_has_no_output, ["--latency-ms", "20"]),
    "generation-id-missing": (probe_generation_id, []),
    "key-limit-not-enforced": (probe_key_limit, []),
    "key-prefix-wrong": (probe_key_prefix, []),
    "key-shown-again": (probe_key_not_shown_again, []),
    "missing-retry-after": (probe_retry_after, []),
    "model-category-not-enforced": (probe_model_category, []),
    "rate-limit-headers-missing": (probe_ratelimit_headers, []),
    "rate-limit-never-enforced": (probe_minute_limit, []),
    "revocation-delayed": (probe_revocation_immediate, []),
    "revoked-key-accepted": (probe_revoked_key, []),
    "scope-not-enforced": (probe_scope, []),
    "session-signature-not-checked": (probe_session_signature, []),
    "signing-secret-on-v1": (probe_signing_secret_hidden, []),
    "status-200-instead-of-202": (probe_status_202, []),
    "tier-endpoint-wrong-type": (probe_tier_types, []),
}


def catalog_ids() -> set[str]:
    document = yaml.safe_load(CATALOG.read_text(encoding="utf-8"))
    return {entry["id"] for entry in document["requirements"]}


def reference_modules() -> list[ModuleType]:
    """Every module of the reference package (``__main__`` aside: it runs the service)."""
    names = [m.name for m in pkgutil.walk_packages([str(PACKAGE)], "reference.")]
    return [importlib.import_module(n) for n in names if n != "reference.__main__"]


def declared_faults() -> dict[str, Fault]:
    """Every ``Fault`` constant of the package, by the name it is bound to."""
    found: dict[str, Fault] = {}
    for module in reference_modules():
        for identifier, value in vars(module).items():
            if isinstance(value, Fault):
                assert found.setdefault(identifier, value) is value, identifier
    return found


def source_texts() -> dict[Path, str]:
    return {path: path.read_text(encoding="utf-8") for path in sorted(PACKAGE.rglob("*.py"))}


def test_every_declared_fault_is_registered() -> None:
    registered = set(FAULTS.values())
    unregistered = {n for n, f in declared_faults().items() if f not in registered}
    assert not unregistered, "declared but not in the registry"
    assert len({f.name for f in declared_faults().values()}) == len(FAULTS)


def test_fault_names_and_ids_are_unique() -> None:
    faults = list(FAULTS.values())
    assert len({f.name for f in faults}) == len(faults)
    assert len({f.requirement_id for f in faults}) == len(faults)
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", f.name) for f in faults)


def test_every_fault_names_a_catalogued_requirement() -> None:
    ids = catalog_ids()
    unknown = {f.name: f.requirement_id for f in FAULTS.values() if f.requirement_id not in ids}
    assert not unknown


def test_every_fault_is_acted_on() -> None:
    """Each fault's constant is read somewhere in the package besides its declaration."""
    read: set[str] = set()
    for text in source_texts().values():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                read.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                read.add(node.attr)
    unread = sorted(f.name for identifier, f in declared_faults().items() if identifier not in read)
    assert not unread


def test_every_fault_name_is_typed_once() -> None:
    """The name string stands in the declaration only; code asks with the constant."""
    hyphenated = re.compile(r"(?<![\w-])[a-z0-9]+(?:-[a-z0-9]+)+(?![\w-])")
    spelled = Counter(word for text in source_texts().values() for word in hyphenated.findall(text))
    assert {name: spelled[name] for name in FAULTS if spelled[name] != 1} == {}


def test_every_probed_fault_is_registered() -> None:
    assert set(PROBES) <= set(FAULTS)


def test_unknown_fault_names_are_refused() -> None:
    with pytest.raises(UnknownFault, match="no-such"):
        known({"no-such", "key-prefix-wrong"})
    assert known(["key-prefix-wrong"]) == {"key-prefix-wrong"}
    assert not Faults().any_on(FAULTS.values())
    assert Faults(frozenset({"key-prefix-wrong"})).on(FAULTS["key-prefix-wrong"])


@pytest.mark.parametrize("fault", sorted(PROBES))
def test_fault_breaks_its_rule(reference_factory: ReferenceFactory, fault: str) -> None:
    probe, args = PROBES[fault]
    honest = reference_factory(args=args)
    assert probe(honest), f"honest service fails the probe of {fault}"
    faulty = reference_factory(faults=[fault], args=args)
    started = time.monotonic()
    assert not probe(faulty), f"fault {fault} did not change behaviour"
    assert time.monotonic() - started < 60
