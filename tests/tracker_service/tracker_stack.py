"""The platform under test for the tracker: event + memory services and tracker replicas.

Imported by conftest.py and the test modules (a uniquely named module).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from event_service import create_app as create_event_app
from memory_service import create_app as create_memory_app
from soorma.client import verified_tls
from soorma_common.clock import SYSTEM_CLOCK, Clock
from testsupport import forkserver
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
    # What the in-process trackers' timeout loops take for time.
    clock: Clock = SYSTEM_CLOCK

    @property
    def tracker(self) -> LiveServer:
        return self.trackers[0]

    def tracker_settings(self, **overrides: Any) -> TrackerSettings:
        values: dict[str, Any] = {
            "tracker_database_url": self.db_url,
            "event_service_url": self.events.url,
            "memory_url": self.memory.url,
            "tracker_visibility_timeout": 2.0,
            "tracker_timeout_interval_seconds": 0.1,
            "tracker_stream_poll_seconds": 0.1,
            "tracker_stream_settle_seconds": 0.3,
            **self.tracker_overrides,
            **overrides,
        }
        return TrackerSettings(**values)

    async def add_tracker(self, **overrides: Any) -> LiveServer:
        server = await self.exits.enter_async_context(
            serve(create_tracker_app(self.tracker_settings(**overrides), clock=self.clock))
        )
        self.trackers.append(server)
        return server

    async def publish(self, event: dict[str, Any], *, tenant: str = "acme") -> str:
        r = await self.client.post(
            f"{self.events.url}/v1/events/publish",
            json={"event": event},
            headers={"X-Tenant-ID": tenant},
        )
        assert r.status_code == 200, r.text
        return str(r.json()["event_id"])

    async def publish_batch(self, batch: list[dict[str, Any]], *, tenant: str = "acme") -> None:
        r = await self.client.post(
            f"{self.events.url}/v1/events/publish-batch",
            json={"events": batch},
            headers={"X-Tenant-ID": tenant},
        )
        assert r.status_code == 200, r.text

    async def get(
        self, path: str, *, tenant: str = "acme", tracker: LiveServer | None = None, **params: Any
    ) -> httpx.Response:
        base = (tracker or self.tracker).url
        return await self.client.get(
            f"{base}/v1/tracker{path}", params=params, headers={"X-Tenant-ID": tenant}
        )

    async def ok(self, path: str, *, tenant: str = "acme", **params: Any) -> Any:
        r = await self.get(path, tenant=tenant, **params)
        assert r.status_code == 200, r.text
        return r.json()

    async def until(self, probe: Callable[[], Awaitable[T | None]], within: float = WAIT) -> T:
        """Poll ``probe`` until it returns something truthy."""
        return await until(probe, within)

    async def when(
        self,
        path: str,
        check: Callable[[dict[str, Any]], bool],
        *,
        tenant: str = "acme",
        within: float = WAIT,
        **params: Any,
    ) -> dict[str, Any]:
        """The body of ``GET path`` once it answers 200 and ``check`` holds for it."""

        async def probe() -> dict[str, Any] | None:
            r = await self.get(path, tenant=tenant, **params)
            if r.status_code == 200 and check(r.json()):
                return dict(r.json())
            return None

        return await self.until(probe, within)

    async def plan_when(
        self, plan_id: str, check: Callable[[dict[str, Any]], bool], **kw: Any
    ) -> dict[str, Any]:
        return await self.when(f"/plans/{plan_id}", check, context="false", **kw)

    async def task_when(
        self, task_id: str, check: Callable[[dict[str, Any]], bool], **kw: Any
    ) -> dict[str, Any]:
        """The task's detail once ``check`` holds for it (see :func:`first_wait`)."""
        return await self.when(f"/tasks/{task_id}", check, **kw)


def first_wait(status: str) -> Callable[[dict[str, Any]], bool]:
    """A check for :meth:`Stack.task_when`: the task's first wait is in ``status``."""
    return lambda task: bool(task["waits"]) and task["waits"][0]["status"] == status


async def until(probe: Callable[[], Awaitable[T | None]], within: float = WAIT) -> T:
    """Poll ``probe`` until it returns something truthy (bounded by ``within``)."""
    async with asyncio.timeout(within):
        while True:
            found = await probe()
            if found:
                return found
            await asyncio.sleep(0.05)


def event_service_settings(backends: dict[str, str]) -> Any:
    if backends["events"] == "redis":
        return redis_event_settings(backends["redis_url"], backends["redis_prefix"])
    return event_settings()


