"""Adapters: how the suite performs the console operations the spec leaves unshown.

Spec §5.4 and §5.8 say keys are created, viewed and revoked in a console and that
sessions come from a login, but show no request for any of it; §4 gives the console
webhook paths but not their payloads. A check that needs such an operation (a key
created and then revoked, the active-key limit, a registered webhook) goes through the
profile's adapter:

* :class:`DeclaredAdapter` performs the profile's ``[adapter]`` declaration
  (:mod:`conformance.target.adapter_declaration`): every deployment whose console is plain
  HTTP and JSON needs no code. ``preset = "reference"`` declares the reference
  implementation's console (ARCHITECTURE.md).
* A deployment that needs code registers an :class:`Adapter` subclass under the
  entry-point group ``genapi_conformance.adapters`` and names it in the profile
  (``[adapter] entry_point = "NAME"``); see :class:`Adapter`.

An operation nothing declares raises :class:`CapabilityMissing`, which the suite turns
into a skip with the reason, never a failure. The console webhook operations are always
sent from the declaration (:func:`console_request`): their paths are the spec's.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from conformance.secrets import Secret
from conformance.target.adapter_declaration import (
    ENTRY_POINT_GROUP,
    UNDECLARED_FIX,
    DeclaredOperation,
    adapter_entry_points,
)
from conformance.target.client import ApiClient
from conformance.target.profile import CapabilityMissing, Profile

__all__ = [
    "ENTRY_POINT_GROUP",
    "Adapter",
    "AdapterError",
    "CapabilityMissing",
    "CreatedKey",
    "DeclaredAdapter",
    "KeyDetail",
    "KeyList",
    "adapter_class",
    "console_request",
    "declared",
    "make_adapter",
]


class AdapterError(RuntimeError):
    """The adapter's operation did not work: a setup error of the check, not a verdict.

    ``status`` is the status the deployment answered, when it answered.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class CreatedKey:
    """A key created through the adapter; ``key`` is the secret shown once (spec §2).

    ``name`` and ``scopes`` are those asked for.
    """

    id: str
    name: str
    scopes: tuple[str, ...]
    key: Secret


@dataclass(frozen=True)
class KeyDetail:
    """The console's key detail view (spec §5.4, §5.6).

    ``name`` and ``scopes`` are what the view shows (None when it shows nothing there);
    ``body`` is the whole view as parsed JSON, for checks that search every value.
    """

    name: Any
    scopes: Any
    signing_secret: Secret | None
    body: Any


@dataclass(frozen=True)
class KeyList:
    """The console's list of keys: the ids listed and the whole answer as parsed JSON."""

    ids: tuple[str, ...]
    body: Any


def declared(profile: Profile, name: str) -> DeclaredOperation:
    """The declared operation *name*; :class:`CapabilityMissing` (a skip) when the profile
    declares none."""
    operation = profile.adapter.operations.get(name)
    if operation is None:
        raise CapabilityMissing(f"adapter: {name.replace('_', ' ')}", UNDECLARED_FIX)
    return operation


def console_request(
    client: ApiClient,
    operation: str,
    /,
    *,
    session: str | None = None,
    role: str | None = "none",
    headers: Mapping[str, str] | None = None,
    **values: Any,
) -> httpx.Response:
    """Send the declared *operation* with its placeholders filled from *values* (``id``,
    ``url``, ``events``, ``name``, ``scopes``, ``email``, ``password``).

    By default with the console *session* and no API key; *role* and *headers* send it
    with other credentials (the checks that an API key or a forged token is refused).
    The exchange is recorded by the client, like any request of a check.
    """
    sent = declared(client.profile, operation)
    return client.request(
        sent.method,
        sent.render_path(values),
        role=role,
        session=session,
        headers=headers,
        json=sent.render_body(values),
    )


class Adapter(abc.ABC):
    """The operations the spec leaves unshown; subclass it for a deployment that needs code.

    Register the subclass under the entry-point group ``genapi_conformance.adapters`` in
    the package that ships it, and name it in the profile::

        # pyproject.toml of that package
        [project.entry-points."genapi_conformance.adapters"]
        acme = "acme_genapi.adapter:AcmeAdapter"

        # the profile
        [adapter]
        entry_point = "acme"

    The suite makes one instance per check: ``Adapter(client)``. Send every request
    through ``self.client.request(...)`` (it records the exchange, redacted, with the
    check's others; ``session=NAME`` sends that console session's credential);
    ``self.client.profile`` is the profile, ``self.client.profile.adapter`` its
    declaration. *session* arguments name a ``[sessions.*]`` table of the profile.

    Raise :class:`CapabilityMissing` for an operation the deployment cannot do (the
    check is skipped with your reason), and :class:`AdapterError` (with the status) when
    the deployment answers what the operation does not expect. Add every secret you
    obtain that the answer does not show under a usual name to
    ``self.client.recorder.redactor`` before it could reach a report.

    :class:`DeclaredAdapter` performs the profile's declaration; subclass it to replace
    one operation (a login flow that needs code) and keep the others declared. The
    console webhook operations are always sent from the declaration.
    """

    def __init__(self, client: ApiClient) -> None:
        self.client = client

    @abc.abstractmethod
    def login(self, session: str) -> Secret:
        """Log in with the session's email and password; return the session token and
        hand it to ``self.client.set_session_token(session, token)``."""

    @abc.abstractmethod
    def create_key(self, session: str, name: str, scopes: list[str]) -> CreatedKey:
        """Create an API key in the session's account (spec §5.4)."""

    @abc.abstractmethod
    def key_detail(self, session: str, key_id: str) -> KeyDetail:
        """The console's key detail view (name, scopes, per-key signing secret, §5.6)."""

    @abc.abstractmethod
    def revoke_key(self, session: str, key_id: str) -> None:
        """Revoke a key (spec §5.4: effective immediately)."""

    @abc.abstractmethod
    def list_keys(self, session: str) -> KeyList:
        """The keys of the session's account as the console lists them."""


