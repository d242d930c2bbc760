"""One table from domain error to HTTP status, one renderer for every error body.

Every error a service returns looks like
``{"error": {"code": "...", "message": "...", "details": ...}}``.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response

from servicekit.jsonresp import ORJSONResponse
from servicekit.textguard import unstorable_text_error
from soorma_common import errors as e

log = logging.getLogger("servicekit.errors")

STATUS_BY_ERROR: dict[type[e.SoormaError], int] = {
    e.ValidationFailed: 422,
    e.NotFound: 404,
    e.Conflict: 409,
    e.PayloadTooLarge: 413,
    e.Unauthenticated: 401,
    e.PermissionDenied: 403,
    e.ServiceUnavailable: 503,
}

_CODE_BY_STATUS = {
    400: "bad_request",
    401: "unauthenticated",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "rate_limited",
}


class ErrorInfo(BaseModel):
    code: str
    message: str
    details: Any = None


class ErrorBody(BaseModel):
    """The body of every error answer (documented in OpenAPI by :func:`error_responses`)."""

    error: ErrorInfo


_ERROR_DESCRIPTIONS = {
    400: "Bad request",
    401: "Missing or invalid token",
    403: "Identity not allowed",
    404: "Not found (or another tenant's)",
    409: "Conflict (existing id or stale version)",
    413: "Body over the size limit",
    422: "Invalid request: the message names each failing field",
    503: "A dependency is unavailable",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses=`` entries for error statuses, all with the common error body.

    Declaring 422 this way also replaces FastAPI's default ``HTTPValidationError`` schema,
    which is not what our handlers send.
    """
    return {
        status: {"model": ErrorBody, "description": _ERROR_DESCRIPTIONS.get(status, "Error")}
        for status in statuses
    }


def status_for(exc: e.SoormaError) -> int:
    """HTTP status for a domain error: the nearest class in :data:`STATUS_BY_ERROR`."""
    for cls in type(exc).__mro__:
        if cls in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[cls]
    return 500


def error_response(status: int, code: str, message: str, details: Any = None) -> Response:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return ORJSONResponse(
        {"error": {"code": code, "message": message, "details": details}},
        status_code=status,
        headers=headers,
    )


_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def _snake(part: Any) -> str:
    # DTOs accept camelCase aliases on input, so pydantic reports a missing field by its
    # alias ("taskId"); the wire format is snake_case, so name it that way.
    text = str(part)
    return _CAMEL_HUMP.sub("_", text).lower() if text[:1].islower() else text


def _field_path(loc: tuple[Any, ...]) -> str:
    parts = [_snake(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or ".".join(str(p) for p in loc)


def _detail(err: dict[str, Any]) -> dict[str, Any]:
    loc, msg = tuple(err.get("loc", ())), str(err.get("msg", ""))
    if err.get("type") == "json_invalid" and loc[:1] == ("body",):
        # FastAPI reports unparsable JSON at ("body", <offset>): name the body and say
        # why parsing stopped.
        loc = ("body",)
        reason = (err.get("ctx") or {}).get("error")
        msg = f"{msg}: {reason}" if reason and str(reason) not in msg else msg
    return {"field": _field_path(loc), "message": msg, "type": err.get("type", "")}


def describe_validation_errors(errors: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """A one-line message naming each failing field, plus structured details."""
    details = [_detail(err) for err in errors]
    summary = "; ".join(f"{d['field']}: {d['message']}" for d in details[:5])
    if len(details) > 5:
        summary += f" (and {len(details) - 5} more)"
    return f"invalid request: {summary}", details


def response_for(exc: Exception) -> Response | None:
    """The error response for a domain or request-validation error; None for others.

    For pure-ASGI fast paths that run outside FastAPI's exception handlers but must
    answer exactly as they would.
    """
    if isinstance(exc, e.SoormaError):
        return error_response(status_for(exc), exc.code, exc.message, exc.details)
    if isinstance(exc, RequestValidationError):
        message, details = describe_validation_errors(list(exc.errors()))
        return error_response(422, "validation_error", message, details)
    return None


async def _soorma_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, e.SoormaError)
    response = response_for(exc)
    assert response is not None
    return response


async def _validation_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    response = response_for(exc)
    assert response is not None
    return response


# FastAPI answers a body json.loads() cannot read for reasons other than a JSON syntax
# error (invalid UTF-8, nesting deep enough to hit the recursion limit) with this bare 400.
_BODY_PARSE_DETAIL = "There was an error parsing the body"


def _unreadable_body(cause: BaseException | None) -> Response:
    from servicekit.app import BodyTooLarge  # app imports this module

    if isinstance(cause, BodyTooLarge):
        # A body without Content-Length that outgrew the limit while FastAPI read it.
        limit = cause.args[0] if cause.args else "the"
        return error_response(413, "payload_too_large", f"request body exceeds {limit} bytes")
    if isinstance(cause, UnicodeDecodeError):
        reason = "it is not valid UTF-8"
    elif isinstance(cause, RecursionError):
        reason = "it nests arrays/objects too deeply"
    else:
        reason = f"it could not be parsed ({type(cause).__name__})"
    message = f"invalid request: body: not readable as JSON: {reason}"
    return error_response(
        422,
        "validation_error",
        message,
        [{"field": "body", "message": message, "type": "json_invalid"}],
    )


async def _http_error(_: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 400 and exc.detail == _BODY_PARSE_DETAIL:
        return _unreadable_body(exc.__cause__)
    code = _CODE_BY_STATUS.get(exc.status_code, "http_error")
    return error_response(exc.status_code, code, str(exc.detail))


async def _database_error(request: Request, exc: Exception) -> Response:
    refused = unstorable_text_error(exc)
    if refused is None:
        return await _unhandled(request, exc)
    log.info("refused unstorable text on %s %s", request.method, request.url.path)
    return error_response(422, refused.code, refused.message, refused.details)


async def _unhandled(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(500, "internal_error", "internal server error")


def install_error_handlers(app: FastAPI) -> None:
    """Render every error, expected or not, in the common error shape."""
    app.add_exception_handler(e.SoormaError, _soorma_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(DBAPIError, _database_error)
    app.add_exception_handler(Exception, _unhandled)
