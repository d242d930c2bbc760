"""The gateway's test platform: the event service, the registry, the memory service and
the gateway under real uvicorn, with the echo and review agents of tenant ``tenant-a``.

:func:`open_platform` starts it on a given event-service app and databases; the gateway
tests' fixtures (tests/gateway/conftest.py) call it and the tests import the names
(``HEADERS_A``, ``Platform``...) from here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from gateway_a2a import create_app as create_gateway_app
from gateway_a2a.settings import Settings as GatewaySettings
from memory_service import create_app as create_memory_app
from registry_service import create_app as create_registry_app
from soorma import PlatformContext
from testsupport.a2a import ReviewControl, agent_context, echo_tool, review_worker
from testsupport.server import LiveServer, free_port, serve
from testsupport.services import memory_settings, registry_settings

KEY_A, KEY_B = "key-tenant-a", "key-tenant-b"
JWT_SECRET = "gateway-test-secret-of-at-least-32-bytes"
HEADERS_A = {"X-API-Key": KEY_A}
HEADERS_B = {"X-API-Key": KEY_B}


def gateway_settings(
    events: str, registry: str, database: str, tmp_path: Any, **overrides: Any
) -> GatewaySettings:
    values: dict[str, Any] = {
        "event_service_url": events,
        "registry_url": registry,
        # Skill-less routing by words only, unless a test's platform gives its memory.
        "memory_url": None,
        "gateway_database_url": database,
        "data_dir": tmp_path,
        "gateway_replica_id": "replica-a",
        "gateway_card_ttl_seconds": 0,
        "gateway_api_keys": {KEY_A: "tenant-a", KEY_B: "tenant-b"},
        "default_tenant": "tenant-a",
        "gateway_poll_interval_seconds": 0.05,
        "gateway_push_backoff_seconds": 0.05,
        "jwt_secret": JWT_SECRET,
        "gateway_push_allow": ["127.0.0.1"],
        **overrides,
    }
    return GatewaySettings(**values)


@dataclass
class Platform:
    events: LiveServer
    registry: LiveServer
    memory: LiveServer
    database: str
    tmp_path: Any
    stack: AsyncExitStack
    gateway: LiveServer | None = None
    control: ReviewControl = field(default_factory=ReviewControl)

    @property
    def url(self) -> str:
        assert self.gateway is not None
        return self.gateway.url

    def settings(self, **overrides: Any) -> GatewaySettings:
        return gateway_settings(
            self.events.url,
            self.registry.url,
            self.database,
            self.tmp_path,
            **{"memory_url": self.memory.url, **overrides},
        )

    async def start_gateway(self, port: int | None = None, **overrides: Any) -> LiveServer:
        """Another gateway process on the same database (a replica, or a restart)."""
        port = port or free_port()
        settings = self.settings(gateway_url=f"http://127.0.0.1:{port}", **overrides)
        server = LiveServer(create_gateway_app(settings), port)
        await server.start()
        return server

    async def context(self, tenant: str = "tenant-a") -> PlatformContext:
        context = agent_context(self.events.url, self.registry.url, self.memory.url, tenant=tenant)
        self.stack.push_async_callback(context.close)
        return context

    async def start_agents(self, tenant: str = "tenant-a") -> None:
        for agent in (
            echo_tool(await self.context(tenant)),
            review_worker(await self.context(tenant), self.control),
        ):
            await agent.start()
            self.stack.push_async_callback(agent.stop)


@asynccontextmanager
async def open_platform(
    event_app: Any, sqlite_url: str, database: str, tmp_path: Any, **overrides: Any
) -> AsyncIterator[Platform]:
    """The platform on ``event_app``: registry and memory on SQLite next to
    ``sqlite_url``, the gateway on ``database``, with ``overrides`` of its settings."""
    async with AsyncExitStack() as stack:
        events = await stack.enter_async_context(serve(event_app))
        registry = await stack.enter_async_context(
            serve(create_registry_app(registry_settings(sqlite_url, tmp_path)))
        )
        memory = await stack.enter_async_context(
            serve(
                create_memory_app(
                    memory_settings(sqlite_url.replace("test.db", "memory.db"), tmp_path)
                )
            )
        )
        platform = Platform(events, registry, memory, database, tmp_path, stack)
        await platform.start_agents()
        platform.gateway = await platform.start_gateway(**overrides)
        try:
            yield platform
        finally:
            if platform.gateway is not None:
                await platform.gateway.stop()
