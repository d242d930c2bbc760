"""``soorma agents list`` against real event, registry and tracker services, with an agent
connected through the SDK (the event service on each backend; registry and tracker on
SQLite)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import pytest_asyncio

from event_service.settings import Settings as EventSettings
from registry_service import create_app as create_registry_app
from soorma import Agent, AgentOptions, PlatformContext, PlatformSettings
from soorma._cli_agents import ago
from soorma.cli import main
from soorma_common.registry import AgentCapability, AgentDefinition, EventDefinition
from testsupport.server import LiveServer, serve
from testsupport.services import registry_settings
from tracker_service import create_app as create_tracker_app
from tracker_service.settings import Settings as TrackerSettings


@pytest_asyncio.fixture
async def urls(
    event_service: LiveServer, event_settings: EventSettings, tmp_path: Any
) -> AsyncIterator[dict[str, str]]:
    db = f"sqlite+aiosqlite:///{tmp_path}/platform.db"
    async with AsyncExitStack() as exits:
        registry = await exits.enter_async_context(
            serve(create_registry_app(registry_settings(db, tmp_path)))
        )
        tracker = await exits.enter_async_context(
            serve(
                create_tracker_app(
                    TrackerSettings(
                        tracker_database_url=db,
                        event_service_url=event_service.url,
                        registry_url=registry.url,
                        tracker_projector=False,
                        tracker_timeouts=False,
                    )
                )
            )
        )
        yield {"events": event_service.url, "registry": registry.url, "tracker": tracker.url}


def platform(urls: dict[str, str], tenant: str = "acme") -> PlatformContext:
    return PlatformContext.from_env(
        settings=PlatformSettings(
            event_service_url=urls["events"],
            registry_url=urls["registry"],
            tracker_url=urls["tracker"],
            tenant_id=tenant,
        )
    )


async def cli(monkeypatch: pytest.MonkeyPatch, urls: dict[str, str], *argv: str) -> int:
    monkeypatch.setenv("SOORMA_TRACKER_URL", urls["tracker"])
    monkeypatch.setenv("SOORMA_TENANT_ID", "acme")

    def call() -> int:
        try:
            main(list(argv))
        except SystemExit as exc:
            return int(exc.code or 0)
        return 0

    return await asyncio.to_thread(call)


@pytest.mark.asyncio
async def test_agents_list_shows_each_agent_its_events_last_seen_and_lag(
    urls: dict[str, str], capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = asyncio.Event()
    agent = Agent(
        name="invoicer",
        capabilities=[
            AgentCapability(
                task_name="invoice",
                consumed_event=EventDefinition(event_name="invoice.requested"),
            )
        ],
        options=AgentOptions(max_concurrency=1, prefetch=1),
        context=platform(urls),
    )

    @agent.on_event(topic="action-requests", event_type="invoice.requested")
    async def invoice(event: Any, context: PlatformContext) -> None:
        await gate.wait()

    await agent.start()
    try:
        async with platform(urls) as caller:
            await caller.registry.register(
                AgentDefinition(agent_id="gone-1", name="archiver", ttl_seconds=1)
            )
            for n in range(3):
                await caller.bus.publish("action-requests", "invoice.requested", {"n": n})

        async def behind() -> dict[str, Any] | None:
            assert await cli(monkeypatch, urls, "agents", "list", "--json") == 0
            listing = json.loads(capsys.readouterr().out)
            rows = {a["name"]: a for a in listing["agents"]}
            group = rows["invoicer"]["consumer_group"]
            done = group and group["lag"] == 2 and rows["archiver"]["stale"]
            return listing if done else None

        async with asyncio.timeout(20):
            while True:
                if await behind():
                    break
                await asyncio.sleep(0.05)

        assert await cli(monkeypatch, urls, "agents", "list", "--color", "never") == 0
        lines = capsys.readouterr().out.splitlines()
        header, *rows = lines
        assert header.split() == [
            "AGENT",
            "STATUS",
            "LAST",
            "SEEN",
            "LAG",
            "PENDING",
            "CAPABILITIES",
            "CONSUMES",
        ]
        archiver, invoicer = rows  # ordered by name
        assert archiver.split()[:3] == ["archiver", "(gone-1)", "stale"]
        cells = invoicer.split()
        assert cells[1] == "live" and cells[2].endswith("s")  # e.g. "0s ago"
        assert cells[4:] == ["2", "1", "invoice", "invoice.requested"]
        # Columns line up under their headers.
        assert invoicer.index(" 2 ") + 1 == header.index("LAG")

        # Stale agents stand out in colour; --live leaves them out.
        assert await cli(monkeypatch, urls, "agents", "list", "--color", "always") == 0
        coloured = capsys.readouterr().out.splitlines()
        assert coloured[1].startswith("\033[31m") and "archiver" in coloured[1]
        assert await cli(monkeypatch, urls, "agents", "list", "--live") == 0
        assert "archiver" not in capsys.readouterr().out
    finally:
        gate.set()
        await agent.stop()
        await agent.context.close()


@pytest.mark.asyncio
async def test_agents_list_without_agents_says_how_to_start_one(
    urls: dict[str, str], capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert await cli(monkeypatch, urls, "agents", "list") == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert "soorma init" in err and "soorma dev" in err


@pytest.mark.asyncio
async def test_agents_list_with_no_tracker_fails_in_one_line(
    capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = await cli(monkeypatch, {"tracker": "http://127.0.0.1:9"}, "agents", "list")
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("soorma: ") and len(err.strip().splitlines()) == 1


def test_ago_reads_like_a_person_would_say_it() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert ago(now - timedelta(seconds=4), now) == "4s ago"
    assert ago(now - timedelta(minutes=3, seconds=5), now) == "3m ago"
    assert ago(now - timedelta(hours=2), now) == "2h ago"
    assert ago(now - timedelta(days=5), now) == "5d ago"
    assert ago(None, now) == "never"
