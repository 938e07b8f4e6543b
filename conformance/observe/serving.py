"""What the observers' local servers share: started by ``start()``, stopped by ``stop()``,
and, as a context manager, started on entry and stopped on the way out (the receiver, the
canary, the DNS server)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Self

__all__ = ["Serving"]


class Serving(ABC):
    """A local server: ``with Server(...) as server`` is ``start()`` then ``stop()``."""

    @abstractmethod
    def start(self) -> Self:
        """Start serving; the server itself."""

    @abstractmethod
    def stop(self) -> None:
        """Stop serving."""

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
