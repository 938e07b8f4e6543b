"""The evidence of a check: the exchanges it recorded, each with every secret masked.

:class:`Exchange` is what the client records (:class:`conformance.target.client.Recorder`, the
one place that redacts on the way in), what a verdict keeps as its evidence and what the
reports show. It lives apart from the client so that verdicts and reports depend on the
evidence alone, never on the code that talks to the implementation.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final

from conformance.secrets import MASK_PATTERN

__all__ = ["Exchange", "default_env_var"]


@dataclass(frozen=True)
class Exchange:
    """One request and its response, as sent and received, with every secret masked.

    Headers are name/value pairs in wire order (repeated names kept). Bodies are text
    (UTF-8, undecodable bytes replaced) cut at 64 KiB. ``status`` is ``None`` when no
    response came (then ``error`` says why).
    """

    method: str
    url: str
    request_headers: tuple[tuple[str, str], ...]
    request_body: str
    status: int | None
    response_headers: tuple[tuple[str, str], ...]
    response_body: str
    elapsed_ms: float
    error: str | None = None
    started_at: float = 0.0  # wall-clock time.time() when the request was sent

    @property
    def answered_at(self) -> float:
        """Wall-clock time when the answer (or the error) came: the latest moment the
        target can have stamped the request, whenever between its first byte and its
        answer it does."""
        return self.started_at + self.elapsed_ms / 1000

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the JSON and HTML reports."""
        data = asdict(self)
        data["request_headers"] = [list(pair) for pair in self.request_headers]
        data["response_headers"] = [list(pair) for pair in self.response_headers]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Exchange:
        """The inverse of :meth:`to_dict` (exchanges travel from xdist workers as data)."""
        return cls(
            method=str(data["method"]),
            url=str(data["url"]),
            request_headers=tuple((str(k), str(v)) for k, v in data["request_headers"]),
            request_body=str(data["request_body"]),
            status=None if data["status"] is None else int(data["status"]),
            response_headers=tuple((str(k), str(v)) for k, v in data["response_headers"]),
            response_body=str(data["response_body"]),
            elapsed_ms=float(data["elapsed_ms"]),
            error=None if data.get("error") is None else str(data["error"]),
            started_at=float(data.get("started_at", 0.0)),
        )

    def as_curl(self, env_var_for_secret: Callable[[str], str] | None = None) -> str:
        """A bash line that repeats the request; masked secrets become ``"${VAR}"``.

        *env_var_for_secret* maps a secret's label (``keys.primary.key``) to the name of
        the environment variable that holds it; by default :func:`default_env_var`
        (``GENAPI_KEY_PRIMARY``). Characters nobody can type (control bytes) are written
        as ``$'\\xHH'`` escapes; a body holding a NUL byte, which no shell argument can
        carry, is piped in through ``printf '%b'``.
        """
        to_var = env_var_for_secret or default_env_var
        words = ["curl", "-sS", "-i", "-X", _quote(self.method), _shell_word(self.url, to_var)]
        for name, value in self.request_headers:
            if name.lower() in _CURL_OWN_HEADERS:
                continue
            words += ["-H", _shell_word(f"{name}: {value}", to_var)]
        if "\x00" in self.request_body:
            body = _shell_word(self.request_body, to_var, for_printf=True)
            return f"printf '%b' {body} | " + " ".join([*words, "--data-binary", "@-"])
        if self.request_body:
            words += ["--data-binary", _shell_word(self.request_body, to_var)]
        return " ".join(words)


# Headers curl computes itself; repeating them would only add noise or conflicts.
_CURL_OWN_HEADERS: Final = frozenset({"host", "content-length", "connection", "accept-encoding"})


def default_env_var(label: str) -> str:
    """``keys.primary.key`` → ``GENAPI_KEY_PRIMARY``; ``sessions.second.token`` →
    ``GENAPI_SESSION_SECOND``; anything else → ``GENAPI_SECRET_<LABEL>``."""

    def norm(text: str) -> str:
        return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").upper()

    parts = label.split(".")
    if len(parts) == 3 and parts[0] == "keys" and parts[2] == "key":
        return f"GENAPI_KEY_{norm(parts[1])}"
    if len(parts) == 3 and parts[0] == "keys" and parts[2] == "signing_secret":
        return f"GENAPI_SIGNING_SECRET_{norm(parts[1])}"
    if len(parts) == 3 and parts[0] == "sessions" and parts[2] == "token":
        return f"GENAPI_SESSION_{norm(parts[1])}"
    return f"GENAPI_SECRET_{norm(label)}"


def _shell_word(text: str, to_var: Callable[[str], str], *, for_printf: bool = False) -> str:
    """Quote *text* for bash, with each mask replaced by a variable expansion.

    *for_printf*: the word is an argument of ``printf '%b'``, which reads backslash escapes
    (so backslashes are doubled and NUL is written ``\\0000``).
    """

    def literal(piece: str) -> str:
        if for_printf:
            piece = piece.replace("\\", "\\\\").replace("\x00", "\\0000")
        return _quote(piece)

    pieces: list[str] = []
    position = 0
    for match in MASK_PATTERN.finditer(text):
        if match.start() > position:
            pieces.append(literal(text[position : match.start()]))
        pieces.append(f'"${{{to_var(match.group(1))}}}"')
        position = match.end()
    if position < len(text) or not pieces:
        pieces.append(literal(text[position:]))
    return "".join(pieces)


def _typeable(char: str) -> bool:
    return char == "\n" or char.isprintable()


def _quote(text: str) -> str:
    """``shlex.quote``, or bash's ``$'…'`` with escapes when *text* holds a character
    that cannot be typed or pasted as itself (a control byte, a tab)."""
    if all(_typeable(c) for c in text):
        return shlex.quote(text)
    return "$'" + "".join(_ansi_c(c) for c in text) + "'"


def _ansi_c(char: str) -> str:
    if char in "\\'":
        return "\\" + char
    if char.isprintable():
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