@asynccontextmanager
async def start_stack(
    backends: dict[str, str],
    tmp_path: Any,
    *,
    trackers: int = 1,
    clock: Clock = SYSTEM_CLOCK,
    **tracker_overrides: Any,
) -> AsyncIterator[Stack]:
    async with AsyncExitStack() as exits:
        events = await exits.enter_async_context(
            serve(create_event_app(event_service_settings(backends)))
        )
        memory = await exits.enter_async_context(
            serve(
                create_memory_app(
                    memory_settings(f"sqlite+aiosqlite:///{tmp_path}/memory.db", tmp_path)
                )
            )
        )
        client = await exits.enter_async_context(
            httpx.AsyncClient(verify=verified_tls(), timeout=15)
        )
        stack = Stack(
            events=events,
            memory=memory,
            trackers=[],
            db_url=backends["db"],
            backends=backends,
            client=client,
            exits=exits,
            tracker_overrides=tracker_overrides,
            clock=clock,
        )
        for _ in range(trackers):
            await stack.add_tracker()
        yield stack


class Listener:
    """Collects a tenant's events of some types from the bus, in the background."""

    def __init__(
        self, stack: Stack, types: list[str], *, tenant: str = "acme", topic: str = "system-events"
    ) -> None:
        from soorma import PlatformContext, PlatformSettings

        self._context = PlatformContext.from_env(
            settings=PlatformSettings(event_service_url=stack.events.url, tenant_id=tenant)
        )
        self._sub = self._context.bus.subscribe(topic, event_types=types)
        self.events: list[Any] = []
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Listener:
        await self._sub.__aenter__()
        await self._sub.wait_ready(10)

        async def pump() -> None:
            async for event in self._sub:
                self.events.append(event)

        self._task = asyncio.create_task(pump())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._sub.__aexit__(None, None, None)
        await self._context.close()

    async def wait_for(self, n: int, within: float = WAIT) -> list[Any]:
        async def enough() -> bool:
            return len(self.events) >= n

        await until(enough, within)
        return list(self.events)


class TrackerProcess:
    """A tracker in a subprocess (for SIGKILL), as deployed: uvicorn with the app factory."""

    def __init__(self, stack: Stack, port: int, **env: str) -> None:
        self.stack = stack
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.env = {
            **{
                k: v
                for k, v in os.environ.items()
                if k not in {"SOORMA_DATABASE_URL", "SOORMA_REDIS_URL"}
            },
            "SOORMA_TRACKER_DATABASE_URL": stack.db_url,
            "SOORMA_EVENT_SERVICE_URL": stack.events.url,
            "SOORMA_MEMORY_URL": stack.memory.url,
            "SOORMA_TRACKER_VISIBILITY_TIMEOUT": "2",
            "SOORMA_TRACKER_TIMEOUT_INTERVAL_SECONDS": "0.1",
            "SOORMA_LOG_LEVEL": "WARNING",
            **env,
        }
        self.proc: forkserver.ForkedProcess | None = None

    async def start(self) -> None:
        """Fork the tracker from the fork server (the libraries imported once per test
        process); its own modules and settings load in the child, from its env."""
        self.proc = await forkserver.ForkedProcess.start(
            sys.executable,
            "-m",
            "uvicorn",
            "--factory",
            "tracker_service.app:create_app",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "warning",
            env=self.env,
        )
        self.proc.keep_output()
        async with asyncio.timeout(30):
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    r = await self.stack.client.get(f"{self.url}/ready")
                    if r.status_code == 200:
                        return
                if self.proc.returncode is not None:
                    await self.proc.wait()
                    raise AssertionError(f"tracker exited at start:\n{self.proc.output}")
                await asyncio.sleep(0.1)

    async def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            try:
                async with asyncio.timeout(10):
                    await self.proc.wait()
            except TimeoutError:
                await self.kill()


def agent_context(stack: Stack, **identity: Any) -> Any:
    """A :class:`soorma.PlatformContext` on ``stack`` as ``identity`` (tenant_id=...).

    The stack runs no registry: the context neither registers nor validates payloads.
    """
    from soorma import PlatformContext, PlatformSettings

    context = PlatformContext.from_env(
        settings=PlatformSettings(
            event_service_url=stack.events.url,
            memory_url=stack.memory.url,
            tracker_url=stack.tracker.url,
            **identity,
        )
    )
    context.registry = None
    context.bus.payload_validator = None
    return context


async def run_cli(*argv: str) -> int:
    """``soorma ARGV`` in this process (off the event loop); its exit code."""
    from soorma.cli import main

    def call() -> int:
        try:
            main(list(argv))
        except SystemExit as exc:
            return int(exc.code or 0)
        return 0

    return await asyncio.to_thread(call)
