"""The target profile: how the suite reaches an implementation under test (IUT).

A profile is a TOML file (format in ARCHITECTURE.md, commented template in
``fixtures/profiles/template.toml``). :func:`load_profile` validates it against
``conformance/target/profile.schema.json`` and then against the rules a schema cannot say
(environment variables that must be set, the loopback safety rule), and reports every
problem at once, each naming the field and the fix.

The ``[adapter]`` table (how the console is spoken: the operations the spec leaves
unshown, the session credential) is read by :mod:`conformance.target.adapter_declaration`.

Secret values (``key``, ``signing_secret``, ``token``, ``password``) become
:class:`~conformance.secrets.Secret`; each may instead be read from the environment with
``<field>_env = "VARNAME"``.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final
from urllib.parse import urlsplit

import genapi_spec
from conformance.secrets import Redactor, Secret
from conformance.target.adapter_declaration import (
    AdapterDeclaration,
    parse_declaration,
    preset_names,
)
from conformance.target.clock import ClockProfile, parse_clock
from conformance.target.profile_schema import profile_schema, schema_problems
from conformance.target.wire import RateProfile, WireProfile

__all__ = [
    "CHAIN_ROLES",
    "LOW_DAILY_ROLE",
    "LOW_LIMIT_CREDITS_ROLE",
    "LOW_LIMIT_ROLE",
    "LOW_LIMIT_SECOND_ROLE",
    "LOW_LIMIT_WINDOW_ROLE",
    "SCOPES",
    "BudgetsProfile",
    "CapabilityMissing",
    "DnsProfile",
    "KeyProfile",
    "Profile",
    "ProfileError",
    "ReceiverProfile",
    "SandboxProfile",
    "SessionProfile",
    "TimingProfile",
    "UsageProfile",
    "load_profile",
    "parse_profile",
    "profile_schema",
    "template_text",
    "write_template",
]

#: The scope names of spec §5.2, in the spec's order.
SCOPES: Final = (
    "images:generate",
    "images:edit",
    "videos:generate",
    "audio:generate",
    "agent:run",
)


# -- the key roles of the low tiers, which the rate and credit chains exhaust ---------

#: A key of a low tier (the rate checks exhaust its minute).
LOW_LIMIT_ROLE: Final = "low-limit"
#: Another key of the low-limit account (spec §8: the per-minute limit is per API key).
LOW_LIMIT_SECOND_ROLE: Final = "low-limit-second"
#: Optional: a key of another account on a low tier for the rolling-window check alone
#: (else ``low-limit``).
LOW_LIMIT_WINDOW_ROLE: Final = "low-limit-window"
#: Optional: a key of another account on a low tier for the credit and concurrency checks
#: alone (else ``low-limit``): its window, in-flight generations and daily credits are
#: theirs while the per-minute checks use another account's key.
LOW_LIMIT_CREDITS_ROLE: Final = "low-limit-credits"
#: A key whose tier has a small requests_per_day under a large requests_per_minute: the
#: day's limit is reached in a few seconds, and never mistaken for the minute's.
LOW_DAILY_ROLE: Final = "low-daily"
#: The keys the chains exhaust (``conformance/checks/low_limit.py``): no other check may
#: send with them (a request of another check would join a window a chain is measuring,
#: or meet a limit a chain has spent).
CHAIN_ROLES: Final = frozenset(
    {
        LOW_LIMIT_ROLE,
        LOW_LIMIT_SECOND_ROLE,
        LOW_LIMIT_WINDOW_ROLE,
        LOW_LIMIT_CREDITS_ROLE,
        LOW_DAILY_ROLE,
    }
)


class ProfileError(ValueError):
    """A profile that cannot be used; :attr:`problems` names each field and its fix."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = list(problems)
        listed = "\n".join(f"  - {problem}" for problem in self.problems)
        super().__init__(f"profile {source} is not usable:\n{listed}")


class CapabilityMissing(Exception):
    """A check needs something the profile does not give: the check is skipped, not failed.

    ``str()`` is the skip reason: ``needs <capability>: <what to add to the profile>``.
    """

    def __init__(self, capability: str, fix: str) -> None:
        self.capability = capability
        self.fix = fix
        super().__init__(f"needs {capability}: {fix}")


