"""App-factory helpers: one place that wires errors, health, readiness, request ids and
the ordered middleware stack every request goes through.

The middleware stack
--------------------
Every HTTP request a service answers, including the pure-ASGI fast paths that answer a
hot route ahead of FastAPI (event publish, memory plan-context), runs through ONE ordered
stack of ASGI middleware built here. Outermost first:

1. :data:`PLATFORM_MIDDLEWARES` — platform-wide middleware, each a factory
   ``(service_name, settings) -> starlette.middleware.Middleware | None`` (``None``:
   not configured for this service). Today: request id/access log
   (:class:`RequestContextMiddleware`). **Add platform-wide middleware (e.g. tracing)
   to this list**, in the order it should wrap the rest; every service picks it up
   without changes of its own.
2. Request metrics and ``GET /metrics``
   (:class:`servicekit.metrics.RequestMetricsMiddleware`, the app's
   :class:`~servicekit.metrics.ServiceMetrics` is ``app.metrics``), unless
   ``SOORMA_METRICS_ENABLED=false``.
3. ``create_service_app(middlewares=...)`` — middleware one service adds for itself,
   then anything added later with ``app.add_middleware`` (the last added outermost among
   these, as Starlette orders them).
4. :class:`BodySizeLimitMiddleware` — 413 before a body is parsed.
5. The service's fast path (``create_service_app(fast_path=...)``, a :class:`FastPath`),
   innermost, right in front of FastAPI: it answers the requests it ``handles`` and hands
   the rest (and anything it does not accept as well-formed) to FastAPI.
6. FastAPI itself (its error handlers, routing, dependencies).

So a fast path cannot skip anything configured above it. (Anything FastAPI does itself,
e.g. its own OpenTelemetry instrumentation when a tracer provider is configured, sees
only the requests that reach FastAPI: platform-wide tracing belongs in
:data:`PLATFORM_MIDDLEWARES`.) Middleware that would sit
inside FastAPI (Starlette's ``middleware=`` constructor list, which a fast path would
skip) makes start-up fail with a message saying where to put it instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, ParamSpec, Protocol

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from starlette.middleware import Middleware, _MiddlewareFactory
from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from servicekit.auth import CurrentIdentity
from servicekit.errors import error_response, install_error_handlers
from servicekit.jsonresp import ORJSONResponse
from servicekit.logging import configure_logging, request_id_var
from servicekit.metrics import RESPONSE_STATUS, RequestMetricsMiddleware, ServiceMetrics
from servicekit.readiness import ReadyCheck, run_checks, watch_backends
from servicekit.settings import ServiceSettings
from servicekit.textguard import refuse_unstorable_text
from servicekit.tracing import tracing_middleware

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[Mapping[str, Any] | None]]

access_log = logging.getLogger("servicekit.access")

# Request ids: a random per-process prefix plus a counter. uuid4() per request cost ~5% of
# the event service's CPU under publish load (an os.urandom syscall each time).
_RID_PREFIX = os.urandom(6).hex()
_rid_counter = itertools.count(1)


def new_request_id() -> str:
    return f"{_RID_PREFIX}-{next(_rid_counter):x}"


class RequestContextMiddleware:
    """Pure ASGI middleware: request id in/out, optional access log; notes the response
    status in ``scope[RESPONSE_STATUS]``.

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
                status = scope[RESPONSE_STATUS] = message["status"]
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


class FastPath(Protocol):
    """A pure-ASGI handler for a service's hot routes, innermost in the middleware stack.

    ``handles(scope)`` picks the requests it answers (cheap: method and path); the call
    answers one of them or hands it to ``fallback`` (FastAPI) unchanged. It must answer
    exactly as the FastAPI route would, errors included (each service has a differential
    test sending every request both ways).
    """

    def handles(self, scope: Scope) -> bool: ...

    async def __call__(
        self, scope: Scope, receive: Receive, send: Send, *, fallback: ASGIApp
    ) -> None: ...


class _FastPathSwitch:
    """Innermost layer of the service stack: the fast path's requests, else FastAPI."""

    __slots__ = ("app", "fast_path")

    def __init__(self, app: ASGIApp, *, fast_path: FastPath) -> None:
        self.app = app
        self.fast_path = fast_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.fast_path.handles(scope):
            await self.fast_path(scope, receive, send, fallback=self.app)
        else:
            await self.app(scope, receive, send)


