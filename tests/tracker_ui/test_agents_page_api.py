"""``GET /v1/tracker/agents``: registered agents joined with their consumer group's lag,
against real event, registry and tracker services (in-process log + SQLite, and Redis +
PostgreSQL when configured), with agents connected through the SDK."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx
import pytest
import pytest_asyncio

from event_service import create_app as create_event_app
from registry_service import create_app as create_registry_app
from soorma import Agent, AgentOptions, PlatformContext, PlatformSettings
from soorma.client import verified_tls
from soorma_common.registry import AgentCapability, AgentDefinition, EventDefinition
from testsupport.server import serve
from testsupport.services import (
    event_settings,
    in_process,
    redis_event_settings,
    registry_settings,
)
from tracker_service import create_app as create_tracker_app
from tracker_service.settings import Settings as TrackerSettings

pytestmark = pytest.mark.asyncio

T = TypeVar("T")
ACME, GLOBEX = "acme", "globex"


@dataclass
class Platform:
    urls: dict[str, str]
    client: httpx.AsyncClient
    exits: AsyncExitStack

    def context(self, tenant: str, source: str = "test") -> PlatformContext:
        context = PlatformContext.from_env(
            settings=PlatformSettings(
                event_service_url=self.urls["events"],
                registry_url=self.urls["registry"],
                memory_url=self.urls["events"],  # unused
                tracker_url=self.urls["tracker"],
                tenant_id=tenant,
            )
        )
        context.bus.source = source
        return context

    async def agents(self, tenant: str = ACME, **params: Any) -> dict[str, Any]:
        r = await self.client.get(
            f"{self.urls['tracker']}/v1/tracker/agents",
            params=params,
            headers={"X-Tenant-ID": tenant},
        )
        assert r.status_code == 200, r.text
        return dict(r.json())

    async def tracker(self, **overrides: Any) -> str:
        """Another tracker (API only) on the same services, ``overrides`` applied."""
        settings = TrackerSettings(
            **{
                "tracker_database_url": self.urls["tracker_db"],
                "event_service_url": self.urls["events"],
                "registry_url": self.urls["registry"],
                "tracker_projector": False,
                "tracker_timeouts": False,
                **overrides,
            }
        )
        server = await self.exits.enter_async_context(serve(create_tracker_app(settings)))
        return server.url


@pytest.fixture(
    params=[
        "sqlite-memory",
        pytest.param("postgres-redis", marks=[pytest.mark.postgres, pytest.mark.redis]),
    ]
)
def backends(request: pytest.FixtureRequest) -> dict[str, str]:
    if request.param == "sqlite-memory":
        return {"db": request.getfixturevalue("sqlite_url")}
    return {
        "db": request.getfixturevalue("postgres_url"),
        "redis_url": request.getfixturevalue("redis_url"),
        "redis_prefix": request.getfixturevalue("redis_prefix"),
    }


@pytest_asyncio.fixture
async def platform(backends: dict[str, str], tmp_path: Any) -> AsyncIterator[Platform]:
    if "redis_url" in backends:
        bus = redis_event_settings(backends["redis_url"], backends["redis_prefix"])
    else:
        bus = event_settings(block_seconds=0.5)
    async with AsyncExitStack() as exits:
        events = await exits.enter_async_context(serve(create_event_app(bus)))
        registry = await exits.enter_async_context(
            serve(create_registry_app(registry_settings(backends["db"], tmp_path)))
        )
        client = await exits.enter_async_context(
            httpx.AsyncClient(verify=verified_tls(), timeout=15)
        )
        urls = {"events": events.url, "registry": registry.url, "tracker_db": backends["db"]}
        platform = Platform(urls, client, exits)
        urls["tracker"] = await platform.tracker()
        yield platform


async def until(probe: Callable[[], Awaitable[T | None]], within: float = 20.0) -> T:
    async with asyncio.timeout(within):
        while True:
            found = await probe()
            if found:
                return found
            await asyncio.sleep(0.05)


def greeter(platform: Platform, gate: asyncio.Event) -> Agent:
    """An agent whose handler holds each event until ``gate`` opens, one at a time."""
    agent = Agent(
        name="greeter",
        description="says hello",
        capabilities=[
            AgentCapability(
                task_name="greet",
                consumed_event=EventDefinition(event_name="greet.requested"),
                produced_events=[EventDefinition(event_name="greet.completed")],
            )
        ],
        events_consumed=["farewell.requested"],
        options=AgentOptions(max_concurrency=1, prefetch=1),
        context=platform.context(ACME, "greeter"),
    )

    @agent.on_event(topic="action-requests", event_type="greet.requested")
    async def greet(event: Any, context: PlatformContext) -> None:
        await gate.wait()

    return agent


def only(listing: dict[str, Any], name: str) -> dict[str, Any]:
    (row,) = [a for a in listing["agents"] if a["name"] == name]
    return dict(row)


async def test_a_connected_agent_shows_its_events_heartbeat_and_lag(platform: Platform) -> None:
    gate = asyncio.Event()
    agent = greeter(platform, gate)
    await agent.start()
    try:
        listing = await platform.agents()
        row = only(listing, "greeter")
        assert row["capabilities"] == ["greet"]
        assert row["consumes"] == ["greet.requested", "farewell.requested"]
        assert row["produces"] == ["greet.completed"]
        assert row["topics"] == ["action-requests"]
        assert row["stale"] is False
        seen = datetime.fromisoformat(row["last_seen"])
        assert seen <= datetime.fromisoformat(listing["checked_at"])
        assert row["consumer_group"]["group"] == "greeter"
        assert (row["consumer_group"]["lag"], row["consumer_group"]["pending"]) == (0, 0)
        assert listing["errors"] == [] and listing["lag_complete"] is True

        async with platform.context(ACME) as caller:
            for n in range(5):
                await caller.bus.publish("action-requests", "greet.requested", {"n": n})

        async def behind() -> dict[str, Any] | None:
            group = only(await platform.agents(), "greeter")["consumer_group"]
            return group if group["lag"] + group["pending"] == 5 and group["pending"] else None

        # One event is held by the handler (prefetch 1): four wait in the group.
        group = await until(behind)
        assert (group["lag"], group["pending"]) == (4, 1)
        (topic,) = group["topics"]
        assert (topic["topic"], topic["lag"], topic["pending"]) == ("action-requests", 4, 1)
        assert group["last_delivered_at"] is not None

        # Another tenant sees neither the agent nor anything of its group.
        theirs = await platform.agents(GLOBEX)
        assert theirs["agents"] == [] and theirs["other_groups"] == []

        gate.set()

        async def caught_up() -> bool:
            group = only(await platform.agents(), "greeter")["consumer_group"]
            return group["lag"] == 0 and group["pending"] == 0

        await until(caught_up)
    finally:
        gate.set()
        await agent.stop()
        await agent.context.close()
    # A graceful stop deregisters: the agent is gone, its (empty) group stays.
    listing = await platform.agents()
    assert listing["agents"] == []
    assert [g["group"] for g in listing["other_groups"]] == ["greeter"]


async def test_an_agent_with_a_group_of_its_own_shows_that_groups_lag(platform: Platform) -> None:
    gate = asyncio.Event()
    agent = Agent(
        name="mailer",
        options=AgentOptions(group="outbox-readers"),
        context=platform.context(ACME, "mailer"),
    )

    @agent.on_event(topic="action-requests", event_type="mail.requested")
    async def mail(event: Any, context: PlatformContext) -> None:
        await gate.wait()  # holds every event it takes

    await agent.start()
    try:
        async with platform.context(ACME) as caller:
            for n in range(3):
                await caller.bus.publish("action-requests", "mail.requested", {"n": n})

        async def held() -> dict[str, Any] | None:
            group = only(await platform.agents(), "mailer")["consumer_group"]
            return group if group and group["lag"] + group["pending"] == 3 else None

        group = await until(held)
        assert group["group"] == "outbox-readers"
        listing = await platform.agents()
        assert "outbox-readers" not in [g["group"] for g in listing["other_groups"]]
    finally:
        gate.set()
        await agent.stop()
        await agent.context.close()


async def test_an_agent_that_stops_heartbeating_goes_stale(platform: Platform) -> None:
    async with platform.context(ACME) as context:
        # Registered as an agent process does, which then dies: no heartbeat follows.
        await context.registry.register(
            AgentDefinition(agent_id="ghost-1", name="ghost", ttl_seconds=1)
        )
        first = only(await platform.agents(), "ghost")
        assert first["stale"] is False

        async def stale() -> dict[str, Any] | None:
            row = only(await platform.agents(), "ghost")
            return row if row["stale"] else None

        row = await until(stale)
        assert row["expires_at"] is not None
        assert datetime.fromisoformat(row["expires_at"]) <= datetime.now(UTC)
        assert row["consumer_group"] is None  # it never subscribed
        # Only live agents, when asked.
        assert (await platform.agents(stale="false"))["agents"] == []


async def test_a_group_without_a_registered_agent_is_listed_with_its_lag(
    platform: Platform,
) -> None:
    async with platform.context(ACME) as context:
        subscription = context.bus.subscribe(["task-events"], group="orphan-worker")
        await subscription.wait_ready()
        await subscription.close()
        for n in range(3):
            await context.bus.publish("task-events", "task.progress", {"n": n})
    listing = await platform.agents()
    assert listing["agents"] == []
    (orphan,) = listing["other_groups"]
    assert (orphan["group"], orphan["lag"], orphan["pending"]) == ("orphan-worker", 3, 0)
    assert (await platform.agents(GLOBEX))["other_groups"] == []


async def test_an_unreachable_event_service_leaves_the_lag_unknown(platform: Platform) -> None:
    async with platform.context(ACME) as context:
        await context.registry.register(AgentDefinition(agent_id="solo-1", name="solo"))
    blind = await platform.tracker(event_service_url="http://127.0.0.1:9")
    r = await platform.client.get(f"{blind}/v1/tracker/agents", headers={"X-Tenant-ID": ACME})
    assert r.status_code == 200, r.text
    listing = r.json()
    assert only(listing, "solo")["consumer_group"] is None
    assert listing["lag_complete"] is False
    (error,) = listing["errors"]
    assert error.startswith("event service:")


@pytest.mark.parametrize("where", ["nothing", "not a registry"])
async def test_a_registry_that_cannot_be_read_answers_503(platform: Platform, where: str) -> None:
    # Nothing listening, or another service on the registry's address (it answers 404).
    url = "http://127.0.0.1:9" if where == "nothing" else platform.urls["events"]
    blind = await platform.tracker(registry_url=url)
    r = await platform.client.get(f"{blind}/v1/tracker/agents", headers={"X-Tenant-ID": ACME})
    assert r.status_code == 503, r.text
    error = r.json()["error"]
    assert error["code"] == "service_unavailable"
    if where == "not a registry":
        assert error["message"].startswith(f"registry at {url}")


async def test_the_agents_page_is_served_with_the_uis_strict_csp(tmp_path: Any) -> None:
    settings = TrackerSettings(
        tracker_database_url=f"sqlite+aiosqlite:///{tmp_path}/tracker.db",
        data_dir=tmp_path,
        tracker_projector=False,
        tracker_timeouts=False,
    )
    async with in_process(create_tracker_app(settings)) as client:
        html = await client.get("/ui/agents")
        assert html.status_code == 200 and "assets/agents.js" in html.text
        assert "script-src 'self'" in html.headers["content-security-policy"]
        slash = await client.get("/ui/agents/", follow_redirects=True)
        assert slash.status_code == 200 and str(slash.url).endswith("/ui/agents")
        script = await client.get("/ui/assets/agents.js")
        assert script.status_code == 200 and "/agents" in script.text