@dataclass(frozen=True)
class KeyProfile:
    """One API key by role (e.g. ``primary``, ``revoked``, ``without-images-generate``)."""

    role: str
    key: Secret
    key_id: str | None
    account: str
    scopes: tuple[str, ...]
    revoked: bool = False
    signing_secret: Secret | None = None

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes


@dataclass(frozen=True)
class SessionProfile:
    """A console session (spec §5.5): a token, or credentials the adapter logs in with."""

    name: str
    token: Secret | None = None
    email: str | None = None
    password: Secret | None = None


@dataclass(frozen=True)
class ReceiverProfile:
    """Where the webhook receiver listens and how the IUT reaches it."""

    listen_host: str = "127.0.0.1"
    listen_port: int = 0
    public_url: str = ""


@dataclass(frozen=True)
class SandboxProfile:
    """The sandbox contract: prompts that drive failure and cancellation from outside."""

    fail_prompt: str = "[sandbox:fail]"
    cancel_prompt: str = "[sandbox:cancel]"
    max_generation_seconds: float = 30.0


@dataclass(frozen=True)
class DnsProfile:
    """Controllable DNS: the IUT resolves callback hosts under *domain* through us.

    *zone_dir* is where the run's DNS server keeps its zone (``conformance.observe.dns``): set
    when a process outside pytest already serves it (``genapi-conformance run`` does, for
    the embedded reference); None lets the first pytest process of the run serve it.
    """

    host: str
    port: int
    domain: str
    zone_dir: Path | None = None


@dataclass(frozen=True)
class UsageProfile:
    """How credits spent are observed (spec §1: credits are not priced in the spec)."""

    path: str
    field: str


@dataclass(frozen=True)
class BudgetsProfile:
    max_requests_per_rate_check: int = 200
    destructive: bool = False
    #: The most credits one submit may cost (spec §1: "Credit prices per operation: not
    #: shown"): what ``run --budget-credits`` counts per submit. None: not stated.
    credits_per_submit: int | None = None


@dataclass(frozen=True)
class TimingProfile:
    tolerance_seconds: float = 0.6
    #: The longest one request may take, from sending it to the last byte of the answer
    #: (a target that hangs or drips its answer is cut off there, not waited for).
    request_timeout_seconds: float = 30.0
    #: The longest a whole run may take: a check still going then is stopped, and the
    #: checks not started are reported as not run (errors, never passes).
    run_ceiling_seconds: float = 3600.0


