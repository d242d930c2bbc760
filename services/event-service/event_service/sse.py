"""Server-sent-event frames and the event-type filter applied before writing them."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from fnmatch import translate

HEARTBEAT_DATA = b"{}"


def frame(event: bytes, data: bytes, event_id: str | None = None) -> bytes:
    """One SSE frame. ``data`` is compact JSON, so it never spans lines."""
    if event_id is None:
        return b"event: " + event + b"\ndata: " + data + b"\n\n"
    return b"event: " + event + b"\nid: " + event_id.encode() + b"\ndata: " + data + b"\n\n"


class TypeFilter:
    """Glob patterns (``fnmatch``) over event types; no patterns or ``*`` match all.

    The globs are compiled into one regular expression when the stream opens, never
    while events flow (a stream's filter runs for every event it reads).
    """

    __slots__ = ("_cache", "_match")

    def __init__(self, patterns: Sequence[str]) -> None:
        cleaned = [p for p in (p.strip() for p in patterns) if p]
        self._match = (
            None
            if not cleaned or "*" in cleaned
            else re.compile("|".join(translate(p) for p in dict.fromkeys(cleaned))).match
        )
        self._cache: dict[str, bool] = {}

    @property
    def matches_all(self) -> bool:
        return self._match is None

    def __call__(self, event_type: str) -> bool:
        if self._match is None:
            return True
        hit = self._cache.get(event_type)
        if hit is None:
            hit = self._match(event_type) is not None
            if len(self._cache) < 4096:  # event types are few; never let this grow unbounded
                self._cache[event_type] = hit
        return hit


# Compiled filters by their patterns: replicas and reconnects open streams with the same
# filter again and again; compiling is the expensive part (up to ~1 s for 64 long globs).
_FILTERS: dict[tuple[str, ...], TypeFilter] = {}
MAX_CACHED_FILTERS = 256


async def type_filter(patterns: Sequence[str]) -> TypeFilter:
    """The compiled filter for ``patterns``, compiled off the event loop on first use."""
    key = tuple(patterns)
    found = _FILTERS.get(key)
    if found is None:
        found = await asyncio.to_thread(TypeFilter, key)
        if len(_FILTERS) >= MAX_CACHED_FILTERS:
            _FILTERS.pop(next(iter(_FILTERS)))  # oldest first
        _FILTERS[key] = found
    return found
