"""Ids as URL path segments, shared by the memory clients."""

from __future__ import annotations

from urllib.parse import quote


def path_segment(value: str) -> str:
    """An id as one path segment (``:`` and spaces are fine; ``/`` cannot be routed).

    Raises:
        ValueError: ``value`` is empty, not a string, or contains ``/``.
    """
    if not isinstance(value, str) or not value or "/" in value:
        raise ValueError(f"ids must be non-empty strings without '/', got {value!r}")
    return quote(value, safe="")


__all__ = ["path_segment"]