@dataclass(frozen=True)
class Profile:
    """A validated target profile. Frozen: checks cannot change what others see."""

    name: str
    base_url: str
    keys: Mapping[str, KeyProfile]
    key_prefix: str | None = None
    api_version: str = genapi_spec.API_VERSION
    adapter: AdapterDeclaration = field(default_factory=lambda: parse_declaration(None)[0])
    allow_remote: bool = False
    sessions: Mapping[str, SessionProfile] = field(default_factory=lambda: MappingProxyType({}))
    receiver: ReceiverProfile = field(default_factory=ReceiverProfile)
    sandbox: SandboxProfile = field(default_factory=SandboxProfile)
    dns: DnsProfile | None = None
    usage: UsageProfile | None = None
    budgets: BudgetsProfile = field(default_factory=BudgetsProfile)
    timing: TimingProfile = field(default_factory=TimingProfile)
    wire: WireProfile = field(default_factory=WireProfile)
    rate: RateProfile = field(default_factory=RateProfile)
    clock: ClockProfile = field(default_factory=ClockProfile)
    source: str = "<memory>"
    #: The environment variable each secret was read from (``keys.primary.key`` →
    #: ``ACME_KEY``), for reproduction lines that name the variables the user already set.
    secret_env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def key(self, role: str) -> KeyProfile:
        """The key of *role*; :class:`CapabilityMissing` (a skip) when the profile has none."""
        try:
            return self.keys[role]
        except KeyError:
            raise CapabilityMissing(
                f"key role {role!r}", f"add a [keys.{role}] table to the profile"
            ) from None

    def keys_with_scope(self, scope: str) -> list[KeyProfile]:
        """Usable (not revoked) keys that hold *scope*, in profile order."""
        return [k for k in self.keys.values() if not k.revoked and k.has_scope(scope)]

    def keys_without_scope(self, scope: str) -> list[KeyProfile]:
        """Usable (not revoked) keys that lack *scope*: the scope matrix (spec §5.3)."""
        return [k for k in self.keys.values() if not k.revoked and not k.has_scope(scope)]

    def session(self, name: str) -> SessionProfile:
        """The console session *name*; :class:`CapabilityMissing` when absent."""
        try:
            return self.sessions[name]
        except KeyError:
            raise CapabilityMissing(
                f"console session {name!r}",
                f"add a [sessions.{name}] table with token (or token_env) to the profile",
            ) from None

    def secrets(self) -> dict[str, Secret]:
        """Every secret of the profile by label (``keys.<role>.key`` …)."""
        found: dict[str, Secret] = {}
        for role, key in self.keys.items():
            found[f"keys.{role}.key"] = key.key
            if key.signing_secret is not None:
                found[f"keys.{role}.signing_secret"] = key.signing_secret
        for name, session in self.sessions.items():
            if session.token is not None:
                found[f"sessions.{name}.token"] = session.token
            if session.password is not None:
                found[f"sessions.{name}.password"] = session.password
        return found

    def redactor(self) -> Redactor:
        """A fresh :class:`Redactor` that knows every secret of this profile."""
        return Redactor(self.secrets(), key_prefix=self.key_prefix)

    def redacted(self) -> dict[str, Any]:
        """The profile as plain data with every secret replaced by ``***``.

        Stable for hashing (which profile produced a report) and safe for reports.
        """

        def hide(secret: Secret | None) -> str | None:
            return None if secret is None else str(secret)

        return {
            "name": self.name,
            "base_url": self.base_url,
            "allow_remote": self.allow_remote,
            "key_prefix": self.key_prefix,
            "api_version": self.api_version,
            "adapter": self.adapter.to_dict(),
            "keys": {
                role: {
                    "key": hide(k.key),
                    "key_id": k.key_id,
                    "account": k.account,
                    "scopes": list(k.scopes),
                    "revoked": k.revoked,
                    "signing_secret": hide(k.signing_secret),
                }
                for role, k in self.keys.items()
            },
            "sessions": {
                name: {"token": hide(s.token), "email": s.email, "password": hide(s.password)}
                for name, s in self.sessions.items()
            },
            "receiver": {
                "listen_host": self.receiver.listen_host,
                "listen_port": self.receiver.listen_port,
                "public_url": self.receiver.public_url,
            },
            "sandbox": {
                "fail_prompt": self.sandbox.fail_prompt,
                "cancel_prompt": self.sandbox.cancel_prompt,
                "max_generation_seconds": self.sandbox.max_generation_seconds,
            },
            "dns": None
            if self.dns is None
            else {
                "server": f"{self.dns.host}:{self.dns.port}",
                "domain": self.dns.domain,
                "zone_dir": None if self.dns.zone_dir is None else str(self.dns.zone_dir),
            },
            "usage": None
            if self.usage is None
            else {"path": self.usage.path, "field": self.usage.field},
            "budgets": {
                "max_requests_per_rate_check": self.budgets.max_requests_per_rate_check,
                "destructive": self.budgets.destructive,
                "credits_per_submit": self.budgets.credits_per_submit,
            },
            "timing": {
                "tolerance_seconds": self.timing.tolerance_seconds,
                "request_timeout_seconds": self.timing.request_timeout_seconds,
                "run_ceiling_seconds": self.timing.run_ceiling_seconds,
            },
            "wire": {
                "header_brand": self.wire.header_brand,
                "secret_keying": self.wire.secret_keying,
            },
            "rate": {"request": self.rate.request},
            "clock": self.clock.to_dict(),
        }


# -- semantic rules --------------------------------------------------------------------


def _is_loopback_host(host: str) -> bool:
    if host.lower() in {"localhost", "localhost."}:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _base_url_problems(document: Mapping[str, Any]) -> list[str]:
    base_url = document.get("base_url")
    if not isinstance(base_url, str) or not base_url:
        return []  # reported by the schema
    parts = urlsplit(base_url)
    if parts.scheme not in {"http", "https"}:
        return [
            f"base_url: scheme {parts.scheme or '(none)'!r} is not http or https; "
            'set base_url to an http(s) URL, e.g. "http://127.0.0.1:8765"'
        ]
    if not parts.hostname:
        return ['base_url: no host; set base_url like "http://127.0.0.1:8765"']
    if parts.query or parts.fragment:
        return ["base_url: has a query or fragment; give only scheme, host, port and path"]
    if not _is_loopback_host(parts.hostname) and document.get("allow_remote") is not True:
        return [
            f"base_url: host {parts.hostname!r} is not loopback. The suite sends real requests "
            "(it drives rate limits and may spend the daily credit cap); for safety it only "
            "targets this machine unless told otherwise. If you mean to test that deployment, "
            "set allow_remote = true at the top level of the profile"
        ]
    return []


