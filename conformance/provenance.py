"""What a run was judged with: digests of the installed suite and of its catalog.

A result names the suite version, but a version string does not say which code ran (an
editable install, a patched wheel). ``results.json`` therefore carries the digest of the
installed distribution's files and of the requirements catalog, so that an attestation
can bind the verdicts to the exact code and catalog that produced them.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Iterator
from functools import cache
from importlib import resources
from pathlib import Path

import genapi_spec

__all__ = ["CATALOG_RESOURCE", "catalog_sha256", "distribution_sha256", "tree_sha256"]

#: The catalog file inside the ``conformance`` package.
CATALOG_RESOURCE = "requirements.yaml"

#: The packages of the distribution (the wheel's ``packages``).
_PACKAGES = ("genapi_spec", "conformance", "reference")
#: The spec artifacts; in a wheel they sit inside ``genapi_spec/data``, in a source
#: checkout at the top of the repository.
_SPEC_DATA = ("openapi", "schemas", "fixtures", "spec")
#: Caches that are not part of what was installed: bytecode, and the hidden folders that
#: running the checks writes next to them (pytest's and Hypothesis's caches), which change
#: from one run to the next.
_SKIPPED_PARTS = frozenset({"__pycache__"})
_SKIPPED_SUFFIXES = frozenset({".pyc", ".pyo"})
#: Bound on the files walked: the distribution holds a few hundred.
MAX_FILES = 20_000


def catalog_sha256() -> str:
    """The sha256 of the requirements catalog as shipped (its bytes, not its parse)."""
    data = resources.files("conformance").joinpath(CATALOG_RESOURCE).read_bytes()
    return hashlib.sha256(data).hexdigest()


@cache
def distribution_sha256() -> str:
    """The digest of the installed distribution's files (read once per process).

    Every file of the suite's packages and spec artifacts, caches left out, sorted by
    path: the sha256 over ``<path> NUL <sha256 of content> LF`` lines (see
    :func:`tree_sha256`), so one changed byte anywhere changes it.
    """
    roots = {name: _package_dir(name) for name in _PACKAGES}
    data_root = Path(str(genapi_spec.data_root()))
    if not data_root.is_relative_to(roots["genapi_spec"]):
        roots.update({name: data_root / name for name in _SPEC_DATA})
    return tree_sha256(roots)


def tree_sha256(roots: dict[str, Path]) -> str:
    """The digest of the files under each root, named ``<key>/<relative path>``."""
    digest = hashlib.sha256()
    for name, path in sorted(_files(roots)):
        digest.update(f"{name}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    return digest.hexdigest()


def _files(roots: dict[str, Path]) -> Iterator[tuple[str, Path]]:
    count = 0
    for key, root in roots.items():
        for path in root.rglob("*"):
            relative = path.relative_to(root)
            if (
                not path.is_file()
                or _SKIPPED_PARTS.intersection(relative.parts)
                or any(part.startswith(".") for part in relative.parts)
                or path.suffix in _SKIPPED_SUFFIXES
            ):
                continue
            count += 1
            if count > MAX_FILES:
                raise RuntimeError(f"more than {MAX_FILES} files under {sorted(roots)}")
            yield f"{key}/{relative.as_posix()}", path


def _package_dir(name: str) -> Path:
    # Found, not imported: the suite never imports the reference implementation.
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"package {name} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))
