"""Adapters: how the suite performs the operations the spec leaves unshown.

Spec §5.4 and §5.8 say keys are created, viewed and revoked in a console and that
sessions come from a login, but show no request for any of it. A check that needs such
an operation (a key created and then revoked, the active-key limit) asks the profile's
adapter. :class:`ReferenceAdapter` speaks the reference implementation's extension paths
(ARCHITECTURE.md); :class:`NoAdapter` raises :class:`CapabilityMissing`, which the
suite's fixtures turn into a skip with the reason, never a failure.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any

import httpx

from .client import ApiClient
from .profile import CapabilityMissing
from .secrets import Secret

__all__ = [
    "Adapter",
    "AdapterError",
    "CapabilityMissing",
    "CreatedKey",
    "NoAdapter",
    "ReferenceAdapter",
    "make_adapter",
]


class AdapterError(RuntimeError):
    """The adapter's operation did not work: a setup error of the check, not a verdict."""


@dataclass(frozen=True)
class CreatedKey:
    """A key created through the adapter; ``key`` is the secret shown once (spec §2)."""

    id: str
    name: str
    scopes: tuple[str, ...]
    key: Secret


class Adapter(abc.ABC):
    """Operations the spec leaves unshown. *session* names a ``[sessions.*]`` table."""

    #: The profile's ``adapter`` value that selects this class.
    name: str

    @abc.abstractmethod
    def login(self, session: str) -> Secret:
        """Log in with the session's email and password; the token is used from then on."""

    @abc.abstractmethod
    def create_key(self, session: str, name: str, scopes: list[str]) -> CreatedKey:
        """Create an API key in the session's account."""

    @abc.abstractmethod
    def revoke_key(self, session: str, key_id: str) -> None:
        """Revoke a key (spec §5.4: effective immediately)."""

    @abc.abstractmethod
    def key_detail(self, session: str, key_id: str) -> dict[str, Any]:
        """The console's key detail view (holds the per-key signing secret, spec §5.6)."""


class NoAdapter(Adapter):
    """The IUT offers no way to do these operations: every call is a skip."""

    name = "none"

    def _missing(self, operation: str) -> CapabilityMissing:
        return CapabilityMissing(
            f"adapter: {operation}",
            'the profile has adapter = "none"; set adapter = "reference" if the IUT '
            "offers the reference implementation's console paths",
        )

    def login(self, session: str) -> Secret:
        raise self._missing("log in")

    def create_key(self, session: str, name: str, scopes: list[str]) -> CreatedKey:
        raise self._missing("create a key")

    def revoke_key(self, session: str, key_id: str) -> None:
        raise self._missing("revoke a key")

    def key_detail(self, session: str, key_id: str) -> dict[str, Any]:
        raise self._missing("read a key's detail")


class ReferenceAdapter(Adapter):
    """The reference implementation's console paths (ARCHITECTURE.md, extension paths).

    Requests go through the check's :class:`ApiClient`, so they are recorded (redacted)
    with the check's other exchanges.
    """

    name = "reference"

    def __init__(self, client: ApiClient) -> None:
        self.client = client

    def _expect(self, response: httpx.Response, status: int, what: str) -> Any:
        if response.status_code != status:
            shown = self.client.recorder.redactor.text(response.text[:500])
            raise AdapterError(
                f"{what}: {response.request.method} {response.request.url.path} answered "
                f"{response.status_code}, expected {status}: {shown}"
            )
        if status == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise AdapterError(f"{what}: the response is not JSON") from None

    def login(self, session: str) -> Secret:
        profile = self.client.profile.session(session)
        if profile.email is None or profile.password is None:
            raise CapabilityMissing(
                f"credentials for console session {session!r}",
                f"set sessions.{session}.email and password (or password_env)",
            )
        body = self._expect(
            self.client.request(
                "POST",
                "/api/session",
                role="none",
                json={"email": profile.email, "password": profile.password.reveal()},
            ),
            200,
            "log in",
        )
        token = Secret(str(body["token"]))
        self.client.set_session_token(session, token)
        return token

    def _session(self, session: str) -> str:
        profile = self.client.profile.session(session)
        if profile.token is None and profile.email is not None:
            self.login(session)
        return session

    def create_key(self, session: str, name: str, scopes: list[str]) -> CreatedKey:
        body = self._expect(
            self.client.request(
                "POST",
                "/api/keys",
                session=self._session(session),
                json={"name": name, "scopes": list(scopes)},
            ),
            201,
            "create a key",
        )
        key = Secret(str(body["key"]))
        self.client.recorder.redactor.add(key, label=f"created.{name}.key")
        return CreatedKey(
            id=str(body["id"]),
            name=str(body.get("name", name)),
            scopes=tuple(body.get("scopes", scopes)),
            key=key,
        )

    def revoke_key(self, session: str, key_id: str) -> None:
        response = self.client.request(
            "DELETE", f"/api/keys/{key_id}", session=self._session(session)
        )
        if response.status_code not in (200, 204):
            self._expect(response, 204, "revoke a key")

    def key_detail(self, session: str, key_id: str) -> dict[str, Any]:
        body = self._expect(
            self.client.request("GET", f"/api/keys/{key_id}", session=self._session(session)),
            200,
            "read a key's detail",
        )
        if not isinstance(body, dict):
            raise AdapterError("read a key's detail: the response is not a JSON object")
        if isinstance(body.get("signing_secret"), str):
            self.client.recorder.redactor.add(
                body["signing_secret"], label=f"created.{key_id}.signing_secret"
            )
        return body


def make_adapter(client: ApiClient) -> Adapter:
    """The adapter the profile's ``adapter`` value selects."""
    if client.profile.adapter == "reference":
        return ReferenceAdapter(client)
    return NoAdapter()
