"""The real platform for the UI's browser tests, on an event loop in a background thread.

Selenium blocks; the services must keep serving while it does. So the event, memory,
registry and tracker services (each under real uvicorn on a free port) and the agents
run on their own loop in a thread, and the (synchronous) tests hand coroutines to it
with :meth:`Stack.run`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from event_service import create_app as create_event_app
from memory_service import create_app as create_memory_app
from registry_service import create_app as create_registry_app
from soorma import PlatformContext, PlatformSettings
from testsupport.server import serve
from testsupport.services import event_settings, memory_settings, registry_settings
from tracker_service import create_app as create_tracker_app
from tracker_service.settings import Settings as TrackerSettings

T = TypeVar("T")


class Stack:
    """Event, memory, registry and tracker services plus whatever agents a test starts."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
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
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()

    async def _up(self) -> None:
        tmp = self.tmp
        events = await self._exit.enter_async_context(
            serve(create_event_app(event_settings(block_seconds=0.5))))
        memory = await self._exit.enter_async_context(serve(create_memory_app(
            memory_settings(f"sqlite+aiosqlite:///{tmp}/memory.db", tmp))))
        registry = await self._exit.enter_async_context(serve(create_registry_app(
            registry_settings(f"sqlite+aiosqlite:///{tmp}/registry.db", tmp))))
        self.urls = {"events": events.url, "memory": memory.url, "registry": registry.url}
        self.urls["tracker"] = await self.add_tracker()

    async def add_tracker(self, **overrides: Any) -> str:
        """Serve a tracker on the stack's database (more than one: replicas); its URL."""
        settings = TrackerSettings(**{
            "tracker_database_url": f"sqlite+aiosqlite:///{self.tmp}/tracker.db",
            "data_dir": self.tmp, "event_service_url": self.urls["events"],
            "memory_url": self.urls["memory"], "tracker_stream_poll_seconds": 0.1,
            **overrides,
        })
        server = await self._exit.enter_async_context(serve(create_tracker_app(settings)))
        return server.url

    # -- helpers -------------------------------------------------------------------

    def run(self, coro: Awaitable[T], timeout: float = 60) -> T:
        """Run ``coro`` on the stack's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)  # type: ignore[arg-type]

    def call(self, fn: Callable[[], Any]) -> None:
        """Call ``fn`` on the stack's loop (e.g. ``gate.set``)."""
        self.loop.call_soon_threadsafe(fn)

    def settings(self, tenant: str) -> PlatformSettings:
        return PlatformSettings(
            event_service_url=self.urls["events"], memory_url=self.urls["memory"],
            registry_url=self.urls["registry"], tracker_url=self.urls["tracker"],
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
