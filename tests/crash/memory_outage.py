"""Helpers for the memory-outage tests: the memory service behind a relay that can be
switched off and on, the platform around it, and a request/answer call."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import memory_service
from event_service import create_app as create_event_app
from soorma import PlatformContext, PlatformSettings
from testsupport.relay import TcpRelay
from testsupport.server import LiveServer, serve
from testsupport.services import memory_settings, redis_event_settings


class Memory(TcpRelay):
    """The memory service behind a relay that can be switched off and on."""

    def __init__(self, upstream: LiveServer) -> None:
        super().__init__(upstream.port)


@contextlib.asynccontextmanager
async def outage_stack(
    redis_url: str, redis_prefix: str, postgres_url: str, tmp_path: Any
) -> AsyncIterator[tuple[Memory, PlatformContext]]:
    """The event service (Redis) and the memory service (PostgreSQL, behind a
    :class:`Memory` relay), and a platform context using both (no registry)."""
    app = memory_service.create_app(memory_settings(postgres_url, tmp_path))
    async with (
        serve(app) as upstream,
        serve(create_event_app(redis_event_settings(redis_url, redis_prefix))) as ev,
    ):
        memory = Memory(upstream)
        await memory.start()
        settings = PlatformSettings(
            event_service_url=ev.url, memory_url=memory.url, registry_url=memory.url
        )
        async with PlatformContext.from_env(settings=settings) as context:
            context.registry = None  # no registry in these tests
            context.bus.payload_validator = None
            yield memory, context
        with contextlib.suppress(Exception):
            await memory.stop()


async def ask(
    context: PlatformContext, event_type: str, response_event: str, request_id: str
) -> Any:
    """Send request ``request_id`` (also its correlation id) and wait for its answer."""
    return await context.bus.call(
        event_type,
        {},
        response_event=response_event,
        event_id=request_id,
        correlation_id=request_id,
        timeout=30,
    )
