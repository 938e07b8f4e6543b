"""The operations of the OpenAPI document, as the auth, scope and console checks walk them.

The checks of authentication (spec §5.1), scopes (§5.3) and console separation (§4
Console endpoints, §5.5) hold for *every* operation, so they are parametrised over the
document rather than over a hand-kept list: an operation added to ``openapi/`` is
checked without touching the checks. ``x-extension`` operations (the reference's own
paths, ARCHITECTURE.md) are not spec requirements; :func:`operations` leaves them out
unless asked.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

import genapi_spec
from conformance.observe.receiver import Endpoint, Receiver
from conformance.secrets import Redactor
from conformance.target.client import ApiClient, Recorder
from conformance.target.profile import Profile
from conformance.target.setup import IMAGES_PATH, SUBMIT_PROMPT, SetupFailed, submit_generation
from conformance.target.webhooks import RegisteredWebhook, delete_webhook, register_webhook

__all__ = [
    "Operation",
    "OperationPaths",
    "operation_paths",
    "operations",
]

_METHODS: Final = ("get", "post", "put", "patch", "delete")


@dataclass(frozen=True)
class Operation:
    """One method and path of the OpenAPI document."""

    method: str  # upper case
    path: str  # the template, e.g. /v1/generations/{id}
    operation_id: str
    scope: str | None  # x-required-scope: the key scope the operation needs (§5.2)
    extension: bool  # x-extension: the reference's own path, not a spec requirement
    has_body: bool  # takes a JSON request body

    @property
    def console(self) -> bool:
        """A console path (spec: "Console paths sit under /api")."""
        return self.path.startswith("/api/")

    @property
    def public(self) -> bool:
        """A public path (spec §9: "Public paths are prefixed /v1")."""
        return self.path.startswith("/v1/")

    @property
    def submit(self) -> bool:
        """A submit that spends credits: a scoped POST (generation, edit, run)."""
        return self.method == "POST" and self.scope is not None

    @property
    def param_id(self) -> str:
        """A readable pytest id: ``post-v1-images-generate``, ``get-v1-generations-id``."""
        words = self.path.replace("{", "").replace("}", "").strip("/").replace("/", "-")
        return f"{self.method.lower()}-{words}"

    def url(self, **params: str) -> str:
        """The path with its ``{name}`` parameters filled in from *params*."""
        path = self.path
        for name, value in params.items():
            path = path.replace("{" + name + "}", value)
        if "{" in path:
            raise KeyError(f"{self.path}: no value for a path parameter in {path!r}")
        return path

    def minimal_body(self) -> dict[str, Any] | None:
        """A valid body without delivery target for a submit (prompt is its one required
        field, §4), else ``None``; other bodies are built by the checks that send them."""
        return {"prompt": SUBMIT_PROMPT} if self.submit else None


def operations(*, extensions: bool = False) -> list[Operation]:
    """Every operation of the OpenAPI document, in document order.

    With *extensions* the ``x-extension`` operations are included too.
    """
    found: list[Operation] = []
    for path, item in genapi_spec.openapi_document()["paths"].items():
        for method in _METHODS:
            op = item.get(method)
            if not isinstance(op, dict):
                continue
            extension = bool(op.get("x-extension", False))
            if extension and not extensions:
                continue
            found.append(
                Operation(
                    method=method.upper(),
                    path=path,
                    operation_id=str(op.get("operationId", f"{method} {path}")),
                    scope=op.get("x-required-scope"),
                    extension=extension,
                    has_body="requestBody" in op,
                )
            )
    return found


class OperationPaths:
    """Concrete paths for the operations: real resources of the primary account.

    A refusal proves something only where the same request with a good credential is
    served, so the ids in the paths are real: one image generation submitted by the
    primary key with an inline target on the suite's receiver (its id, and the id of its
    delivery, from the X-<brand>-Delivery header, spec §6), and a registered webhook created with
    the primary console session (when the profile has one; else a made-up id, and the
    webhook checks only see a 404 from a good key). Created on first use, once per module.

    The receiver answers that delivery 500 every time, so it ends ``exhausted`` after its
    3 attempts (spec §3): the state from which POST redeliver is stated to work, so a
    good key's redeliver is served rather than refused for the delivery's state.
    """

    #: Spec §3 and §6: attempts per delivery; outcomes from which redeliver works.
    ATTEMPTS: Final = 3
    REDELIVERABLE: Final = frozenset({"exhausted", "failed"})
    #: How long the delivery record may take to show its final outcome, and how often
    #: it is read meanwhile.
    RECORD_DEADLINE_SECONDS: Final = 15.0
    RECORD_POLL_SECONDS: Final = 0.25

    #: A webhook id no IUT issued (used only when the profile has no console session).
    UNKNOWN_WEBHOOK_ID: Final = "wh_conformance_unknown"

    def __init__(
        self,
        client: ApiClient,
        endpoint: Endpoint,
        *,
        delivery_timeout: float,
    ) -> None:
        self.client = client
        self.endpoint = endpoint
        self.delivery_timeout = delivery_timeout
        self._generation_id: str | None = None
        self._delivery_id: str | None = None
        self._webhook: RegisteredWebhook | None = None
        endpoint.respond_with_statuses([500])

    def _submit(self) -> None:
        body = {"prompt": SUBMIT_PROMPT, "webhook": {"url": self.endpoint.url}}
        self._generation_id = submit_generation(
            self.client, IMAGES_PATH, body, context="an image submit for the path ids"
        )

    @property
    def generation_id(self) -> str:
        if self._generation_id is None:
            self._submit()
        assert self._generation_id is not None
        return self._generation_id

    @property
    def delivery_id(self) -> str:
        """The delivery of the generation, once its record says it is exhausted."""
        if self._delivery_id is None:
            generation_id = self.generation_id
            arrived = self.endpoint.wait_for(self.ATTEMPTS, timeout=self.delivery_timeout)
            first = arrived[0]
            delivery_id = first.header("Delivery") or str(first.json().get("id"))
            self._await_redeliverable(generation_id)
            self._delivery_id = delivery_id
        return self._delivery_id

    def _await_redeliverable(self, generation_id: str) -> None:
        deadline = time.monotonic() + self.RECORD_DEADLINE_SECONDS
        path = f"/v1/generations/{generation_id}/deliveries"
        while True:
            response = self.client.request("GET", path)
            body = response.json() if response.status_code == 200 else {}
            records = body.get("deliveries", []) if isinstance(body, dict) else []
            outcomes = [r.get("outcome") for r in records if isinstance(r, dict)]
            if outcomes and set(outcomes) <= self.REDELIVERABLE:
                return
            if time.monotonic() >= deadline:
                raise SetupFailed(
                    f"setup: the delivery of {generation_id} did not end exhausted or failed "
                    f"within {self.RECORD_DEADLINE_SECONDS:g} s; outcomes: {outcomes}"
                )
            time.sleep(self.RECORD_POLL_SECONDS)  # polling a record's state, bounded above

    @property
    def webhook_id(self) -> str:
        if self._webhook is None:
            if not self.client.profile.sessions:
                return self.UNKNOWN_WEBHOOK_ID
            self._webhook = register_webhook(self.client, self.endpoint.url)
        return self._webhook.id

    def path(self, operation: Operation) -> str:
        """The operation's path with real ids of the primary account filled in."""
        if "{" not in operation.path:
            return operation.path
        if operation.path.startswith("/v1/generations/"):
            return operation.url(id=self.generation_id)
        if operation.path.startswith("/v1/webhooks/deliveries/"):
            return operation.url(id=self.delivery_id)
        if operation.path.startswith(("/v1/webhooks/", "/api/webhooks/")):
            return operation.url(id=self.webhook_id)
        raise KeyError(f"no resource for the path parameters of {operation.path}")

    def close(self) -> None:
        """Delete the registered webhook this created (a leftover webhook would receive
        later events; a failure to delete is raised)."""
        if self._webhook is not None:
            webhook, self._webhook = self._webhook, None
            delete_webhook(self.client, webhook)


@contextmanager
def operation_paths(
    profile: Profile, redactor: Redactor, receiver: Receiver, name: str
) -> Iterator[OperationPaths]:
    """:class:`OperationPaths` for a module of checks, with its own client and endpoint.

    Its setup requests are recorded apart from any check's exchanges (they are setup).
    """
    client = ApiClient(profile, Recorder(redactor))
    endpoint = receiver.endpoint(name)
    paths = OperationPaths(
        client, endpoint, delivery_timeout=profile.sandbox.max_generation_seconds + 36.0
    )
    try:
        yield paths
    finally:
        try:
            paths.close()
        finally:
            endpoint.close()
            client.close()
