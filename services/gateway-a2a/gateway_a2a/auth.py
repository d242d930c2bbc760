"""Who calls the gateway: ``X-API-Key`` (hashed key -> tenant) or a bearer JWT.

Pure ASGI middleware in front of the A2A routes. Without credentials, when any are
required (``jwt`` mode, or API keys configured), the answer is 401; in ``dev`` mode with no
keys configured the caller is the ``X-Tenant-ID`` header's tenant (or the default), like
every other service in dev mode. Cards and health checks are public.
"""

from __future__ import annotations

import hmac
import re
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.routes import DefaultServerCallContextBuilder
from starlette.authentication import SimpleUser
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway_a2a.request_state import request_state
from gateway_a2a.settings import Settings, hash_api_key
from servicekit.auth import Identity, resolve_identity
from servicekit.errors import STATUS_BY_ERROR, error_response
from soorma_common.errors import SoormaError, Unauthenticated

IDENTITY_SCOPE_KEY = "soorma.identity"
PUBLIC = re.compile(r"^/(health|ready|docs|openapi\.json|(agents/[^/]+/)?\.well-known/.*)$")


def authenticate(headers: Any, settings: Settings) -> Identity:
    """The caller's identity from its headers.

    Raises:
        Unauthenticated: missing or invalid credentials.
    """
    key = headers.get("x-api-key")
    if key:
        digest = hash_api_key(key)
        for stored, tenant in settings.gateway_api_keys.items():
            if hmac.compare_digest(stored, digest):
                return Identity(tenant_id=tenant, user_id=f"api-key:{digest[7:19]}")
        raise Unauthenticated("unknown API key: send a key the gateway was configured with")
    if (headers.get("authorization") or "").lower().startswith("bearer "):
        return resolve_identity(headers, settings.model_copy(update={"auth_mode": "jwt"}))
    if settings.auth_mode == "jwt" or settings.gateway_api_keys:
        raise Unauthenticated(
            "missing credentials: send 'X-API-Key: <key>' or 'Authorization: Bearer <JWT>'"
        )
    return resolve_identity(headers, settings)


class AuthMiddleware:
    """Resolve the identity of every non-public request, or answer 401."""

    def __init__(self, app: ASGIApp, *, settings: Settings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or PUBLIC.match(scope["path"]):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        try:
            identity = authenticate(request.headers, self.settings)
        except SoormaError as exc:
            status = STATUS_BY_ERROR.get(type(exc), 400)
            response = error_response(status, exc.code, exc.message, exc.details)
            if status == 401:
                response.headers["WWW-Authenticate"] = 'Bearer, ApiKey header="X-API-Key"'
            await response(scope, receive, send)
            return
        scope[IDENTITY_SCOPE_KEY] = identity
        scope["user"] = SimpleUser(identity.user_id)
        await self.app(scope, receive, send)


class TenantContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's call context, carrying the authenticated tenant the stores scope on."""

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        identity: Identity | None = request.scope.get(IDENTITY_SCOPE_KEY)
        state = request_state(context)
        if identity is not None:
            state.tenant_id = identity.tenant_id
            state.user_id = identity.user_id
        state.agent = request.path_params.get("agent") or None
        return context