MiddlewareProvider = Callable[[str, ServiceSettings], Middleware | None]


def _request_context(_: str, settings: ServiceSettings) -> Middleware:
    return Middleware(RequestContextMiddleware, log_access=settings.access_log)


# The platform-wide part of every service's stack, outermost first (see the module
# docstring). Each entry gets the service name and settings and returns the middleware
# to install, or None when it is not configured for that service.
PLATFORM_MIDDLEWARES: list[MiddlewareProvider] = [tracing_middleware, _request_context]

P = ParamSpec("P")


class ServiceApp(FastAPI):
    """A FastAPI app whose requests first run through servicekit's middleware stack.

    Built by :func:`create_service_app`; the stack (see the module docstring) is built
    at start-up (or on the first request when no lifespan runs). ``add_middleware``
    puts middleware into that stack, so it wraps the fast path too.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The stack in three parts, each outermost first: platform-wide, the service's
        # own (``middlewares=`` and ``add_middleware``), and the innermost (body limit).
        self.platform_middleware: list[Middleware] = []
        self.service_middleware: list[Middleware] = []
        self.inner_middleware: list[Middleware] = []
        self.fast_path: FastPath | None = None
        self.metrics: ServiceMetrics | None = None
        self._service_stack: ASGIApp | None = None

    def add_middleware(
        self, middleware_class: _MiddlewareFactory[P], *args: P.args, **kwargs: P.kwargs
    ) -> None:
        """Add middleware to the service's part of the stack (it wraps the fast path)."""
        if self._service_stack is not None:
            raise RuntimeError("Cannot add middleware after an application has started")
        self.service_middleware.insert(0, Middleware(middleware_class, *args, **kwargs))

    @property
    def middleware_order(self) -> list[Middleware]:
        """The whole stack around FastAPI, outermost first (the fast path is inside it)."""
        return [*self.platform_middleware, *self.service_middleware, *self.inner_middleware]

    def build_service_stack(self) -> ASGIApp:
        """The ordered stack around FastAPI (idempotent; raises on a skipped middleware)."""
        if self._service_stack is not None:
            return self._service_stack
        if self.user_middleware and self.fast_path is not None:
            names = ", ".join(getattr(m.cls, "__name__", repr(m.cls)) for m in self.user_middleware)
            raise RuntimeError(
                f"{self.title}: middleware inside FastAPI ({names}) would be skipped by the "
                "fast path; add it with app.add_middleware or create_service_app(middlewares=...)"
            )
        app: ASGIApp = super().__call__
        if self.fast_path is not None:
            app = _FastPathSwitch(app, fast_path=self.fast_path)
        for cls, args, kwargs in reversed(self.middleware_order):
            app = cls(app, *args, **kwargs)
        self._service_stack = app
        return app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await super().__call__(scope, receive, send)
            return
        stack = self._service_stack or self.build_service_stack()
        await stack(scope, receive, send)


# What every route of a service app has: the app passes them to FastAPI, and the routes
# its routers give it are built with the same (see _included_routes).
_ROUTE_DEFAULTS: dict[str, Any] = {
    "default_response_class": ORJSONResponse,
    # Every route: NUL in a path or query parameter is a 422 (servicekit.textguard).
    "dependencies": [Depends(refuse_unstorable_text)],
}


_ROUTES_BUILT: dict[tuple[int, ...], tuple[tuple[APIRouter, ...], list[BaseRoute]]] = {}


def _included_routes(routers: tuple[APIRouter, ...]) -> list[BaseRoute]:
    """The routers' routes as a service app includes them, built once per process.

    FastAPI builds the request handler of every included route (dependency analysis,
    response models: ~1.3 ms a route) once for each app it is included in. A process
    that builds many apps of one service (a test suite, the harness per test) would
    build them again for each; every app of the process shares this one set instead.
    The routes read everything per request from ``request.state``/``request.app``,
    so sharing them shares no state. (``app.dependency_overrides`` does not reach
    them; no service uses it.)
    """
    key = tuple(map(id, routers))  # routers compare by value and do not hash
    if key not in _ROUTES_BUILT:
        holder = APIRouter(**_ROUTE_DEFAULTS)
        for router in routers:
            holder.include_router(router)
        _ROUTES_BUILT[key] = (routers, list(holder.routes))  # the routers stay alive
    return _ROUTES_BUILT[key][1]


