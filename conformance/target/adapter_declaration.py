"""The adapter declaration: how the suite speaks a deployment's console, written in the profile.

The spec shows no request for logging in or for creating, viewing, listing and revoking
API keys (§5.4 "Keys are created, viewed and revoked in the developer dashboard", §5.8
"Session login flow: not shown"), and it gives the console webhook paths without their
payloads (§4 "Payloads of the console endpoints: not shown"). A profile's ``[adapter]``
table declares them: for each operation the method, the path (``{id}`` placeholders), a
body template, the expected status and RFC 6901 JSON pointers to what the suite reads
from the answer; and how the console session travels (``Authorization: Bearer <token>``
or a cookie).

A declaration is built in three layers, each overriding the one before per operation and
per field (a body is replaced whole):

1. :data:`SPEC_WEBHOOK_OPERATIONS`: the spec's webhook paths with the payloads the suite
   assumes when nothing is declared (catalog HOOK-CREATE-01, CONSOLE-PAYLOAD-01);
2. a preset (``preset = "reference"``: ``adapter_presets/reference.toml``, the reference
   implementation's console, ARCHITECTURE.md);
3. the profile's own fields.

This module is data only (parse, validate, render a request, read an answer);
:mod:`conformance.target.adapters` sends the requests.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from http.cookies import CookieError, SimpleCookie
from importlib import resources
from types import MappingProxyType
from typing import Any, Final, Literal
from urllib.parse import quote

__all__ = [
    "ENTRY_POINT_GROUP",
    "KEY_OPERATIONS",
    "OPERATIONS",
    "SPEC_WEBHOOK_OPERATIONS",
    "UNDECLARED_FIX",
    "AdapterDeclaration",
    "DeclaredOperation",
    "Listed",
    "SessionCredential",
    "adapter_entry_points",
    "parse_declaration",
    "preset_names",
    "preset_table",
]

#: The entry-point group under which packages register :class:`conformance.target.adapters.Adapter`
#: subclasses (``[adapter] entry_point = "NAME"``).
ENTRY_POINT_GROUP: Final = "genapi_conformance.adapters"

#: The skip reason's fix when a check needs an operation that nothing declares.
UNDECLARED_FIX: Final = (
    'add an [adapter] table to the profile: preset = "reference" for the reference '
    "implementation's console paths, or the operations of this deployment "
    "(see genapi-conformance init-profile)"
)


@dataclass(frozen=True)
class _Kind:
    """What one operation may use (placeholders) and must let the suite read (pointers)."""

    method: str  # the default method
    placeholders: tuple[str, ...]  # {id}: the operation acts on one key or webhook
    pointers: Mapping[str, str]  # field -> what it points at, for messages
    masked: str | None = None  # the pointer whose value is a secret: masked in records


_KINDS: Final[Mapping[str, _Kind]] = MappingProxyType(
    {
        "login": _Kind("POST", ("email", "password"), {"token": "the session token"}, "token"),
        "create_key": _Kind(
            "POST",
            ("name", "scopes"),
            {"id": "the new key's id", "key": "the key secret shown once"},
            "key",
        ),
        "key_detail": _Kind(
            "GET",
            ("id",),
            {
                "name": "the key's name",
                "scopes": "the key's scopes",
                "signing_secret": "the key's signing secret",
            },
            "signing_secret",
        ),
        "revoke_key": _Kind("DELETE", ("id",), {}),
        "list_keys": _Kind(
            "GET", (), {"list": "the array of keys", "item_id": "a listed key's id (in an item)"}
        ),
        "create_webhook": _Kind(
            "POST",
            ("url", "events"),
            {"id": "the webhook's id", "secret": "its whsec_ signing secret"},
            "secret",
        ),
        "list_webhooks": _Kind(
            "GET",
            (),
            {
                "list": "the array of webhooks",
                "item_id": "a listed webhook's id (in an item)",
                "item_url": "a listed webhook's URL (in an item)",
            },
        ),
        "test_webhook": _Kind("POST", ("id",), {}),
        "delete_webhook": _Kind("DELETE", ("id",), {}),
    }
)
#: Placeholders whose value is a JSON array: only a whole string can hold one.
_ARRAY_PLACEHOLDERS: Final = frozenset({"scopes", "events"})

#: Every operation a declaration may hold, in the order the template shows them.
OPERATIONS: Final = tuple(_KINDS)
#: The operations of the key lifecycle and the login: nothing declares them by default.
KEY_OPERATIONS: Final = ("login", "create_key", "key_detail", "revoke_key", "list_keys")

#: The console webhook operations as the spec gives them (§4 Console endpoints), with the
#: payloads the suite assumes when nothing else is declared: ``{"url", "events"}`` in,
#: ``id`` and ``secret`` out (HOOK-CREATE-01); a list as a JSON array or an object holding
#: one under ``webhooks`` or ``data``, of items with ``id`` and ``url`` (CONSOLE-PAYLOAD-01).
SPEC_WEBHOOK_OPERATIONS: Final[Mapping[str, Mapping[str, Any]]] = MappingProxyType(
    {
        "create_webhook": {
            "method": "POST",
            "path": "/api/webhooks",
            "body": {"url": "{url}", "events": "{events}"},
            "id": "/id",
            "secret": "/secret",
        },
        "list_webhooks": {
            "method": "GET",
            "path": "/api/webhooks",
            "list": ["", "/webhooks", "/data"],
            "item_id": "/id",
            "item_url": "/url",
        },
        "test_webhook": {"method": "POST", "path": "/api/webhooks/{id}/test"},
        "delete_webhook": {"method": "DELETE", "path": "/api/webhooks/{id}"},
    }
)

_PLACEHOLDER: Final = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: What a whole-string placeholder without a value turns into: the member is left out.
_OMIT: Final = object()
#: The value a pointer resolves to when the answer has nothing there.
_ABSENT: Final = object()


# -- JSON pointers (RFC 6901) -----------------------------------------------------------


def _resolve(document: Any, pointer: str) -> Any:
    """The value at *pointer* in *document*, or :data:`_ABSENT`."""
    if pointer == "":
        return document
    current = document
    for token in pointer[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(current, dict) and token in current:
            current = current[token]
        elif isinstance(current, list) and token.isdigit() and int(token) < len(current):
            current = current[int(token)]
        else:
            return _ABSENT
    return current


def _identifier(value: Any) -> str | None:
    """An id as the suite uses it: a non-empty string, or an integer written out."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


