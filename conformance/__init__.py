"""The Generation API conformance suite.

PYTEST_DONT_REWRITE: ``genapi-conformance run`` imports this package before it starts
pytest, whose entry-point plugin marks the whole installed distribution for assertion
rewriting; this marker tells pytest the package itself need not be rewritten, instead of
warning (an error under the run's ``filterwarnings = error``). Its submodules imported
later, and the checks, are still rewritten.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
