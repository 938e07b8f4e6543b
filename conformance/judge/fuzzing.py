"""Schema-driven fuzzing: Schemathesis cases from the OpenAPI document, made safe to send.

The contract checks (``conformance/checks/test_contract_fuzz.py``) and the reference's
project tests draw requests from the spec's OpenAPI document with Schemathesis, bounded
and derandomised, and send them themselves. This module holds what they share:

* :func:`bundled_document`: the OpenAPI document with every ``../schemas/*.json``
  reference bundled under ``components/schemas``, so Schemathesis resolves everything
  locally (the schemas' ``$id`` host is never fetched) and a wheel works as a checkout;
* :func:`load_schema`, :func:`draw_cases`, :func:`coverage_cases`: the Schemathesis
  schema; a bounded, deterministic list of drawn cases of one operation (positive or
  negative mode); the coverage phase's systematic ones (each field missing, each wrong
  type, each bound crossed);
* :func:`make_safe`: the URL-safety override every drawn case goes through (below);
* :func:`send_kwargs`: the keyword arguments for :meth:`ApiClient.request` of a case
  (the suite's client sends, so every exchange is recorded and redacted);
* :func:`documented_schema`: the schema file the document gives a status's body.

Safety (hard: the suite never makes an implementation dial anything but the suite's own
receivers and harmless reject targets): Schemathesis fills ``format: uri`` fields with
real-looking public URLs (measured: ``https://4s5jt.4gt2q7.info``), and an implementation
may dial a callback target. So every drawn body passes through :func:`make_safe` before it
is sent: every string in a field that may name a delivery target (``callback_url``,
``url``, a ``webhook`` that is not an object, and anything inside them) becomes one of
the caller's *safe URLs* (the suite's receiver endpoint) or one of :data:`REJECT_URLS`
(targets the spec says MUST be refused, aimed at the discard port 9); any other string
that holds ``://`` becomes a reject URL too. Nothing else is ever submitted as a target.
Valid data (positive mode, coverage cases) gets only the safe URLs, so that it stays
valid; drawn invalid data gets both. ``tests/conformance/test_fuzzing.py`` draws many
bodies of every operation and asserts the property.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Final, Literal

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable

import genapi_spec
from conformance.judge.strategies import MAX_URL_LENGTH

__all__ = [
    "MODES",
    "REJECT_URLS",
    "URL_FIELDS",
    "FuzzCase",
    "Mode",
    "bundled_document",
    "coverage_cases",
    "documented_schema",
    "draw_cases",
    "load_schema",
    "make_safe",
    "send_kwargs",
    "unsafe_strings",
]

if TYPE_CHECKING:
    from schemathesis import GenerationMode

#: What a case is drawn as: data the schemas allow, or data they forbid.
Mode = Literal["positive", "negative"]
MODES: Final[tuple[Mode, ...]] = ("positive", "negative")

#: Targets every implementation MUST refuse (spec §4 "Callback URL requirements", §7),
#: all at the discard port 9 so that a vulnerable IUT dialling one does no harm:
#: private, loopback outside the test allowlist (127.0.0.1/32), link-local and the cloud
#: metadata address, IPv6 loopback, bad schemes, an unresolvable name, an over-long URL.
REJECT_URLS: Final[tuple[str, ...]] = (
    "http://10.0.0.1:9/fuzz",
    "https://192.168.0.1:9/fuzz",
    "http://172.16.0.1:9/fuzz",
    "http://127.0.0.2:9/fuzz",
    "http://169.254.169.254:9/latest/meta-data/",
    "http://[::1]:9/fuzz",
    "http://fuzz.invalid:9/fuzz",
    "ftp://10.0.0.1:9/fuzz",
    "file:///dev/null",
    "gopher://10.0.0.1:9/_fuzz",
    "http://10.0.0.1:9/" + "a" * (MAX_URL_LENGTH + 1 - len("http://10.0.0.1:9/")),
)
#: Body fields that may name a delivery target (spec §2 binding, §4 generation bodies;
#: ``url`` is also the registered webhook's field in the console, HOOK-CREATE-01).
URL_FIELDS: Final = frozenset({"callback_url", "url", "webhook"})
#: Headers a drawn case never sends: the credential is the caller's (role or session),
#: and transport headers are httpx's (a generated Content-Length would lie).
_DROPPED_HEADERS: Final = frozenset(
    {"authorization", "content-length", "host", "connection", "transfer-encoding"}
)


# -- the document ------------------------------------------------------------------------


def _local_ref(ref: str, here: str | None) -> str:
    """``../schemas/x.json#/p`` or ``x.json#/p`` → ``#/components/schemas/x/p``; a local
    ``#/$defs/d`` inside schema file *here* → ``#/components/schemas/here/$defs/d``."""
    if ref.startswith("#/components/"):
        return ref
    target, _, fragment = ref.partition("#")
    name = target.removeprefix("../schemas/").removesuffix(".json") if target else here
    if not name:
        raise ValueError(f"cannot bundle the reference {ref!r}")
    return f"#/components/schemas/{name}{fragment}"