@dataclass(frozen=True)
class Listed:
    """One item of a declared list: its id and URL (where declared), and the item itself."""

    id: str | None
    url: Any
    item: Any


# -- one operation ---------------------------------------------------------------------


@dataclass(frozen=True)
class DeclaredOperation:
    """One console operation as declared: how to send it, what success is, what to read.

    ``status`` empty means any 2xx. ``pointers`` maps what the suite reads (``id``,
    ``key``, ``list`` …) to JSON pointers, tried in order (the first that resolves wins).
    """

    name: str
    method: str
    path: str
    body: Any = None
    status: tuple[int, ...] = ()
    pointers: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def expected(self) -> str:
        """The expected status, for messages (``201``, ``200 or 204``, ``any 2xx``)."""
        return " or ".join(map(str, self.status)) if self.status else "any 2xx"

    def accepts(self, status: int) -> bool:
        return status in self.status if self.status else 200 <= status < 300

    def render_path(self, values: Mapping[str, Any]) -> str:
        """The path with each ``{placeholder}`` filled in, URL-quoted."""

        def fill(match: re.Match[str]) -> str:
            value = values.get(match.group(1))
            if value is None:
                raise ValueError(f"{self.name}: no value for {{{match.group(1)}}} in {self.path}")
            return quote(str(value), safe="")

        return _PLACEHOLDER.sub(fill, self.path)

    def render_body(self, values: Mapping[str, Any]) -> Any:
        """The body template with its placeholders filled in (None: no body).

        A string that is exactly one placeholder takes the value with its JSON type (the
        scopes as an array); without a value (``{events}`` not given) its member is left
        out. Placeholders inside longer strings are replaced by the value's text.
        """
        if self.body is None:
            return None
        rendered = _render(self.body, values)
        return None if rendered is _OMIT else rendered

    def read(self, answer: Any, what: str) -> Any:
        """What the answer holds at the pointers declared for *what*; None when nothing.

        For ``list`` only an array counts (so ``["", "/webhooks"]`` finds a bare array or
        one under ``webhooks``).
        """
        for pointer in self.pointers.get(what, ()):
            value = _resolve(answer, pointer)
            if value is _ABSENT or (what == "list" and not isinstance(value, list)):
                continue
            return value
        return None

    def read_id(self, answer: Any, what: str = "id") -> str | None:
        """An id the answer holds at *what*'s pointers (a string, or an integer as text)."""
        return _identifier(self.read(answer, what))

    def listed(self, answer: Any) -> list[Listed] | None:
        """The items of a list answer (None when no array is where ``list`` points)."""
        items = self.read(answer, "list")
        if not isinstance(items, list):
            return None
        return [
            Listed(self.read_id(item, "item_id"), self.read(item, "item_url"), item)
            for item in items
        ]

    def where(self, what: str) -> str:
        """The pointers of *what*, for messages: ``/data/secret``."""
        return " or ".join(repr(p) for p in self.pointers.get(what, ())) or "(not declared)"

    def matches(self, method: str, path: str) -> bool:
        """Whether a request of *method* to *path* is this operation (the declared path may
        sit under a base path of the deployment)."""
        if method.upper() != self.method:
            return False
        texts = _PLACEHOLDER.split(self.path.split("?", 1)[0])[::2]  # between placeholders
        pattern = "[^/]+".join(re.escape(text) for text in texts)
        return re.fullmatch(f"(?:/.*)?{pattern}", path) is not None

    def to_dict(self) -> dict[str, Any]:
        """Plain data, in the profile's form (for the redacted profile)."""
        data: dict[str, Any] = {"method": self.method, "path": self.path}
        if self.body is not None:
            data["body"] = self.body
        if self.status:
            data["status"] = list(self.status)
        for what, pointers in self.pointers.items():
            data[what] = pointers[0] if len(pointers) == 1 else list(pointers)
        return data


