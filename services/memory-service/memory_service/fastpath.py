"""Pure-ASGI fast path for the plan-context hot routes.

A planner reads and writes its plan context on every transition and resolves answers by
correlation id, so these three routes carry the service's load (benchmark B4):

- ``GET /v1/memory/plan-context/{plan_id}``
- ``PUT /v1/memory/plan-context/{plan_id}``
- ``GET /v1/memory/plan-context/by-correlation/{correlation_id}``

FastAPI's middleware stack, routing, dependency solving and response-model re-validation
cost more CPU per request than the store's work, so well-formed requests to these routes
are answered here, ahead of all of it, through the same store calls (and, for ``PUT``,
the same ``routes.plan_context.replace_plan``) the routes use. The fast path is the
innermost layer of servicekit's middleware stack (``create_service_app(fast_path=...)``),
so request ids, body limits, metrics and anything else in that stack wrap it as they
wrap FastAPI. Anything this path does not accept as well-formed (odd ids,
identity problems, unparsable or invalid bodies, other content types, bodies over the
record limit or without a length) is handed to the full FastAPI app unchanged (the body
replayed), so those errors come from the routes themselves. Errors of the store and of
``replace_plan`` (404, 409, 422 for unstorable values) are rendered exactly as the app's
exception handlers would.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memory_service.routes.deps import MAX_ID_LENGTH, parse_if_match
from memory_service.routes.plan_context import PlanContextReplace, replace_plan
from memory_service.store import MemoryStore
from servicekit.app import FastPath
from servicekit.asgi import RawHeaders, read_body
from servicekit.auth import resolve_identity
from servicekit.errors import error_response, response_for
from servicekit.metrics import ROUTE_TEMPLATE
from servicekit.settings import ServiceSettings
from soorma_common.errors import SoormaError
from soorma_common.jsonvalue import NUL
from soorma_common.memory import PlanContextRecord

log = logging.getLogger("memory_service.fastpath")

PREFIX = "/v1/memory/plan-context/"
BY_CORRELATION = "by-correlation/"
# The FastAPI routes' templates: the request metrics label both paths alike.
_PLAN_TEMPLATE = PREFIX + "{plan_id}"
_BY_CORRELATION_TEMPLATE = PREFIX + BY_CORRELATION + "{correlation_id}"
_to_json = PlanContextRecord.__pydantic_serializer__.to_json


def _plain_id(value: str) -> bool:
    """An id the route would accept as a path parameter (else FastAPI answers)."""
    return 0 < len(value) <= MAX_ID_LENGTH and "/" not in value and NUL not in value


def is_json(content_type: str | None) -> bool:
    if content_type is None:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json"


def replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands FastAPI the body this path already read."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # then disconnects etc., as usual

    return replay


async def respond_error(
    exc: Exception, scope: Scope, receive: Receive, send: Send, logger: logging.Logger
) -> None:
    """Answer ``exc`` as the app's exception handlers would: a domain error's status and
    body, anything else logged and rendered as the last-resort 500."""
    response = response_for(exc) if isinstance(exc, SoormaError) else None
    if response is None:
        logger.error("unhandled error on %s %s", scope["method"], scope["path"], exc_info=exc)
        response = error_response(500, "internal_error", "internal server error")
    await response(scope, receive, send)


class FastPaths:
    """Several fast paths as the one servicekit installs: the first that handles a
    request answers it."""

    def __init__(self, *paths: FastPath) -> None:
        self.paths = paths

    def handles(self, scope: Scope) -> bool:
        return any(path.handles(scope) for path in self.paths)

    async def __call__(
        self, scope: Scope, receive: Receive, send: Send, *, fallback: ASGIApp
    ) -> None:
        for path in self.paths:
            if path.handles(scope):
                await path(scope, receive, send, fallback=fallback)
                return
        await fallback(scope, receive, send)


class PlanContextFastPath:
    """Answers the plan-context hot routes inside servicekit's middleware stack but without
    FastAPI's layers; hands the rest to ``fallback`` (a :class:`servicekit.app.FastPath`).
    """

    def __init__(self, *, settings: ServiceSettings) -> None:
        self.settings = settings

    @staticmethod
    def handles(scope: Scope) -> bool:
        return (
            scope["type"] == "http"
            and scope["method"] in ("GET", "PUT")
            and scope["path"].startswith(PREFIX)
        )

    async def __call__(
        self, scope: Scope, receive: Receive, send: Send, *, fallback: ASGIApp
    ) -> None:
        method = scope["method"]
        rest = scope["path"][len(PREFIX) :]
        by_correlation = method == "GET" and rest.startswith(BY_CORRELATION)
        record_id = rest[len(BY_CORRELATION) :] if by_correlation else rest
        if not _plain_id(record_id):
            await fallback(scope, receive, send)
            return
        headers = RawHeaders(scope["headers"])
        try:
            tenant = resolve_identity(headers, self.settings).tenant_id
        except SoormaError:
            await fallback(scope, receive, send)  # the route's dependency says why
            return
        store: MemoryStore = scope["state"]["store"]
        if method == "GET":
            work = (
                store.get_plan_by_correlation(tenant, record_id)
                if by_correlation
                else store.get_plan(tenant, record_id)
            )
        else:
            parsed = None
            body = b""
            if self._small_json(headers):
                body = await read_body(receive)
                parsed = _parse_put(headers, body)
            if parsed is None:
                await fallback(scope, replay(body, receive) if body else receive, send)
                return
            work = replace_plan(store, tenant, record_id, *parsed)
        scope[ROUTE_TEMPLATE] = _BY_CORRELATION_TEMPLATE if by_correlation else _PLAN_TEMPLATE
        await self._respond(work, scope, receive, send)

    def _small_json(self, headers: RawHeaders) -> bool:
        """A JSON body declared within the record limit (else FastAPI answers, e.g. 413)."""
        length = headers.get("content-length")
        return (
            is_json(headers.get("content-type"))
            and length is not None
            and length.isdigit()
            and int(length) <= self.settings.max_payload_bytes
        )

    @staticmethod
    async def _respond(
        work: Awaitable[PlanContextRecord], scope: Scope, receive: Receive, send: Send
    ) -> None:
        try:
            record = await work
        except Exception as exc:
            await respond_error(exc, scope, receive, send, log)
            return
        body = _to_json(record)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"etag", f'"{record.version}"'.encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _parse_put(headers: RawHeaders, body: bytes) -> tuple[PlanContextReplace, int | None] | None:
    """The parsed body and ``If-Match`` of a well-formed PUT; None hands it to FastAPI."""
    try:
        if_match = parse_if_match(headers.get("if-match"))
        # Exactly what FastAPI does (the stdlib parser, then the model): a faster parser
        # would differ on edge cases (orjson turns integers beyond 64 bits into floats).
        return PlanContextReplace.model_validate(json.loads(body)), if_match
    except (ValueError, RecursionError, SoormaError):  # ValidationError is a ValueError
        return None