def _rewrite(node: Any, here: str | None) -> Any:
    if isinstance(node, dict):
        return {
            key: _local_ref(value, here)
            if key == "$ref" and isinstance(value, str)
            # $id would make a resolver fetch the schema's host; $schema is implied (3.1).
            else _rewrite(value, here)
            for key, value in node.items()
            if key not in ("$id", "$schema")
        }
    if isinstance(node, list):
        return [_rewrite(item, here) for item in node]
    return node


@cache
def _bundled() -> dict[str, Any]:
    document: dict[str, Any] = _rewrite(copy.deepcopy(genapi_spec.openapi_document()), None)
    # The webhooks section describes requests the service sends, never ones we send.
    document.pop("webhooks", None)
    components = document.setdefault("components", {})
    components["schemas"] = {
        name: _rewrite(genapi_spec.schema(name), name) for name in genapi_spec.schema_names()
    }
    return document


def bundled_document() -> dict[str, Any]:
    """The OpenAPI document, self-contained (a fresh copy: callers may change it)."""
    return copy.deepcopy(_bundled())


def load_schema(base_url: str) -> Any:
    """The Schemathesis schema of the document, aimed at *base_url*.

    The base URL is passed explicitly: the document's ``servers[0]`` is a template.
    """
    # Imported here: every worker of a run collects the contract checks, one runs them.
    import schemathesis

    schema = schemathesis.openapi.from_dict(bundled_document())
    schema.config.update(base_url=base_url)
    return schema


def documented_schema(operation_id: str, status: int) -> str | None:
    """The schema file name (e.g. ``generation-accepted``) the document gives the JSON
    body of *status* for *operation_id* (``2XX`` ranges included); ``None`` when the
    status is undocumented or has no JSON body."""
    document = genapi_spec.openapi_document()
    for item in document["paths"].values():
        for operation in item.values():
            if not isinstance(operation, dict) or operation.get("operationId") != operation_id:
                continue
            responses = operation.get("responses", {})
            response = responses.get(str(status)) or responses.get(f"{str(status)[0]}XX")
            if response is None:
                return None
            if "$ref" in response:
                response = document["components"]["responses"][response["$ref"].split("/")[-1]]
            ref = response.get("content", {}).get("application/json", {}).get("schema", {})
            target = str(ref.get("$ref", ""))
            if not target.startswith("../schemas/") or "#" in target:
                return None
            return target.removeprefix("../schemas/").removesuffix(".json")
    raise KeyError(f"no operation {operation_id!r} in the OpenAPI document")


# -- URL safety ----------------------------------------------------------------------------


def make_safe(
    value: Any, safe_urls: Sequence[str], rnd: random.Random, *, reject: bool = True
) -> Any:
    """*value* (a body) with every possible delivery target replaced by a safe one.

    A string inside a :data:`URL_FIELDS` field (at any depth, whatever its type around
    it) becomes a choice from *safe_urls* + :data:`REJECT_URLS` (only from *safe_urls*
    when *reject* is false and there are some: valid data stays valid); any other string
    holding ``://`` becomes a reject URL; bytes holding ``://`` become one reject URL.
    Other values are kept, so negative data (wrong types, missing fields) stays negative.
    """
    pool = tuple(safe_urls) if safe_urls and not reject else tuple(safe_urls) + REJECT_URLS
    return _safe(value, pool, rnd, in_url_field=False)


def _safe(value: Any, pool: tuple[str, ...], rnd: random.Random, *, in_url_field: bool) -> Any:
    if isinstance(value, str):
        if in_url_field:
            return rnd.choice(pool)
        return rnd.choice(REJECT_URLS) if "://" in value else value
    if isinstance(value, bytes | bytearray):
        return rnd.choice(REJECT_URLS).encode() if b"://" in value else value
    if isinstance(value, dict):
        return {
            key: _safe(item, pool, rnd, in_url_field=in_url_field or _names_target(key, item))
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_safe(item, pool, rnd, in_url_field=in_url_field) for item in value]
    return value