def _secret(
    table: Mapping[str, Any],
    name: str,
    where: str,
    env: Mapping[str, str],
    problems: list[str],
    env_names: dict[str, str],
) -> Secret | None:
    """Resolve ``name`` or ``name_env`` of *table*; record a problem when neither works,
    and in *env_names* the variable it came from."""
    direct = table.get(name)
    env_name = table.get(f"{name}_env")
    if isinstance(direct, str) and isinstance(env_name, str):
        problems.append(f"{where}.{name}: both {name} and {name}_env are set; keep one")
        return None
    if isinstance(direct, str):
        return Secret(direct)
    if isinstance(env_name, str):
        value = env.get(env_name)
        if not value:
            problems.append(
                f"{where}.{name}_env: environment variable {env_name} is not set (or empty); "
                f"export {env_name}, or set {name} in the profile"
            )
            return None
        env_names[f"{where}.{name}"] = env_name
        return Secret(value)
    return None


def _presence_problems(document: Mapping[str, Any]) -> list[str]:
    """Secrets a table must carry one way or the other (the schema cannot say it clearly)."""
    problems: list[str] = []
    keys = document.get("keys")
    for role, table in keys.items() if isinstance(keys, Mapping) else ():
        if isinstance(table, Mapping) and "key" not in table and "key_env" not in table:
            problems.append(
                f"keys.{role}.key: missing; set it or set key_env to the name of an "
                "environment variable"
            )
    sessions = document.get("sessions")
    for name, table in sessions.items() if isinstance(sessions, Mapping) else ():
        if isinstance(table, Mapping) and not ({"token", "token_env", "email"} & set(table)):
            problems.append(
                f"sessions.{name}.token: missing; set token (or token_env), or email and "
                "password for the adapter to log in"
            )
    return problems


def _build(document: Mapping[str, Any], env: Mapping[str, str], source: str) -> Profile:
    problems = _base_url_problems(document)
    adapter, adapter_problems = parse_declaration(document.get("adapter"))
    problems += adapter_problems
    clock, clock_problems = parse_clock(document.get("clock"))
    problems += clock_problems
    keys: dict[str, KeyProfile] = {}
    env_names: dict[str, str] = {}
    for role, table in document.get("keys", {}).items():
        where = f"keys.{role}"
        key = _secret(table, "key", where, env, problems, env_names)
        signing = _secret(table, "signing_secret", where, env, problems, env_names)
        if key is not None:
            keys[role] = KeyProfile(
                role=role,
                key=key,
                key_id=table.get("key_id"),
                account=table.get("account", "primary"),
                scopes=tuple(table.get("scopes", ())),
                revoked=bool(table.get("revoked", False)),
                signing_secret=signing,
            )
    sessions: dict[str, SessionProfile] = {}
    for name, table in document.get("sessions", {}).items():
        where = f"sessions.{name}"
        token = _secret(table, "token", where, env, problems, env_names)
        password = _secret(table, "password", where, env, problems, env_names)
        sessions[name] = SessionProfile(
            name=name, token=token, email=table.get("email"), password=password
        )
    receiver = ReceiverProfile(**document.get("receiver", {}))
    if receiver.public_url:
        public = urlsplit(receiver.public_url)
        if public.scheme not in {"http", "https"} or not public.hostname:
            problems.append(
                f"receiver.public_url: {receiver.public_url!r} is not an http(s) URL with a "
                'host; set it like "https://tunnel.example.net" or to "" for '
                "http://listen_host:port"
            )
    dns: DnsProfile | None = None
    if "dns" in document:
        host, _, port = document["dns"]["server"].rpartition(":")
        host = host.strip("[]")
        if not _is_loopback_host(host):
            problems.append(
                f"dns.server: {host!r} is not loopback; the suite's DNS server listens on "
                'this machine only, e.g. "127.0.0.1:5353"'
            )
        zone_dir = document["dns"].get("zone_dir")
        dns = DnsProfile(
            host=host,
            port=int(port),
            domain=document["dns"]["domain"].lower(),
            zone_dir=None if zone_dir is None else Path(zone_dir),
        )
    if problems:
        raise ProfileError(source, problems)
    usage = UsageProfile(**document["usage"]) if "usage" in document else None
    sandbox = dict(document.get("sandbox", {}))
    if "max_generation_seconds" in sandbox:
        sandbox["max_generation_seconds"] = float(sandbox["max_generation_seconds"])
    timing = document.get("timing", {})
    return Profile(
        name=document.get("name", urlsplit(document["base_url"]).netloc),
        base_url=document["base_url"].rstrip("/"),
        keys=MappingProxyType(keys),
        key_prefix=document.get("key_prefix"),
        api_version=document.get("api_version", genapi_spec.API_VERSION),
        adapter=adapter,
        allow_remote=bool(document.get("allow_remote", False)),
        sessions=MappingProxyType(sessions),
        receiver=receiver,
        sandbox=SandboxProfile(**sandbox),
        dns=dns,
        usage=usage,
        budgets=BudgetsProfile(**document.get("budgets", {})),
        timing=TimingProfile(
            tolerance_seconds=float(timing.get("tolerance_seconds", 0.6)),
            request_timeout_seconds=float(timing.get("request_timeout_seconds", 30.0)),
            run_ceiling_seconds=float(timing.get("run_ceiling_seconds", 3600.0)),
        ),
        wire=WireProfile(**document.get("wire", {})),
        rate=RateProfile(**document.get("rate", {})),
        clock=clock,
        source=source,
        secret_env=MappingProxyType(env_names),
    )