def create_service_app(
    *,
    name: str,
    settings: ServiceSettings,
    lifespan: Lifespan | None = None,
    routers: Sequence[APIRouter] = (),
    version: str = "0.1.0",
    max_body_bytes: int | None = None,
    fast_path: FastPath | None = None,
    middlewares: Sequence[Middleware] = (),
) -> ServiceApp:
    """Build a service's FastAPI app with the platform's common behaviour.

    ``lifespan`` may yield a mapping; it becomes the request state. A
    ``"ready_checks"`` entry (``{name: async callable}``) feeds ``GET /ready``.
    ``fast_path`` answers hot routes innermost in the middleware stack, in front of
    FastAPI; ``middlewares`` (outermost first) are this service's own additions, inside
    the platform-wide :data:`PLATFORM_MIDDLEWARES` (see the module docstring).
    """
    configure_logging(name, settings.log_level, settings.log_format)

    @asynccontextmanager
    async def _lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        assert isinstance(app, ServiceApp)
        app.build_service_stack()  # a misplaced middleware fails start-up, not a request
        if lifespan is None:
            yield {"ready_checks": {}}
            return
        async with lifespan(app) as state:
            merged = dict(state or {})
            checks = merged.setdefault("ready_checks", {})
            if not checks or settings.backend_check_seconds <= 0:
                yield merged
                return
            watch = asyncio.create_task(
                watch_backends(name, checks, interval=settings.backend_check_seconds),
                name=f"{name} backend watch",
            )
            try:
                yield merged
            finally:
                watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watch

    app = ServiceApp(
        title=name,
        version=version,
        lifespan=_lifespan,
        **_ROUTE_DEFAULTS,
        # Served below, behind the same identity rules as every other route.
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.service_name = name

    def _uvicorn_options() -> dict[str, Any]:
        # Imported on use: apps served in process (tests, the harness) never load uvicorn.
        from servicekit.server import uvicorn_options

        return uvicorn_options(settings)

    # What a server running this app in process (``soorma dev``) passes to uvicorn.
    app.state.uvicorn_options = _uvicorn_options
    install_error_handlers(app)
    _add_api_docs(app, name)

    async def _checked(request: Request, ok_status: str, failed_status: str) -> Response:
        checks: Mapping[str, ReadyCheck] = getattr(request.state, "ready_checks", {})
        results = await run_checks(checks)
        ok = all(result == "ok" for result in results.values())
        body = {"status": ok_status if ok else failed_status, "service": name, "checks": results}
        return ORJSONResponse(body, status_code=200 if ok else 503)

    # Both answer 200 only when every backend answers: a service whose Redis or database
    # is gone cannot do its work, whatever its process does.
    @app.get("/health", tags=["ops"])
    async def health(request: Request) -> Response:
        return await _checked(request, "ok", "unavailable")

    @app.get("/ready", tags=["ops"])
    async def ready(request: Request) -> Response:
        return await _checked(request, "ready", "not_ready")

    app.router.routes.extend(_included_routes(tuple(routers)))
    platform = [m for m in (provide(name, settings) for provide in PLATFORM_MIDDLEWARES) if m]
    if settings.metrics_enabled:
        app.metrics = ServiceMetrics(name, settings)
        # Inside the request context (which notes the status): no second send wrapper.
        noted = any(getattr(m, "cls", None) is RequestContextMiddleware for m in platform)
        platform.append(
            Middleware(RequestMetricsMiddleware, metrics=app.metrics, status_noted=noted)
        )
    limit = max_body_bytes if max_body_bytes is not None else settings.max_payload_bytes * 4
    app.platform_middleware = platform
    app.service_middleware = list(middlewares)
    app.inner_middleware = [Middleware(BodySizeLimitMiddleware, limit=limit)]
    app.fast_path = fast_path
    return app