def _render(template: Any, values: Mapping[str, Any]) -> Any:
    if isinstance(template, str):
        whole = _PLACEHOLDER.fullmatch(template)
        if whole is not None:
            value = values.get(whole.group(1))
            return _OMIT if value is None else value
        return _PLACEHOLDER.sub(lambda m: str(values.get(m.group(1), "")), template)
    if isinstance(template, Mapping):
        members = {name: _render(item, values) for name, item in template.items()}
        return {name: item for name, item in members.items() if item is not _OMIT}
    if isinstance(template, list):
        items = [_render(item, values) for item in template]
        return [item for item in items if item is not _OMIT]
    return template


# -- the credential --------------------------------------------------------------------


@dataclass(frozen=True)
class SessionCredential:
    """How a console session token travels: ``Authorization: Bearer`` or a named cookie."""

    scheme: Literal["bearer", "cookie"] = "bearer"
    cookie: str | None = None

    def headers(self, token: str) -> dict[str, str]:
        """The request headers that carry *token*."""
        if self.scheme == "cookie":
            return {"Cookie": f"{self.cookie}={token}"}
        return {"Authorization": f"Bearer {token}"}

    def from_set_cookie(self, set_cookies: Sequence[str]) -> str | None:
        """The session cookie's value among a response's Set-Cookie headers, if any."""
        if self.scheme != "cookie":
            return None
        for header in set_cookies:
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(header)
            except CookieError:
                continue
            morsel = jar.get(self.cookie or "")
            if morsel is not None and morsel.value:
                return morsel.value
        return None


# -- the whole declaration ---------------------------------------------------------------


