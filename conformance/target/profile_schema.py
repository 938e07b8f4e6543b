"""The target profile's JSON Schema, and what a document breaks of it, said with a fix.

A profile is validated against ``profile.schema.json`` before anything reads it; each
problem names the field and the fix (the schema's ``x-fix`` hints), never a secret's value.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any, Final

import jsonschema

import genapi_spec

__all__ = ["profile_schema", "schema_problems"]

#: Fields that hold secrets: their values are never shown in a problem.
_SECRET_FIELDS: Final = ("key", "signing_secret", "token", "password")


@cache
def profile_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of the profile, with ``x-fix`` hints per field."""
    text = (resources.files(__package__) / "profile.schema.json").read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _fix_of(schema: Mapping[str, Any]) -> str:
    fix = schema.get("x-fix")
    return str(fix) if fix else "see the template (genapi-conformance init-profile)"


def _resolve(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        resolved: Mapping[str, Any] = profile_schema()["$defs"][ref.removeprefix("#/$defs/")]
        return resolved
    return schema


def schema_problems(document: Mapping[str, Any]) -> list[str]:
    validator = jsonschema.Draft202012Validator(profile_schema())
    problems: list[str] = []
    for error in genapi_spec.schema_errors(validator, document):
        where = genapi_spec.error_where(error.absolute_path)
        schema = _resolve(error.schema) if isinstance(error.schema, Mapping) else {}
        if error.validator == "required":
            missing = error.message.split("'")[1]
            sub = _resolve(schema.get("properties", {}).get(missing, {}))
            prefix = "" if where == "(top level)" else f"{where}."
            problems.append(f"{prefix}{missing}: missing; {_fix_of(sub)}")
        elif error.validator == "additionalProperties" and schema.get("properties"):
            known = sorted(schema["properties"])
            instance = error.instance if isinstance(error.instance, Mapping) else {}
            for extra in sorted(set(instance) - set(known)):
                prefix = "" if where == "(top level)" else f"{where}."
                close = difflib.get_close_matches(extra, known, n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known)}"
                problems.append(f"{prefix}{extra}: unknown field; {hint}")
        elif error.validator == "propertyNames":
            problems.append(
                f"{where}: name {error.instance!r} is not allowed; "
                "use lower-case letters, digits and '-' (e.g. without-images-generate)"
            )
        elif error.validator == "type":
            problems.append(
                f"{where}: expected {error.validator_value}, got {type(error.instance).__name__}; "
                f"{_fix_of(schema)}"
            )
        else:
            shown = "a secret" if _is_secret_path(error.absolute_path) else repr(error.instance)
            problems.append(f"{where}: {shown} is not valid ({error.validator}); {_fix_of(schema)}")
    return problems


def _is_secret_path(path: Any) -> bool:
    parts = list(path)
    # Under [adapter] these names hold JSON pointers to secrets, not secrets.
    return bool(parts) and str(parts[-1]) in _SECRET_FIELDS and parts[0] != "adapter"
