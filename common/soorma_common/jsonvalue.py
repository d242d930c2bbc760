"""JSON values the stores cannot keep exactly, found before they reach them.

- NUL (``\\x00``): PostgreSQL text cannot hold it; the driver fails mid-query.
- Integers beyond 64 bits: no SQL integer or our JSON encoder (orjson) takes them.
- ``NaN`` / ``Infinity``: not JSON. Python's parser accepts them, Postgres ``json``
  rejects them and orjson silently writes ``null`` — data loss either way.
- Very deep nesting: recursive consumers (jsonschema, encoders) hit Python's recursion
  limit long before any useful document needs that depth. Every service holds stored
  JSON values to the same :data:`MAX_JSON_DEPTH`.

The services answer a problem with a 422 (``servicekit.jsoncheck``); the request bodies
typed in ``soorma_common.knowledge`` refuse it while validating.
"""

from __future__ import annotations

import math
from typing import Any

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
NUL = "\x00"
# One nesting limit for every JSON value a service stores or forwards (event ``data``,
# working-memory values, plan state, ...): what the event service always carried. Its
# body parser stops at 200 levels for the whole request, so 192 leaves room for the
# envelope around ``data``; the encoders (orjson, pydantic) stop near 255 levels with
# errors that are not the caller's to decode.
MAX_JSON_DEPTH = 192
NUL_MESSAGE = "must not contain NUL (\\u0000) characters"


def json_problem(
    value: Any,
    *,
    max_depth: int | None = MAX_JSON_DEPTH,
    allow_nul: bool = True,
    allow_big_ints: bool = False,
) -> tuple[str, str] | None:
    """The first part of ``value`` that cannot be stored exactly, as ``(path, problem)``.

    Walks iteratively (no recursion, whatever the depth); ``max_depth`` defaults to
    the platform's :data:`MAX_JSON_DEPTH` (``None``: no limit). ``path`` is dotted
    (``"state.items.3"``); ``None`` when everything is storable. ``allow_big_ints``
    is for values kept as JSON text by an encoder that writes any integer exactly.
    """
    stack: list[tuple[Any, tuple[str, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if (
            max_depth is not None
            and len(path) >= max_depth
            and isinstance(item, dict | list | tuple)
        ):
            # This array/object opens level len(path) + 1.
            return _dotted(path), f"nests deeper than {max_depth} levels"
        if isinstance(item, str):
            if not allow_nul and NUL in item:
                return _dotted(path), NUL_MESSAGE
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not allow_big_ints and not INT64_MIN <= item <= INT64_MAX:
                return _dotted(path), "integer exceeds 64-bit range: send it as a string"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return _dotted(path), f"{item} is not a JSON number (NaN/Infinity)"
        elif isinstance(item, dict):
            for key, child in item.items():
                if not allow_nul and isinstance(key, str) and NUL in key:
                    return _dotted((*path, str(key))), f"key {NUL_MESSAGE}"
                stack.append((child, (*path, str(key))))
        elif isinstance(item, list | tuple):
            stack.extend((child, (*path, str(i))) for i, child in enumerate(item))
    return None


def _dotted(path: tuple[str, ...]) -> str:
    return ".".join(path)


__all__ = ["INT64_MAX", "INT64_MIN", "MAX_JSON_DEPTH", "NUL", "NUL_MESSAGE", "json_problem"]
