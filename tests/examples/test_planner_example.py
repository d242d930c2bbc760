"""examples/04-planner-state-machine as real processes against real services.

Every branch of the research machine with the agents under ``soorma run`` (as the README
starts them), and a planner killed mid-plan (SIGKILL) whose successor continues the plan
from the memory service (the scripts run on their own, ``python workers.py searcher``).
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

import memory_service
import registry_service
from event_service import create_app as create_event_app
from event_service.settings import Settings as EventSettings
from memory_service.settings import Settings as MemorySettings
from soorma import Agent, PlatformContext, PlatformSettings
from testsupport.server import serve

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sdk"))
from sdk_helpers import Proc, soorma_run, subprocess_env

pytestmark = pytest.mark.asyncio

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "04-planner-state-machine"


@pytest_asyncio.fixture
async def services(tmp_path: Any) -> AsyncIterator[dict[str, str]]:
    async with (
        serve(create_event_app(EventSettings(event_backend="memory"))) as events,
        serve(
            memory_service.create_app(
                MemorySettings(
                    memory_database_url=f"sqlite+aiosqlite:///{tmp_path}/memory.db",
                    data_dir=tmp_path,
                )
            )
        ) as memory,
        serve(
            registry_service.create_app(
                registry_service.Settings(
                    registry_database_url=f"sqlite+aiosqlite:///{tmp_path}/registry.db",
                    data_dir=tmp_path,
                )
            )
        ) as registry,
    ):
        yield {
            "SOORMA_EVENT_SERVICE_URL": events.url,
            "SOORMA_MEMORY_URL": memory.url,
            "SOORMA_REGISTRY_URL": registry.url,
        }


async def start_planner(env: dict[str, str]) -> Proc:
    proc = await Proc.start(sys.executable, str(EXAMPLE / "planner.py"), env=env)
    await proc.wait_for("agent research-planner ready")
    return proc


async def ask(env: dict[str, str], topic: str) -> tuple[int, str]:
    client = await Proc.start(sys.executable, str(EXAMPLE / "client.py"), topic, env=env)
    code = await client.wait(60)
    return code, client.output


async def test_client_reaches_every_branch_of_the_research_machine(services):
    env = subprocess_env(**services)
    # As the README runs them: the planner and the three workers under one `soorma run`.
    agents = await soorma_run(str(EXAMPLE / "planner.py"), str(EXAMPLE / "workers.py"), env=env)
    try:
        running = next(line for line in agents.lines if "soorma run: running" in line)
        for name in ("research-planner", "web-searcher", "content-analyzer", "user-stand-in"):
            assert running.count(f"{name} (") == 1, running
        results = await asyncio.gather(
            ask(env, "owls"), ask(env, "flaky"), ask(env, "obscure"), ask(env, "broken")
        )
        assert results[0] == (0, "completed: 3 pages about owls"), results[0]
        assert results[1] == (0, "completed: 3 pages about flaky"), results[1]
        assert results[2] == (0, "completed: 3 pages about obscure"), results[2]
        assert results[3] == (
            1,
            "failed: step 'retry_search' got web.search.failed: search backend timed out",
        ), results[3]
        assert await agents.stop(signal.SIGINT) == 0, agents.output
    finally:
        await agents.kill()
    assert "agent research-planner stopped" in agents.output


async def test_planner_killed_mid_plan_is_continued_by_a_restarted_planner(services):
    env = subprocess_env(**services)
    settings = PlatformSettings(
        event_service_url=services["SOORMA_EVENT_SERVICE_URL"],
        memory_url=services["SOORMA_MEMORY_URL"],
        registry_url=services["SOORMA_REGISTRY_URL"],
    )
    workers = await Proc.start(sys.executable, str(EXAMPLE / "workers.py"), "searcher", env=env)
    # The analyzer runs here so the test decides when the analysis answer goes out.
    context = PlatformContext.from_env(settings=settings)
    analyzer = Agent(name="content-analyzer", context=context)
    arrived: asyncio.Queue[Any] = asyncio.Queue()

    @analyzer.on_event(topic="action-requests", event_type="content.analyze.requested")
    async def hold(event, ctx):
        await arrived.put(event)

    planner = await start_planner(env)
    try:
        await workers.wait_for("workers ready")
        await analyzer.start()
        client = await Proc.start(sys.executable, str(EXAMPLE / "client.py"), "whales", env=env)
        async with asyncio.timeout(30):
            request = await arrived.get()
        # The plan is waiting in 'analyzing'. Kill the planner without any goodbye.
        planner.proc.kill()
        await planner.wait()
        await context.bus.respond(
            "content.analyze.completed",
            {"summary": "analysis made while no planner ran"},
            correlation_id=request.correlation_id,
            topic=request.response_topic,
        )
        planner = await start_planner(env)
        assert await client.wait(60) == 0, client.output
        assert client.lines == ["completed: analysis made while no planner ran"]
    finally:
        await planner.kill()
        await workers.kill()
        await analyzer.stop()
        await context.close()
