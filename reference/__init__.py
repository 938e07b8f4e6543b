"""The reference implementation of the Generation API (the suite's embedded default target)."""

from __future__ import annotations
