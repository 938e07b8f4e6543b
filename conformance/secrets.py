"""Secrets that cannot be printed, and the one redactor that masks them everywhere.

A conformance run handles API keys, console session tokens and webhook signing secrets
(spec §5). None of them may reach a report, a log line or an attachment: a report is
handed on, a CI log is public. Two walls keep them out:

* :class:`Secret` wraps a value so that ``str()``, ``repr()`` and f-strings show
  ``***``; only :meth:`Secret.reveal` gives the value, so every use is greppable.
* :class:`Redactor` knows every secret of a profile (and those learned during the run,
  e.g. a key created through the adapter) and masks them in text, bytes, headers and
  JSON, including the forms in which they travel: the ``Bearer <key>`` header value,
  URL-encoding, and base64 at any byte alignment (e.g. inside HTTP Basic credentials).
  Masks name the secret (``[redacted:keys.primary.key]``) so that a reproduction line can
  substitute an environment variable for it.
"""

from __future__ import annotations

import base64
import hmac
import logging
import re
import threading
import weakref
from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import quote, quote_plus

__all__ = [
    "MASK_PATTERN",
    "SENSITIVE_FIELDS",
    "Redactor",
    "Secret",
    "mask_for",
    "redact_logs",
]

#: What ``str()`` of a :class:`Secret` gives.
_HIDDEN: Final = "***"

#: JSON member names whose string values are secrets wherever they appear: the key
#: shown once at creation (spec §2), the whsec_ secret (spec §2, registered webhook),
#: per-key signing secrets (spec §5.6) and console tokens (spec §5.5).
SENSITIVE_FIELDS: Final = frozenset(
    {
        "key",
        "secret",
        "signing_secret",
        "token",
        "access_token",
        "refresh_token",
        "password",
        "api_key",
    }
)

#: Matches a mask written by :class:`Redactor`; group 1 is the secret's label.
MASK_PATTERN: Final = re.compile(r"\[redacted:([A-Za-z0-9_.:\-]+)\]")

# Shapes of secrets that are masked even when the redactor was never told about them:
# webhook secrets, JSON Web Tokens. (API keys are added per profile, see key_prefix.)
_WHSEC = re.compile(r"whsec_[A-Za-z0-9+/=_\-]{8,}")
_JWT = re.compile(r"eyJ[A-Za-z0-9_\-]{4,}\.eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{8,}")

# Secrets shorter than this are not searched in base64 forms: the core of a short
# value's encoding is so short that it would mask unrelated text.
_MIN_B64_CORE: Final = 8
# Values under sensitive JSON members shorter than this are not learned as secrets.
_MIN_LEARNED: Final = 8


def mask_for(label: str) -> str:
    """The text that replaces the secret called *label* (e.g. ``keys.primary.key``)."""
    return f"[redacted:{label}]"


