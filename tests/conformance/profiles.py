"""Profile texts for the suite's own tests.

Each test module passes canary secrets of its own, so a secret found where it must not be
names the module it came from.
"""

from __future__ import annotations

__all__ = ["LOCAL", "profile_text"]

#: A loopback address nothing listens on (the discard port): tests that fake the transport
#: never reach it.
LOCAL = "http://127.0.0.1:9"


def profile_text(
    key: str,
    token: str,
    *,
    base_url: str = LOCAL,
    top: str = "",
    key_fields: str = "",
    tables: str = "",
) -> str:
    """A profile with one key and one console session, both named ``primary``; the key may
    generate images.

    *top* adds top-level fields, *key_fields* fields of the key (each line ending in a
    newline), *tables* tables after the session's.
    """
    head = f'base_url = "{base_url}"\nkey_prefix = "gk"\n{top}'
    primary = f'[keys.primary]\nkey = "{key}"\nscopes = ["images:generate"]\n{key_fields}'
    return f'{head}{primary}[sessions.primary]\ntoken = "{token}"\n{tables}'
