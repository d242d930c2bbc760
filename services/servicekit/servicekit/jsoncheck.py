"""Input the stores cannot keep exactly, refused with a 422 naming the field (not a 500).

What cannot be kept, and why, is :mod:`soorma_common.jsonvalue`'s to say; this module
turns it into the services' errors.
"""

from __future__ import annotations

from typing import Any

from pydantic import AfterValidator

from soorma_common.errors import ValidationFailed
from soorma_common.jsonvalue import MAX_JSON_DEPTH, NUL, NUL_MESSAGE, json_problem


def reject_nul(value: Any) -> Any:
    """Pydantic after-validator: a ``str`` containing NUL is a validation error."""
    if isinstance(value, str) and NUL in value:
        raise ValueError(NUL_MESSAGE)
    return value


# ``Annotated[str, Path(), NulFree]`` / ``Annotated[str | None, Query(), NulFree]``:
# a 422 naming the parameter instead of a database error.
NulFree = AfterValidator(reject_nul)


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