def parse_profile(
    text: str, *, source: str = "<text>", env: Mapping[str, str] | None = None
) -> Profile:
    """A :class:`Profile` from TOML text; :class:`ProfileError` lists every problem."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(source, [f"not valid TOML: {exc}"]) from None
    # The short forms of [adapter]: a preset's name, or "none" (nothing declared).
    shorthand = document.get("adapter")
    if shorthand == "none":
        del document["adapter"]
    elif isinstance(shorthand, str) and shorthand in preset_names():
        document["adapter"] = {"preset": shorthand}
    problems = schema_problems(document) + _presence_problems(document)
    if problems:
        # Structural problems first: the semantic rules assume the structure.
        raise ProfileError(source, problems + _base_url_problems(document))
    return _build(document, os.environ if env is None else env, source)


def load_profile(path: str | os.PathLike[str], *, env: Mapping[str, str] | None = None) -> Profile:
    """Load and validate the profile at *path* (``*_env`` fields read from *env*)."""
    source = os.fspath(path)
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ProfileError(
            source, [f"not UTF-8 text (byte {exc.start}); save the profile as UTF-8"]
        ) from None
    except OSError as exc:
        if file.is_dir():
            why = "it is a folder; give the path of the profile file"
        elif file.is_symlink() and not file.exists():
            why = f"a symbolic link to {os.readlink(file)}, which does not exist"
        else:
            why = f"{exc.strerror or exc}; create one with `genapi-conformance init-profile PATH`"
        raise ProfileError(source, [f"cannot read the file: {why}"]) from None
    return parse_profile(text, source=source, env=env)


# -- template --------------------------------------------------------------------------


def template_text() -> str:
    """The commented profile template (``fixtures/profiles/template.toml``)."""
    entry = genapi_spec.fixtures_dir() / "profiles" / "template.toml"
    return entry.read_text(encoding="utf-8")


def write_template(path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write the commented template to *path* (for ``genapi-conformance init-profile``).

    Refuses to replace an existing file unless *overwrite*: a profile holds secrets
    someone typed in by hand.
    """
    target = Path(path)
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} exists; choose another path or remove it first")
    target.parent.mkdir(parents=True, exist_ok=True)
    entry = genapi_spec.fixtures_dir() / "profiles" / "template.toml"
    with entry.open("rb") as source, target.open("wb") as sink:
        shutil.copyfileobj(source, sink)
    return target