def _names_target(key: object, value: Any) -> bool:
    """Whether *value* under *key* may name a delivery target as a whole: ``callback_url``
    and ``url`` always; ``webhook`` unless it is an object (then its own ``url`` does, and
    its ``id`` and ``events`` keep their drawn values, so valid bindings stay valid)."""
    if key == "webhook":
        return not isinstance(value, dict)
    return key in URL_FIELDS


def unsafe_strings(value: Any, safe_urls: Sequence[str]) -> list[str]:
    """Every string in *value* that :func:`make_safe` must never let through: in a URL
    field, anything but a safe or reject URL; elsewhere, anything holding ``://`` that is
    not a reject URL. Empty for a safe body (the project tests assert this)."""
    allowed_in_field = frozenset(safe_urls) | frozenset(REJECT_URLS)
    found: list[str] = []

    def walk(node: Any, in_url_field: bool) -> None:
        if isinstance(node, str):
            if (in_url_field and node not in allowed_in_field) or (
                not in_url_field and "://" in node and node not in REJECT_URLS
            ):
                found.append(node)
        elif isinstance(node, bytes | bytearray):
            if b"://" in node and node.decode(errors="replace") not in REJECT_URLS:
                found.append(node.decode(errors="replace"))
        elif isinstance(node, dict):
            for key, item in node.items():
                walk(item, in_url_field or _names_target(key, item))
        elif isinstance(node, list | tuple):
            for item in node:
                walk(item, in_url_field)

    walk(value, False)
    return found


# -- drawing and sending -------------------------------------------------------------------


@dataclass(frozen=True)
class FuzzCase:
    """One drawn request, made safe: what to send, and how it was generated."""

    label: str  # "POST /v1/images/generate"
    mode: Mode
    method: str
    path: str  # the path with its parameters filled in (no query)
    params: dict[str, Any]
    headers: dict[str, str]
    body: Any  # JSON value, bytes, or _NO_BODY
    has_body: bool
    media_type: str | None
    case: Any  # the schemathesis Case (for validate_response)


_NO_BODY: Final = object()


def _generation_mode(mode: Mode) -> GenerationMode:
    """Schemathesis' name for *mode* (imported when cases are drawn, see load_schema)."""
    from schemathesis import GenerationMode

    return GenerationMode(mode)


def _fuzz_case(
    case: Any,
    mode: Mode,
    safe_urls: Sequence[str],
    rnd: random.Random,
    path_parameters: dict[str, str] | None,
    *,
    reject: bool,
) -> FuzzCase:
    """*case* made safe and ready to send (the Case itself is updated to match); with
    *reject* its targets may also be reject URLs (see :func:`make_safe`)."""
    if path_parameters:
        case.path_parameters = {**(case.path_parameters or {}), **path_parameters}
    from schemathesis.core import NOT_SET

    has_body = case.body is not NOT_SET
    body = make_safe(case.body, safe_urls, rnd, reject=reject) if has_body else _NO_BODY
    if has_body:
        case.body = body
    drawn_headers = {str(name): str(value) for name, value in (case.headers or {}).items()}
    # A drawn Content-Type (the coverage phase's malformed or unsupported one) wins.
    media_type = next(
        (v for k, v in drawn_headers.items() if k.lower() == "content-type"), case.media_type
    )
    headers = {
        name: value
        for name, value in drawn_headers.items()
        if name.lower() not in _DROPPED_HEADERS and name.lower() != "content-type"
    }
    return FuzzCase(
        label=f"{case.operation.method.upper()} {case.operation.path}",
        mode=mode,
        method=str(case.method).upper(),
        path=case.formatted_path,
        params=dict(case.query or {}),
        headers=headers,
        body=body,
        has_body=has_body,
        media_type=media_type if has_body else None,
        case=case,
    )


def _key(fuzz: FuzzCase) -> str:
    return repr((fuzz.method, fuzz.path, fuzz.params, fuzz.headers, fuzz.body, fuzz.media_type))