@dataclass(frozen=True)
class AdapterDeclaration:
    """A profile's ``[adapter]``: the console operations it declares and the credential.

    ``operations`` always holds the four webhook operations (the spec's paths at least);
    the key operations and the login only where a preset or the profile declares them.
    """

    operations: Mapping[str, DeclaredOperation]
    credential: SessionCredential = field(default_factory=SessionCredential)
    preset: str | None = None
    entry_point: str | None = None

    @property
    def declared(self) -> bool:
        """Whether anything performs the key operations: a preset, an adapter class, or
        at least one of them declared."""
        return (
            self.preset is not None
            or self.entry_point is not None
            or any(name in self.operations for name in KEY_OPERATIONS)
        )

    def secrets_in(
        self, method: str, path: str, content: bytes, set_cookies: Sequence[str]
    ) -> Iterator[tuple[str, str]]:
        """``(label, value)`` of the secrets a response to *method path* holds where the
        declaration points (a created key, a whsec_ secret, a token), and the session
        cookie; the client learns them before it records the exchange, because their
        field names may be ones the redactor does not know."""
        cookie = self.credential.from_set_cookie(set_cookies)
        if cookie is not None:
            yield f"adapter.credential.{self.credential.cookie}", cookie
        answer: Any = _ABSENT
        for name, operation in self.operations.items():
            secret = _KINDS[name].masked
            if secret is None or secret not in operation.pointers:
                continue
            if not operation.matches(method, path):
                continue
            if answer is _ABSENT:
                answer = _json(content)
            value = operation.read(answer, secret)
            if isinstance(value, str) and value:
                yield f"adapter.{name}.{secret}", value

    def to_dict(self) -> dict[str, Any]:
        """Plain data (no secret in it: templates and pointers only)."""
        return {
            "preset": self.preset,
            "entry_point": self.entry_point,
            "credential": {"scheme": self.credential.scheme, "cookie": self.credential.cookie},
            "operations": {name: op.to_dict() for name, op in self.operations.items()},
        }


def _json(content: bytes) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return None


# -- presets and entry points ------------------------------------------------------------


def preset_names() -> list[str]:
    """The presets shipped with the suite (``conformance/adapter_presets/*.toml``)."""
    folder = resources.files(__package__) / "adapter_presets"
    return sorted(
        entry.name.removesuffix(".toml")
        for entry in folder.iterdir()
        if entry.name.endswith(".toml")
    )


@cache
def preset_table(name: str) -> Mapping[str, Any]:
    """The ``[adapter]`` table of the preset *name* (its file is a profile fragment)."""
    folder = resources.files(__package__) / "adapter_presets"
    text = (folder / f"{name}.toml").read_text(encoding="utf-8")
    table: dict[str, Any] = tomllib.loads(text)["adapter"]
    return MappingProxyType(table)


def adapter_entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    """The adapter classes installed packages register, by name."""
    found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    return {entry.name: entry for entry in found}


# -- parsing and validation ----------------------------------------------------------------


