"""App factory for the gateway-a2a: a2a-sdk's routes and handler over the event bus."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
from a2a.server.routes import (
    add_a2a_routes_to_fastapi,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.types.a2a_pb2 import AgentCard
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from fastapi import FastAPI
from starlette.middleware import Middleware
from starlette.routing import Mount, Route

from gateway_a2a import logs as gateway_logs
from gateway_a2a import metrics as gateway_metrics
from gateway_a2a import openapi as gateway_openapi
from gateway_a2a.auth import AuthMiddleware, TenantContextBuilder
from gateway_a2a.body import Utf8BodyGuard
from gateway_a2a.bridge import Bridge
from gateway_a2a.card import PLACEHOLDER_SKILL, CardEndpoints, build_card
from gateway_a2a.executor import BusAgentExecutor
from gateway_a2a.handler import GatewayRequestHandler
from gateway_a2a.legacy import LegacyEndpoint
from gateway_a2a.push import RetryingPushSender
from gateway_a2a.replicas import ReplicaWatch
from gateway_a2a.rest03 import rest03_routes
from gateway_a2a.restwire import RestMediaTypes
from gateway_a2a.semantic import SemanticRanker
from gateway_a2a.settings import Settings
from gateway_a2a.skills import SkillCatalog
from gateway_a2a.store import build_stores, migrate_stores
from servicekit import create_service_app
from soorma.client import make_http_client, verified_tls
from soorma.context import DEFAULT_HTTP_LIMITS

AGENT_PREFIX = "/agents/{agent}"


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the gateway-a2a app. Nothing connects until the lifespan starts."""
    settings = settings or Settings()
    # One line per bus request would cost more than the request (acks, publishes).
    logging.getLogger("httpx").setLevel(
        max(logging.WARNING, logging.getLogger("httpx").getEffectiveLevel())
    )
    gateway_logs.install()  # a client's bad request: one log line, no traceback
    stores = build_stores(settings)
    http = make_http_client(limits=DEFAULT_HTTP_LIMITS, transport=settings.http_transport)
    push_http = httpx.AsyncClient(
        timeout=settings.gateway_push_timeout_seconds,
        follow_redirects=False,
        verify=verified_tls(),
    )
    semantic = SemanticRanker(
        settings.memory_url,
        http,
        token=settings.api_token,
        min_similarity=settings.gateway_route_min_similarity,
        min_margin=settings.gateway_route_min_margin,
    )
    catalog = SkillCatalog(
        settings.registry_url,
        http,
        settings.gateway_card_ttl_seconds,
        settings.api_token,
        semantic=semantic,
    )
    bridge = Bridge(settings, stores.routes, http)
    cards = CardEndpoints(settings, catalog)
    placeholder: AgentCard = build_card(settings, [PLACEHOLDER_SKILL])
    push_sender = RetryingPushSender(push_http, stores.push_configs, settings)
    handler = GatewayRequestHandler(
        agent_executor=BusAgentExecutor(settings, bridge, stores.routes, stores.tasks),
        task_store=stores.tasks,
        agent_card=placeholder,
        push_config_store=stores.push_configs if settings.gateway_push_enabled else None,
        push_sender=push_sender if settings.gateway_push_enabled else None,
        push_url_validator=push_sender._push_url_validator,
        extended_card_modifier=cards.extended_card,
        extended_agent_card=placeholder,
        validate_input_modes=True,
        event_stream=stores.events,
        settings=settings,
        catalog=catalog,
        bridge=bridge,
        routes=stores.routes,
        message_ids=stores.message_ids,
    )
    bridge.on_orphan = handler.resume
    watch = ReplicaWatch(settings, stores.engine, bridge, handler.resume)
    contexts = TenantContextBuilder()

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, Any]]:
        await migrate_stores(stores)
        await bridge.start()
        await watch.start()
        try:
            yield {"ready_checks": {"database": stores.ping}}
        finally:
            await watch.close()
            await handler.aclose()
            await bridge.close()
            await push_sender.drain()
            await push_http.aclose()
            await http.aclose()
            await stores.close()

    app = create_service_app(
        name="gateway-a2a",
        settings=settings,
        lifespan=lifespan,
        max_body_bytes=settings.gateway_max_body_bytes,
    )
    legacy = LegacyEndpoint(handler)
    app.router.routes.extend(
        [
            Route("/tasks/send", legacy.send, methods=["POST"]),
            Route("/.well-known/agent.json", cards.legacy, methods=["GET"]),
            Route(f"{AGENT_PREFIX}/.well-known/agent-card.json", cards.agent_card, methods=["GET"]),
        ]
    )
    jsonrpc = [
        route
        for url in ("/", f"{AGENT_PREFIX}/", AGENT_PREFIX)
        for route in create_jsonrpc_routes(
            handler, rpc_url=url, context_builder=contexts, enable_v0_3_compat=True
        )
    ]
    # Per-agent routes first: the SDK's catch-all ``/{tenant}`` mount would take them.
    rest = [
        route
        for route in create_rest_routes(handler, context_builder=contexts, path_prefix=AGENT_PREFIX)
        if not isinstance(route, Mount)
    ]
    # The 0.3 routes before the SDK's ``/{tenant}`` mount, which would take ``/v1/...``.
    rest += rest03_routes(handler, contexts)
    rest += create_rest_routes(handler, context_builder=contexts)
    add_a2a_routes_to_fastapi(
        app,
        agent_card_routes=[Route(AGENT_CARD_WELL_KNOWN_PATH, cards.card, methods=["GET"])],
        jsonrpc_routes=jsonrpc,
        rest_routes=rest,
    )
    app.add_middleware(AuthMiddleware, settings=settings)
    # Innermost (after the size limit): the HTTP+JSON media types, then a body that is
    # not UTF-8 is a parse error.
    app.user_middleware.append(Middleware(RestMediaTypes))
    app.user_middleware.append(Middleware(Utf8BodyGuard))
    gateway_openapi.install(app)
    gateway_metrics.register(app, stores, bridge)  # open tasks, refused events on /metrics
    app.state.handler = handler
    app.state.bridge = bridge
    return app