def draw_cases(
    schema: Any,
    method: str,
    path: str,
    *,
    mode: Mode,
    max_examples: int,
    safe_urls: Sequence[str],
    path_parameters: dict[str, str] | None = None,
) -> list[FuzzCase]:
    """At most *max_examples* cases of one operation, deterministic for a given document
    (none when the mode has nothing to draw, e.g. negative data without parameters).

    Each body goes through :func:`make_safe` with *safe_urls*; *path_parameters*, when
    given, replace the drawn ones (so a read hits a real resource of the account).
    """
    operation = schema[path][method.upper()]
    drawn: list[FuzzCase] = []
    seen: set[str] = set()

    strategy = operation.as_strategy(generation_mode=_generation_mode(mode))

    # Bounded and reproducible: derandomised, no example database, no deadline (the IUT's
    # latency is not the generator's), explicit examples of the document first.
    @settings(
        max_examples=max_examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=(Phase.explicit, Phase.generate),
        suppress_health_check=list(HealthCheck),
        report_multiple_bugs=False,
    )
    @given(case=strategy, rnd=st.randoms(use_true_random=False))
    def collect(case: Any, rnd: random.Random) -> None:
        if len(drawn) >= max_examples:
            return
        # Valid data targets the receiver (so valid submits are accepted); drawn invalid
        # data targets receiver and reject URLs alike.
        reject = mode != "positive"
        fuzz = _fuzz_case(case, mode, safe_urls, rnd, path_parameters, reject=reject)
        if _key(fuzz) not in seen:  # Hypothesis repeats small examples; send each once
            seen.add(_key(fuzz))
            drawn.append(fuzz)

    try:
        collect()
    except Unsatisfiable:
        # Nothing to draw: e.g. negative data for an operation without any parameter.
        return []
    return drawn


def coverage_cases(
    schema: Any,
    method: str,
    path: str,
    *,
    mode: Mode,
    safe_urls: Sequence[str],
    path_parameters: dict[str, str] | None = None,
    limit: int = 200,
) -> list[FuzzCase]:
    """Schemathesis' coverage phase for one operation: a deterministic, systematic set of
    cases (each field missing, each field of each wrong type, each bound crossed), at most
    *limit*, made safe like :func:`draw_cases`. Only the operation's own method is kept
    (the coverage phase can also try undeclared methods)."""
    operation = schema[path][method.upper()]
    generation = schema.config.generation_for(operation=operation)
    rnd = random.Random(0)
    cases: list[FuzzCase] = []
    seen: set[str] = set()
    for case in schema.iter_coverage_cases(
        operation, generation_modes=[_generation_mode(mode)], generation_config=generation
    ):
        if str(case.method).upper() != method.upper():
            continue
        # Each coverage case breaks one thing and keeps the rest valid: its targets are
        # the receiver, so a broken field is not hidden behind a refused target (the URL
        # rules have checks of their own).
        fuzz = _fuzz_case(case, mode, safe_urls, rnd, path_parameters, reject=False)
        if _key(fuzz) not in seen:
            seen.add(_key(fuzz))
            cases.append(fuzz)
        if len(cases) >= limit:
            break
    return cases


def send_kwargs(fuzz: FuzzCase) -> dict[str, Any]:
    """Keyword arguments of :meth:`ApiClient.request` that send *fuzz* as drawn.

    The body goes as bytes with the drawn media type as Content-Type: a JSON body is
    serialised here (``json=None`` would send no body at all, while the drawn body is the
    JSON ``null``); negative mode also draws other media types and raw bytes.
    """
    kwargs: dict[str, Any] = {"headers": dict(fuzz.headers)}
    if fuzz.params:
        kwargs["params"] = {str(k): _query_value(v) for k, v in fuzz.params.items()}
    if fuzz.has_body:
        media_type = fuzz.media_type or "application/json"
        body = fuzz.body
        if isinstance(body, bytes | bytearray):
            kwargs["content"] = bytes(body)
        elif "json" in media_type:
            kwargs["content"] = json.dumps(body).encode()
        else:
            kwargs["content"] = str(body).encode()
        kwargs["headers"]["Content-Type"] = media_type
    return kwargs


def _query_value(value: Any) -> str | list[str]:
    """A query value as text (a list of scalars repeats the name; anything nested is sent
    as its JSON text, which is what a careless client would send)."""
    if isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
        return [_scalar(item) for item in value]
    if isinstance(value, dict | list):
        return json.dumps(value)
    return _scalar(value)


def _scalar(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
