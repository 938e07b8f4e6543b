"""How a reader repeats what a run did: the rerun command and the curl lines.

One :class:`Reproduction` per run, built where the run starts (it knows the target as the
user named it and the selection), read by every report and the terminal summary, so a
rerun line and a curl line are written the same way everywhere:

* the rerun line names the target as given (``--profile FILE``; for the embedded reference
  its ``--fault``/``--variant``; never the temporary profile the embedded reference
  wrote) and the selection (``-k``), so that copied as is it reruns against the same
  target, not the embedded reference;
* a curl line names each masked secret by the environment variable the profile reads it
  from (its ``key_env``, ``token_env``, …), else a ``GENAPI_*`` name derived from the
  secret's label; :meth:`Reproduction.legend` says which variable holds what.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from conformance.evidence import Exchange, default_env_var

__all__ = ["LEARNED_LEGEND", "Reproduction"]

#: What a variable for a secret the run learned (a key a check created) stands for.
LEARNED_LEGEND = "a secret the implementation issued during the run (not in the profile)"


@dataclass(frozen=True)
class Reproduction:
    """The target and selection of a run, and the variables that hold its secrets.

    *target*: the arguments that name the target (``("--profile", "t.toml")``, or
    ``("--fault", "NAME")``; empty for the plain embedded reference). *selection*: the
    arguments that narrowed the run besides ``--only``/``--area`` (``("-k", "EXPR")``).
    *secret_env*: secret label → the variable the profile reads it from. *secret_labels*:
    every secret of the profile, for the legend.
    """

    target: tuple[str, ...] = ()
    selection: tuple[str, ...] = ()
    secret_env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    secret_labels: tuple[str, ...] = ()

    def env_var(self, label: str) -> str:
        """The variable a curl line expands for the secret labelled *label*."""
        return self.secret_env.get(label) or default_env_var(label)

    def curl(self, exchange: Exchange) -> str:
        """A bash line that repeats *exchange*, secrets as the profile's variables."""
        return exchange.as_curl(self.env_var)

    def rerun(self, only: tuple[str, ...] = (), areas: tuple[str, ...] = ()) -> str:
        """``genapi-conformance run`` with the target, the selection and *only*/*areas*."""
        words = ["genapi-conformance", "run", *self.target]
        for requirement_id in only:
            words += ["--only", requirement_id]
        for area in areas:
            words += ["--area", area]
        words += self.selection
        return shlex.join(words)

    def legend(self) -> list[tuple[str, str]]:
        """(variable, what it holds) for every secret of the profile, then learned ones."""
        rows = [(self.env_var(label), label) for label in self.secret_labels]
        rows.append((default_env_var("learned") + "_*", LEARNED_LEGEND))
        return rows
