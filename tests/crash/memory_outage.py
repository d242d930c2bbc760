"""Helpers for the memory-outage tests: the memory service behind a relay that can be
switched off and on, the platform around it, and a request/answer call."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import memory_service
from event_service import create_app as create_event_app
from soorma import PlatformContext, PlatformSettings
from testsupport.server import LiveServer, free_port, serve
from testsupport.services import memory_settings, redis_event_settings


class Memory:
    """The memory service behind a TCP relay on a fixed port: ``stop()`` makes it
    unreachable (connections refused, open ones cut), ``start()`` reachable again."""

    def __init__(self, upstream: LiveServer) -> None:
        self.upstream = upstream
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream.port)
        self._open |= {writer, up_writer}
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._open:
            writer.close()
        self._open.clear()
        await self._server.wait_closed()


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