class DeclaredAdapter(Adapter):
    """Performs the profile's ``[adapter]`` declaration (method, path, body template,
    expected status, JSON pointers) for each operation."""

    def _call(
        self, declared_as: str, what: str, *, session: str | None, **values: Any
    ) -> tuple[DeclaredOperation, httpx.Response, Any]:
        """Send the operation *declared_as*; the answer parsed as JSON (None when it has no
        body). :class:`AdapterError` when the status is not the declared one."""
        operation = declared(self.client.profile, declared_as)
        if session is not None:
            self._ensure_session(session)
        response = console_request(self.client, declared_as, session=session, **values)
        if not operation.accepts(response.status_code):
            shown = self.client.recorder.redactor.text(response.text[:500])
            raise AdapterError(
                f"{what}: {response.request.method} {response.request.url.path} answered "
                f"{response.status_code}, expected {operation.expected}: {shown}",
                response.status_code,
            )
        if not response.content:
            return operation, response, None
        try:
            return operation, response, response.json()
        except ValueError:
            raise AdapterError(f"{what}: the answer is not JSON", response.status_code) from None

    def _ensure_session(self, session: str) -> None:
        """Log in first when the session has credentials but no token yet."""
        if self.client.session_token(session) is None:
            if self.client.profile.session(session).email is not None:
                self.login(session)

    @staticmethod
    def _missing(
        operation: DeclaredOperation, response: httpx.Response, what: str, found: str
    ) -> AdapterError:
        return AdapterError(
            f"{operation.name.replace('_', ' ')}: no {found} at {operation.where(what)} in the "
            f"answer ({response.status_code}); check [adapter.{operation.name}] {what} in "
            "the profile",
            response.status_code,
        )

    def login(self, session: str) -> Secret:
        profile = self.client.profile.session(session)
        if profile.email is None or profile.password is None:
            raise CapabilityMissing(
                f"credentials for console session {session!r}",
                f"set sessions.{session}.email and password (or password_env)",
            )
        operation, response, answer = self._call(
            "login",
            "log in",
            session=None,
            email=profile.email,
            password=profile.password.reveal(),
        )
        if "token" in operation.pointers:
            token = operation.read(answer, "token")
        else:  # a cookie credential: the login sets it
            token = self.client.profile.adapter.credential.from_set_cookie(
                response.headers.get_list("set-cookie")
            )
        if not isinstance(token, str) or not token:
            raise self._missing(operation, response, "token", "session token")
        secret = Secret(token)
        self.client.set_session_token(session, secret)
        return secret

    def create_key(self, session: str, name: str, scopes: list[str]) -> CreatedKey:
        operation, response, answer = self._call(
            "create_key", "create a key", session=session, name=name, scopes=list(scopes)
        )
        key_id, key = operation.read_id(answer, "id"), operation.read(answer, "key")
        if key_id is None:
            raise self._missing(operation, response, "id", "key id")
        if not isinstance(key, str) or not key:
            raise self._missing(operation, response, "key", "key secret")
        return CreatedKey(id=key_id, name=name, scopes=tuple(scopes), key=Secret(key))

    def key_detail(self, session: str, key_id: str) -> KeyDetail:
        operation, response, answer = self._call(
            "key_detail", "read a key's detail", session=session, id=key_id
        )
        if not isinstance(answer, dict):
            raise AdapterError(
                "read a key's detail: the answer is not a JSON object", response.status_code
            )
        signing = operation.read(answer, "signing_secret")
        return KeyDetail(
            name=operation.read(answer, "name"),
            scopes=operation.read(answer, "scopes"),
            signing_secret=Secret(signing) if isinstance(signing, str) and signing else None,
            body=answer,
        )

    def revoke_key(self, session: str, key_id: str) -> None:
        self._call("revoke_key", "revoke a key", session=session, id=key_id)

    def list_keys(self, session: str) -> KeyList:
        operation, response, answer = self._call("list_keys", "list the keys", session=session)
        listed = operation.listed(answer)
        if listed is None:
            raise self._missing(operation, response, "list", "array of keys")
        return KeyList(ids=tuple(item.id for item in listed if item.id is not None), body=answer)


def adapter_class(name: str) -> type[Adapter]:
    """The :class:`Adapter` subclass registered as *name* under ``genapi_conformance.adapters``."""
    entry = adapter_entry_points().get(name)
    if entry is None:
        raise AdapterError(f"no adapter {name!r} is registered under {ENTRY_POINT_GROUP}")
    loaded = entry.load()
    if not (isinstance(loaded, type) and issubclass(loaded, Adapter)):
        raise AdapterError(
            f"the entry point {name!r} ({entry.value}) of {ENTRY_POINT_GROUP} is not a "
            "subclass of conformance.target.adapters.Adapter"
        )
    return loaded


def make_adapter(client: ApiClient) -> Adapter:
    """The profile's adapter: the registered class it names, else its declaration."""
    name = client.profile.adapter.entry_point
    chosen = DeclaredAdapter if name is None else adapter_class(name)
    return chosen(client)
