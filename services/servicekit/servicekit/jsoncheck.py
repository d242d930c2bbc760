"""Input the stores cannot keep exactly, found before it reaches them (422, not 500).

- NUL (``\\x00``): PostgreSQL text cannot hold it; the driver fails mid-query.
- Integers beyond 64 bits: no SQL integer or our JSON encoder (orjson) takes them.
- ``NaN`` / ``Infinity``: not JSON. Python's parser accepts them, Postgres ``json``
  rejects them and orjson silently writes ``null`` — data loss either way.
- Very deep nesting: recursive consumers (jsonschema, encoders) hit Python's recursion
  limit long before any useful document needs that depth. Every service holds stored
  JSON values to the same :data:`MAX_JSON_DEPTH`.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import AfterValidator

from soorma_common.errors import ValidationFailed

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
NUL = "\x00"
# One nesting limit for every JSON value a service stores or forwards (event ``data``,
# working-memory values, plan state, ...): what the event service always carried. Its
# body parser stops at 200 levels for the whole request, so 192 leaves room for the
# envelope around ``data``; the encoders (orjson, pydantic) stop near 255 levels with
# errors that are not the caller's to decode.
MAX_JSON_DEPTH = 192
NUL_MESSAGE = "must not contain NUL (\\u0000) characters"


def reject_nul(value: Any) -> Any:
    """Pydantic after-validator: a ``str`` containing NUL is a validation error."""
    if isinstance(value, str) and NUL in value:
        raise ValueError(NUL_MESSAGE)
    return value


# ``Annotated[str, Path(), NulFree]`` / ``Annotated[str | None, Query(), NulFree]``:
# a 422 naming the parameter instead of a database error.
NulFree = AfterValidator(reject_nul)


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


def check_json(
    value: Any,
    *,
    field: str,
    max_depth: int | None = MAX_JSON_DEPTH,
    allow_nul: bool = True,
    allow_big_ints: bool = False,
) -> None:
    """Raise a 422 naming the field when ``value`` holds something unstorable.

    Raises:
        ValidationFailed: details ``[{"field", "message"}]`` with the full dotted path.
    """
    problem = json_problem(
        value, max_depth=max_depth, allow_nul=allow_nul, allow_big_ints=allow_big_ints
    )
    if problem is None:
        return
    where, what = problem
    name = ".".join(p for p in (field, where) if p)
    raise ValidationFailed(
        f"invalid request: {name}: {what}",
        details=[{"field": name, "message": what}],
    )


def may_nest_deeper(payload: bytes, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """False when JSON text ``payload`` cannot nest beyond ``max_depth`` levels.

    Each level opens with ``[`` or ``{``: with no more of them than the limit, no walk
    is needed. Two byte counts cost far less than walking the parsed value.
    """
    return payload.count(b"[") + payload.count(b"{") > max_depth


def _dotted(path: tuple[str, ...]) -> str:
    return ".".join(path)