def _layered(layers: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Later layers override earlier ones per table and per field."""
    merged: dict[str, Any] = {}
    for layer in layers:
        for name, value in layer.items():
            if isinstance(value, Mapping):
                merged[name] = {**merged.get(name, {}), **value}
            else:
                merged[name] = value
    return merged


def _pointers(value: Any) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def _statuses(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, int) else tuple(value)


def _placeholders(template: Any) -> Iterator[tuple[str, bool]]:
    """``(name, whole)`` of every placeholder in a template; *whole* when a string is
    exactly that placeholder."""
    if isinstance(template, str):
        whole = _PLACEHOLDER.fullmatch(template) is not None
        for match in _PLACEHOLDER.finditer(template):
            yield match.group(1), whole
    elif isinstance(template, Mapping):
        for item in template.values():
            yield from _placeholders(item)
    elif isinstance(template, list):
        for item in template:
            yield from _placeholders(item)


def _operation_problems(
    name: str, table: Mapping[str, Any], credential: SessionCredential
) -> list[str]:
    kind = _KINDS[name]
    where = f"adapter.{name}"
    problems: list[str] = []
    if "path" not in table:
        problems.append(
            f"{where}.path: missing; set path to the console path of this operation, e.g. "
            f'"/api/keys/{{id}}" (or set preset = "reference")'
        )
    used: set[str] = set()
    for part in ("path", "body"):
        for placeholder, whole in _placeholders(table.get(part)):
            used.add(placeholder)
            if placeholder not in kind.placeholders:
                offered = ", ".join(f"{{{p}}}" for p in kind.placeholders) or "none"
                problems.append(
                    f"{where}.{part}: unknown placeholder {{{placeholder}}}; this operation "
                    f"offers {offered}"
                )
            elif placeholder in _ARRAY_PLACEHOLDERS and not whole:
                problems.append(
                    f"{where}.{part}: {{{placeholder}}} is an array; write it as a whole "
                    f'string value, e.g. {placeholder} = "{{{placeholder}}}"'
                )
    if "id" in kind.placeholders and "id" not in used:
        problems.append(
            f"{where}.path: no {{id}}; put the placeholder where the id goes, e.g. "
            f'"/api/keys/{{id}}"'
        )
    for what, meaning in kind.pointers.items():
        if what in table:
            continue
        if name == "login" and what == "token" and credential.scheme == "cookie":
            continue  # read from the login's Set-Cookie instead
        problems.append(
            f"{where}.{what}: missing; set it to the RFC 6901 JSON pointer to {meaning} in "
            f'the answer, e.g. "/{what}" (or set preset = "reference")'
        )
    return problems


def parse_declaration(table: Mapping[str, Any] | None) -> tuple[AdapterDeclaration, list[str]]:
    """The declaration of a profile's ``[adapter]`` table (already valid against the
    profile schema), and the problems the schema cannot see, each with its fix."""
    table = table or {}
    problems: list[str] = []
    preset = table.get("preset")
    layers: list[Mapping[str, Any]] = [SPEC_WEBHOOK_OPERATIONS]
    if preset is not None:
        if preset in preset_names():
            layers.append(preset_table(preset))
        else:
            problems.append(
                f"adapter.preset: no preset {preset!r}; known: {', '.join(preset_names())}"
            )
    layers.append({k: v for k, v in table.items() if k not in ("preset", "entry_point")})
    merged = _layered(layers)
    credential_table = merged.get("credential", {})
    credential = SessionCredential(
        scheme=credential_table.get("scheme", "bearer"), cookie=credential_table.get("cookie")
    )
    if credential.scheme == "cookie" and not credential.cookie:
        problems.append(
            'adapter.credential.cookie: missing; name the session cookie, e.g. cookie = "session"'
        )
    entry_point = table.get("entry_point")
    if entry_point is not None and entry_point not in adapter_entry_points():
        registered = ", ".join(sorted(adapter_entry_points())) or "none"
        problems.append(
            f"adapter.entry_point: no adapter {entry_point!r} is registered under the "
            f"entry-point group {ENTRY_POINT_GROUP} (registered: {registered}); install the "
            "package that provides it, or remove entry_point"
        )
    operations: dict[str, DeclaredOperation] = {}
    for name in OPERATIONS:
        if name not in merged:
            continue
        op_table, kind = merged[name], _KINDS[name]
        problems += _operation_problems(name, op_table, credential)
        operations[name] = DeclaredOperation(
            name=name,
            method=str(op_table.get("method", kind.method)).upper(),
            path=str(op_table.get("path", "")),
            body=op_table.get("body"),
            status=_statuses(op_table.get("status")),
            pointers=MappingProxyType(
                {
                    what: _pointers(op_table[what])
                    for what in _KINDS[name].pointers
                    if what in op_table
                }
            ),
        )
    declaration = AdapterDeclaration(
        operations=MappingProxyType(operations),
        credential=credential,
        preset=preset,
        entry_point=entry_point,
    )
    return declaration, problems
