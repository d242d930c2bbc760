"""A bounded set of recently completed event ids (duplicate-delivery guard)."""

from __future__ import annotations

from cachetools import FIFOCache


class RecentIds(FIFOCache[str, None]):
    """Remembers the last ``capacity`` ids added; the oldest are forgotten first.

    Adding an id again makes it the newest; looking one up (``in``) changes nothing.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        super().__init__(maxsize=capacity)

    @property
    def capacity(self) -> int:
        return int(self.maxsize)

    def add(self, event_id: str) -> None:
        self[event_id] = None
