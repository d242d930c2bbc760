"""The real platform for the UI's browser tests, on an event loop in a background thread.

Selenium blocks; the services must keep serving while it does. So the event, memory,
registry and tracker services (each under real uvicorn on a free port) and the agents
run on their own loop in a thread, and the (synchronous) tests hand coroutines to it
with :meth:`Stack.run`.

Backends: Redis Streams and a fresh PostgreSQL database when ``SOORMA_TEST_REDIS_URL`` and
``SOORMA_TEST_DATABASE_URL`` are set (always in CI), else the embedded ones (in-memory
bus, SQLite). The pages do not depend on the backend; running them on the production
one in CI is the realistic choice, and one browser run keeps the tests fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from event_service import create_app as create_event_app
from memory_service import create_app as create_memory_app
from registry_service import create_app as create_registry_app
from soorma import PlatformContext, PlatformSettings
from testsupport.server import serve
from testsupport.services import (
    event_settings,
    memory_settings,
    redis_event_settings,
    registry_settings,
)
from tracker_service import create_app as create_tracker_app
from tracker_service.settings import Settings as TrackerSettings

T = TypeVar("T")


async def _cancel_the_rest() -> None:
    rest = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in rest:
        task.cancel()
    await asyncio.gather(*rest, return_exceptions=True)


class Stack:
    """Event, memory, registry and tracker services plus whatever agents a test starts."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.redis_url = os.environ.get("SOORMA_TEST_REDIS_URL")
        self.postgres_server = os.environ.get("SOORMA_TEST_DATABASE_URL")
        self.backend = "redis+postgres" if self.redis_url and self.postgres_server else "embedded"
        self.database_url = f"sqlite+aiosqlite:///{tmp}/tracker.db"
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="ui-stack", daemon=True)
        self._exit = contextlib.AsyncExitStack()
        self.urls: dict[str, str] = {}

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> Stack:
        self._thread.start()
        self.run(self._up())
        return self

    def stop(self) -> None:
        try:
            self.run(self._exit.aclose(), timeout=30)
        finally:
            # As asyncio.run does: what is still pending (sse-starlette's shutdown watcher,
            # one per loop) is cancelled and finished; a task left pending on a closed
            # loop is logged as destroyed by whichever thread later collects it.
            try:
                self.run(_cancel_the_rest(), timeout=30)
            finally:  # a task that will not end must not leave the loop running
                self.loop.call_soon_threadsafe(self.loop.stop)
                self._thread.join(10)
                self.loop.close()

    async def _up(self) -> None:
        tmp = self.tmp
        if self.backend == "embedded":
            bus = event_settings(block_seconds=0.5)
            memory_db = f"sqlite+aiosqlite:///{tmp}/memory.db"
            registry_db = f"sqlite+aiosqlite:///{tmp}/registry.db"
        else:
            assert self.redis_url is not None
            prefix = f"soorma-test-ui-{uuid.uuid4().hex[:10]}"
            self._exit.push_async_callback(self._drop_redis_keys, prefix)
            bus = redis_event_settings(self.redis_url, prefix)
            # Memory, registry and tracker share one fresh database (no table overlaps).
            memory_db = registry_db = self.database_url = await self._fresh_database()
        events = await self._exit.enter_async_context(serve(create_event_app(bus)))
        memory = await self._exit.enter_async_context(
            serve(create_memory_app(memory_settings(memory_db, tmp)))
        )
        registry = await self._exit.enter_async_context(
            serve(create_registry_app(registry_settings(registry_db, tmp)))
        )
        self.urls = {"events": events.url, "memory": memory.url, "registry": registry.url}
        self.urls["tracker"] = await self.add_tracker()

    async def add_tracker(self, **overrides: Any) -> str:
        """Serve a tracker on the stack's database (more than one: replicas); its URL."""
        settings = TrackerSettings(
            **{
                "tracker_database_url": self.database_url,
                "data_dir": self.tmp,
                "event_service_url": self.urls["events"],
                "memory_url": self.urls["memory"],
                "registry_url": self.urls["registry"],
                "tracker_stream_poll_seconds": 0.1,
                "tracker_stream_settle_seconds": 0.3,
                **overrides,
            }
        )
        server = await self._exit.enter_async_context(serve(create_tracker_app(settings)))
        return server.url

    async def _fresh_database(self) -> str:
        """Create a PostgreSQL database for this run; it is dropped when the stack stops."""
        import asyncpg

        assert self.postgres_server is not None
        plain = self.postgres_server.replace("postgresql+asyncpg://", "postgresql://")
        name = f"soorma_ui_{uuid.uuid4().hex[:12]}"
        admin = await asyncpg.connect(plain)
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
        finally:
            await admin.close()

        async def drop() -> None:
            admin = await asyncpg.connect(plain)
            try:
                await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            finally:
                await admin.close()

        self._exit.push_async_callback(drop)
        base, _, _ = self.postgres_server.rpartition("/")
        return f"{base}/{name}"

    async def _drop_redis_keys(self, prefix: str) -> None:
        import redis.asyncio as redis

        client = redis.Redis.from_url(str(self.redis_url))
        try:
            keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
            if keys:
                await client.delete(*keys)
        finally:
            await client.aclose()

    # -- helpers -------------------------------------------------------------------

    def run(self, coro: Awaitable[T], timeout: float = 60) -> T:
        """Run ``coro`` on the stack's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)  # type: ignore[arg-type]

    def call(self, fn: Callable[[], Any]) -> None:
        """Call ``fn`` on the stack's loop (e.g. ``gate.set``)."""
        self.loop.call_soon_threadsafe(fn)

    def settings(self, tenant: str) -> PlatformSettings:
        return PlatformSettings(
            event_service_url=self.urls["events"],
            memory_url=self.urls["memory"],
            registry_url=self.urls["registry"],
            tracker_url=self.urls["tracker"],
            tenant_id=tenant,
        )

    def context(self, tenant: str) -> PlatformContext:
        """A platform context for ``tenant`` (build it on the stack's loop: see :meth:`run`)."""
        return PlatformContext.from_env(settings=self.settings(tenant))

    def agent_context(self, name: str, tenant: str) -> PlatformContext:
        """An agent's context: its events' ``source`` is its name, as when it runs alone."""
        context = self.context(tenant)
        context.bus.source = name
        return context

    async def started(self, agent: Any) -> Any:
        """Start ``agent`` now and stop it (and close its context) when the stack stops."""
        await agent.start()

        async def stop() -> None:
            await agent.stop()
            await agent.context.close()

        self._exit.push_async_callback(stop)
        return agent
