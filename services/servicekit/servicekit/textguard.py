"""Text no store can hold answers 422 on every route, never 500.

PostgreSQL text cannot hold NUL (``\\x00``): asyncpg refuses it mid-query. Two walls,
shared by every service:

- :func:`refuse_unstorable_text`, an app-wide FastAPI dependency (installed by
  ``create_service_app``): a NUL in any path parameter or query parameter (name or
  value) is a 422 naming the parameter, before the route runs. Bodies are validated by
  each service's models (``servicekit.jsoncheck``).
- :func:`unstorable_text_error`: whatever still reaches the database with text it
  refuses (SQLSTATE 22021 ``character_not_in_repertoire``, 22P05
  ``untranslatable_character``) is answered as the same 422 instead of a 500.
"""

from __future__ import annotations

from fastapi import Request

from soorma_common.errors import ValidationFailed
from soorma_common.jsonvalue import NUL, NUL_MESSAGE

# PostgreSQL's SQLSTATEs for text the server's encoding cannot represent.
UNSTORABLE_SQLSTATES = frozenset({"22021", "22P05"})


def _refuse(field: str) -> ValidationFailed:
    return ValidationFailed(
        f"invalid request: {field}: {NUL_MESSAGE}",
        details=[{"field": field, "message": NUL_MESSAGE, "type": "string_nul"}],
    )


async def refuse_unstorable_text(request: Request) -> None:
    """App-wide dependency: 422 for a NUL in a path or query parameter."""
    for name, value in request.path_params.items():
        if isinstance(value, str) and NUL in value:
            raise _refuse(name)
    query = request.scope.get("query_string", b"")
    if b"%00" not in query and b"\x00" not in query:
        return  # the common case: nothing to decode
    for name, value in request.query_params.multi_items():
        if NUL in name or NUL in value:
            raise _refuse(name.replace(NUL, "\\u0000"))


def _sqlstate(exc: BaseException) -> str | None:
    for candidate in (exc, getattr(exc, "orig", None), getattr(exc, "__cause__", None)):
        code = getattr(candidate, "sqlstate", None) or getattr(candidate, "pgcode", None)
        if isinstance(code, str):
            return code
    return None


def unstorable_text_error(exc: BaseException) -> ValidationFailed | None:
    """The 422 for a database error caused by unstorable text; None for any other error."""
    if _sqlstate(exc) not in UNSTORABLE_SQLSTATES:
        return None
    return ValidationFailed(
        "invalid request: the request holds text the database cannot store "
        "(NUL or an invalid character)",
        details=[{"field": "request", "message": NUL_MESSAGE, "type": "string_unstorable"}],
    )


__all__ = ["UNSTORABLE_SQLSTATES", "refuse_unstorable_text", "unstorable_text_error"]
