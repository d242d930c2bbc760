"""The platform under test for the tracker: event + memory services and tracker replicas.

Imported by conftest.py and the test modules (a uniquely named module).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from event_service import create_app as create_event_app
from memory_service import create_app as create_memory_app
from testsupport.server import LiveServer, serve
from testsupport.services import event_settings, memory_settings, redis_event_settings
from tracker_service import create_app as create_tracker_app
from tracker_service.settings import Settings as TrackerSettings

T = TypeVar("T")
WAIT = 20.0


@dataclass
class Stack:
    events: LiveServer
    memory: LiveServer
    trackers: list[LiveServer]
    db_url: str
    backends: dict[str, str]
    client: httpx.AsyncClient
    exits: AsyncExitStack
    tracker_overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def tracker(self) -> LiveServer:
        return self.trackers[0]

    def tracker_settings(self, **overrides: Any) -> TrackerSettings:
        values: dict[str, Any] = {
            "tracker_database_url": self.db_url, "event_service_url": self.events.url,
            "memory_url": self.memory.url, "tracker_visibility_timeout": 2.0,
            "tracker_timeout_interval_seconds": 0.1, "tracker_stream_poll_seconds": 0.1,
            **self.tracker_overrides, **overrides,
        }
        return TrackerSettings(**values)

    async def add_tracker(self, **overrides: Any) -> LiveServer:
        server = await self.exits.enter_async_context(
            serve(create_tracker_app(self.tracker_settings(**overrides))))
        self.trackers.append(server)
        return server

    async def publish(self, event: dict[str, Any], *, tenant: str = "acme") -> str:
        r = await self.client.post(f"{self.events.url}/v1/events/publish",
                                   json={"event": event}, headers={"X-Tenant-ID": tenant})
        assert r.status_code == 200, r.text
        return str(r.json()["event_id"])

    async def publish_batch(self, batch: list[dict[str, Any]], *, tenant: str = "acme") -> None:
        r = await self.client.post(f"{self.events.url}/v1/events/publish-batch",
                                   json={"events": batch}, headers={"X-Tenant-ID": tenant})
        assert r.status_code == 200, r.text

    async def get(self, path: str, *, tenant: str = "acme", tracker: LiveServer | None = None,
                  **params: Any) -> httpx.Response:
        base = (tracker or self.tracker).url
        return await self.client.get(f"{base}/v1/tracker{path}", params=params,
                                     headers={"X-Tenant-ID": tenant})

    async def ok(self, path: str, *, tenant: str = "acme", **params: Any) -> Any:
        r = await self.get(path, tenant=tenant, **params)
        assert r.status_code == 200, r.text
        return r.json()

    async def until(self, probe: Callable[[], Awaitable[T | None]], within: float = WAIT) -> T:
        """Poll ``probe`` until it returns something truthy."""
        async with asyncio.timeout(within):
            while True:
                found = await probe()
                if found:
                    return found
                await asyncio.sleep(0.05)

    async def plan_when(self, plan_id: str, check: Callable[[dict[str, Any]], bool],
                        *, tenant: str = "acme", within: float = WAIT) -> dict[str, Any]:
        async def probe() -> dict[str, Any] | None:
            r = await self.get(f"/plans/{plan_id}", tenant=tenant, context="false")
            if r.status_code == 200 and check(r.json()):
                return dict(r.json())
            return None
        return await self.until(probe, within)


def event_service_settings(backends: dict[str, str]) -> Any:
    if backends["events"] == "redis":
        return redis_event_settings(backends["redis_url"], backends["redis_prefix"])
    return event_settings()


@asynccontextmanager
async def start_stack(backends: dict[str, str], tmp_path: Any, *, trackers: int = 1,
                      **tracker_overrides: Any) -> AsyncIterator[Stack]:
    async with AsyncExitStack() as exits:
        events = await exits.enter_async_context(
            serve(create_event_app(event_service_settings(backends))))
        memory = await exits.enter_async_context(serve(create_memory_app(
            memory_settings(f"sqlite+aiosqlite:///{tmp_path}/memory.db", tmp_path))))
        client = await exits.enter_async_context(httpx.AsyncClient(timeout=15))
        stack = Stack(events=events, memory=memory, trackers=[], db_url=backends["db"],
                      backends=backends, client=client, exits=exits,
                      tracker_overrides=tracker_overrides)
        for _ in range(trackers):
            await stack.add_tracker()
        yield stack
