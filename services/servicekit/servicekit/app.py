"""App-factory helpers: one place that wires errors, health, readiness and request ids."""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from servicekit.auth import CurrentIdentity
from servicekit.errors import error_response, install_error_handlers
from servicekit.jsonresp import ORJSONResponse
from servicekit.logging import configure_logging, request_id_var
from servicekit.settings import ServiceSettings
from servicekit.tracing import TracingMiddleware, configure_tracing

ReadyCheck = Callable[[], Awaitable[Any]]
Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[Mapping[str, Any] | None]]

access_log = logging.getLogger("servicekit.access")

# Request ids: a random per-process prefix plus a counter. uuid4() per request cost ~5% of
# the event service's CPU under publish load (an os.urandom syscall each time).
_RID_PREFIX = os.urandom(6).hex()
_rid_counter = itertools.count(1)


def new_request_id() -> str:
    return f"{_RID_PREFIX}-{next(_rid_counter):x}"


class RequestContextMiddleware:
    """Pure ASGI middleware: request id in/out, optional access log.

    Pure ASGI (not ``BaseHTTPMiddleware``) so streaming responses are not buffered and
    the publish path pays almost nothing.
    """

    def __init__(self, app: ASGIApp, *, log_access: bool = False) -> None:
        self.app = app
        self.log_access = log_access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = None
        for key, value in scope["headers"]:
            if key == b"x-request-id":
                rid = value.decode("latin-1")[:128]
                break
        rid = rid or new_request_id()
        token = request_id_var.set(rid)
        started = time.perf_counter()
        status = 0

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", [])
                message["headers"] = [*message["headers"], (b"x-request-id", rid.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            if self.log_access:
                access_log.info(
                    "request",
                    extra={
                        "method": scope.get("method"),
                        "path": scope.get("path"),
                        "status": status,
                        "ms": round((time.perf_counter() - started) * 1000, 2),
                    },
                )
            request_id_var.reset(token)


class BodySizeLimitMiddleware:
    """Reject request bodies over ``limit`` bytes with a 413 before they are parsed."""

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope["headers"]:
            if key == b"content-length" and value.isdigit() and int(value) > self.limit:
                await self._reject(scope, receive, send)
                return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise _BodyTooLarge(self.limit)
            return message

        try:
            await self.app(scope, limited_receive, send)
        except _BodyTooLarge:
            await self._reject(scope, receive, send)

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            413, "payload_too_large", f"request body exceeds {self.limit} bytes"
        )
        await response(scope, receive, send)


class _BodyTooLarge(Exception):
    pass


# Raised from ``receive`` inside ``BodySizeLimitMiddleware``: let it propagate.
BodyTooLarge = _BodyTooLarge


def _add_api_docs(app: FastAPI, name: str) -> None:
    """``/openapi.json``, ``/docs`` and ``/redoc`` for identified callers only.

    In jwt mode they need a bearer token like any route (a service's API is not
    advertised to anyone who asks); in dev mode every caller has an identity.
    """

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi(_: CurrentIdentity) -> Response:
        return ORJSONResponse(app.openapi())

    @app.get("/docs", include_in_schema=False)
    async def docs(_: CurrentIdentity) -> Response:
        return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{name} - API")

    @app.get("/redoc", include_in_schema=False)
    async def redoc(_: CurrentIdentity) -> Response:
        return get_redoc_html(openapi_url="/openapi.json", title=f"{name} - API")


def create_service_app(
    *,
    name: str,
    settings: ServiceSettings,
    lifespan: Lifespan | None = None,
    routers: Sequence[APIRouter] = (),
    version: str = "0.1.0",
    max_body_bytes: int | None = None,
    app_class: type[FastAPI] = FastAPI,
) -> FastAPI:
    """Build a service's FastAPI app with the platform's common behaviour.

    ``lifespan`` may yield a mapping; it becomes the request state. A
    ``"ready_checks"`` entry (``{name: async callable}``) feeds ``GET /ready``.
    ``app_class`` lets a service use a ``FastAPI`` subclass (e.g. one answering a hot
    route before the middleware stack).
    """
    configure_logging(name, settings.log_level)

    @asynccontextmanager
    async def _lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        if lifespan is None:
            yield {"ready_checks": {}}
            return
        async with lifespan(app) as state:
            merged = dict(state or {})
            merged.setdefault("ready_checks", {})
            yield merged

    app = app_class(
        title=name,
        version=version,
        lifespan=_lifespan,
        default_response_class=ORJSONResponse,
        # Served below, behind the same identity rules as every other route.
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.service_name = name
    install_error_handlers(app)
    _add_api_docs(app, name)

    @app.get("/health", tags=["ops"])
    async def health() -> dict[str, str]:
        return {"status": "ok", "service": name}

    @app.get("/ready", tags=["ops"])
    async def ready(request: Request) -> Response:
        checks: Mapping[str, ReadyCheck] = getattr(request.state, "ready_checks", {})
        results: dict[str, str] = {}
        ok = True
        for check_name, check in checks.items():
            try:
                await check()
                results[check_name] = "ok"
            except Exception as exc:
                ok = False
                results[check_name] = f"error: {exc}"
        body = {"status": "ready" if ok else "not_ready", "service": name, "checks": results}
        return ORJSONResponse(body, status_code=200 if ok else 503)

    for router in routers:
        app.include_router(router)
    limit = max_body_bytes if max_body_bytes is not None else settings.max_payload_bytes * 4
    app.add_middleware(BodySizeLimitMiddleware, limit=limit)
    app.add_middleware(RequestContextMiddleware, log_access=settings.access_log)
    if configure_tracing(name):  # outermost; not added at all with tracing off
        app.add_middleware(TracingMiddleware, service=name)
    return app