class Secret:
    """A secret value that never shows itself: ``str()`` and ``repr()`` give ``***``.

    Equality compares the values in constant time, so a ``Secret`` may be compared with
    another ``Secret`` (not with a plain string: that would invite printing one).
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError(f"Secret wraps a str, not {type(value).__name__}")
        self._value = value

    def reveal(self) -> str:
        """The value. Call it only where the value is sent, never where it is shown."""
        return self._value

    def __str__(self) -> str:
        return _HIDDEN

    def __repr__(self) -> str:
        return f"Secret({_HIDDEN!r})"

    def __format__(self, format_spec: str) -> str:
        return format(_HIDDEN, format_spec)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __len__(self) -> int:
        return len(self._value)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __reduce__(self) -> Any:
        # Pickling would carry the value into worker processes' logs and caches.
        raise TypeError("a Secret cannot be pickled")


def _base64_cores(value: bytes) -> set[bytes]:
    """Substrings that appear in any base64 text encoding *value* at any alignment.

    Base64 groups input in 3-byte blocks, so a secret embedded after k bytes of other
    data (k mod 3 = 0, 1, 2) encodes differently; for each k the characters that depend
    only on the secret's bytes are a fixed substring.
    """
    cores: set[bytes] = set()
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + value)
        start = (shift * 8 + 5) // 6  # first character not touched by the padding bytes
        end = ((shift + len(value)) * 8) // 6  # last character made of the value only
        core = encoded[start:end]
        if len(core) >= _MIN_B64_CORE:
            cores.add(core)
            cores.add(core.replace(b"+", b"-").replace(b"/", b"_"))  # URL-safe alphabet
    return cores


class Redactor:
    """Masks every known secret in text, bytes, headers and JSON.

    Thread-safe: secrets may be learned (:meth:`add`) while receiver threads or
    concurrent checks redact.
    """

    def __init__(
        self, secrets: Mapping[str, Secret | str] | None = None, *, key_prefix: str | None = None
    ) -> None:
        self._lock = threading.Lock()
        self._forms: dict[bytes, str] = {}  # encoded form -> label
        self._pattern: re.Pattern[bytes] | None = None
        self._labels: dict[str, str] = {}  # value -> label
        self._key_shape = (
            re.compile(re.escape(key_prefix) + r"_[A-Za-z0-9_\-]{8,}") if key_prefix else None
        )
        for label, secret in (secrets or {}).items():
            self.add(secret, label=label)

    def add(self, secret: Secret | str, *, label: str = "learned") -> None:
        """Learn a secret (e.g. a key created during the run) so it is masked from now on."""
        value = secret.reveal() if isinstance(secret, Secret) else secret
        if not value:
            return
        raw = value.encode("utf-8")
        forms = {raw, quote(value, safe="").encode(), quote_plus(value).encode()}
        forms |= _base64_cores(raw)
        with self._lock:
            if value in self._labels:
                return
            self._labels[value] = label
            for form in forms:
                self._forms.setdefault(form, label)
            # Compiled when next used: a profile's secrets are learned one by one at start,
            # and a pattern compiled per secret made that quadratic (a third of a second
            # of every worker's start).
            self._pattern = None

    def knows(self, value: str) -> bool:
        """Whether *value* is a secret this redactor masks."""
        with self._lock:
            return value in self._labels

    def __len__(self) -> int:
        with self._lock:
            return len(self._labels)

    def __repr__(self) -> str:
        return f"Redactor({len(self)} secrets)"

    # -- the forms -------------------------------------------------------------------

    def bytes(self, data: bytes) -> bytes:
        """*data* with every known secret (and every secret-shaped token) masked."""
        with self._lock:
            if self._pattern is None and self._forms:
                # Longest first, so a secret that contains another is masked whole.
                alternatives = sorted(self._forms, key=len, reverse=True)
                self._pattern = re.compile(b"|".join(re.escape(form) for form in alternatives))
            pattern, forms = self._pattern, self._forms
        if pattern is not None:
            data = pattern.sub(lambda m: mask_for(forms[m.group(0)]).encode(), data)
        text = data.decode("utf-8", errors="surrogateescape")
        text = self._shapes(text)
        return text.encode("utf-8", errors="surrogateescape")

    def text(self, text: str) -> str:
        """*text* with every known secret (and every secret-shaped token) masked."""
        return self.bytes(text.encode("utf-8", errors="surrogateescape")).decode(
            "utf-8", errors="surrogateescape"
        )

    def headers(self, headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """Header pairs with secrets masked in every value (names kept)."""
        return [(name, self.text(value)) for name, value in headers]

    def json(self, value: Any) -> Any:
        """A JSON value with secrets masked in every string and under sensitive members."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.json(item) for item in value]
        if isinstance(value, dict):
            result: dict[str, Any] = {}
            for name, item in value.items():
                if isinstance(name, str) and name.lower() in SENSITIVE_FIELDS:
                    if isinstance(item, str) and item:
                        # A secret the run did not know yet (a key shown once): learn it,
                        # so that its later uses are masked too. Values too short to be a
                        # secret are masked here but not learned (they would mask noise).
                        if len(item) >= _MIN_LEARNED:
                            self.add(item, label=f"learned.{name.lower()}")
                        result[name] = mask_for(f"learned.{name.lower()}")
                        continue
                result[self.text(name) if isinstance(name, str) else name] = self.json(item)
            return result
        return value

    def learn_from_json(self, value: Any) -> None:
        """Learn the secrets under sensitive members of a JSON value (no output)."""
        self.json(value)

    def _shapes(self, text: str) -> str:
        text = _WHSEC.sub(lambda _m: mask_for("whsec"), text)
        text = _JWT.sub(lambda _m: mask_for("jwt"), text)
        if self._key_shape is not None:
            text = self._key_shape.sub(lambda _m: mask_for("api-key"), text)
        return text


#: Loggers that may print a secret: HTTP libraries log request URLs (a key in a query
#: string) and the suite's own modules log what they do.
LOGGERS_WITH_SECRETS: Final = (
    "httpx",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "werkzeug",
    "conformance",
)


class _RedactingFilter(logging.Filter):
    """Masks, in every record of the loggers it sits on, the secrets of live redactors."""

    def __init__(self) -> None:
        super().__init__()
        self._redactors: weakref.WeakSet[Redactor] = weakref.WeakSet()

    def add(self, redactor: Redactor) -> None:
        self._redactors.add(redactor)

    def filter(self, record: logging.LogRecord) -> bool:
        redactors = list(self._redactors)
        if not redactors:
            return True
        message = record.getMessage()
        masked = message
        for redactor in redactors:
            masked = redactor.text(masked)
        if masked != message:
            record.msg, record.args = masked, None
        return True


_LOG_FILTER: Final = _RedactingFilter()


def redact_logs(redactor: Redactor) -> None:
    """Mask *redactor*'s secrets in the log records of :data:`LOGGERS_WITH_SECRETS`.

    The filter holds redactors weakly: a redactor that is gone stops costing anything.
    """
    _LOG_FILTER.add(redactor)
    for name in LOGGERS_WITH_SECRETS:
        logger = logging.getLogger(name)
        if _LOG_FILTER not in logger.filters:
            logger.addFilter(_LOG_FILTER)
