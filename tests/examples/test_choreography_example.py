"""examples/05-choreography runs as documented: tools, LLM planner and client as processes.

The planner runs ``--offline``: every decision goes through litellm (``mock_response``)
and the planner's validation against the live registry, with no API key and no network
(proxies point at a closed port; only the loopback services are reachable).
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from event_service import create_app as create_event_app
from event_service.settings import Settings as EventSettings
from memory_service import create_app as create_memory_app
from memory_service.settings import Settings as MemorySettings
from registry_service import create_app as create_registry_app
from registry_service.settings import Settings as RegistrySettings
from soorma import PlatformContext, PlatformSettings
from testsupport.forkserver import PRELOAD_AI
from testsupport.server import closed_port, serve

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sdk"))
from sdk_helpers import SOORMA, Proc, soorma_run, subprocess_env

pytestmark = pytest.mark.asyncio

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "05-choreography"
KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_API_KEY", "GEMINI_API_KEY")


def offline_env(**urls: str) -> dict[str, str]:
    """The example's environment: no provider keys, no route to the internet."""
    closed = f"http://127.0.0.1:{closed_port()}"
    env = subprocess_env(
        HTTP_PROXY=closed,
        HTTPS_PROXY=closed,
        ALL_PROXY=closed,
        http_proxy=closed,
        https_proxy=closed,
        all_proxy=closed,
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        **urls,
    )
    for name in KEY_VARS:
        env.pop(name, None)
    return env


@pytest_asyncio.fixture
async def services(sqlite_url: str, tmp_path: Any) -> AsyncIterator[dict[str, str]]:
    """Event, memory and registry services (embedded backends) under real uvicorn."""
    memory = MemorySettings(
        memory_database_url=sqlite_url, data_dir=tmp_path, memory_prune_interval_seconds=3600
    )
    registry = RegistrySettings(
        registry_database_url=f"sqlite+aiosqlite:///{tmp_path}/registry.db", data_dir=tmp_path
    )
    async with (
        serve(create_event_app(EventSettings(event_backend="memory"))) as events,
        serve(create_memory_app(memory)) as memories,
        serve(create_registry_app(registry)) as registrar,
    ):
        yield {
            "SOORMA_EVENT_SERVICE_URL": events.url,
            "SOORMA_MEMORY_URL": memories.url,
            "SOORMA_REGISTRY_URL": registrar.url,
        }


async def test_offline_planner_runs_fetch_analyze_report_and_completes_the_plan(
    services: dict[str, str],
):
    # As the README runs them: `RESEARCH_MODEL=offline soorma run workers.py planner.py`.
    env = offline_env(RESEARCH_MODEL="offline", **services)
    planner = await soorma_run(
        str(EXAMPLE / "workers.py"), str(EXAMPLE / "planner.py"), env=env, preload=PRELOAD_AI
    )
    try:
        running = next(line for line in planner.lines if "soorma run: running" in line)
        for name in ("doc-fetcher", "doc-analyzer", "doc-reporter", "doc-research-planner"):
            assert f"{name} (" in running, running
        # The planner said it was loading its model library before it was ready.
        assert "loading the model library (litellm)" in planner.output

        client = await Proc.start(
            sys.executable, str(EXAMPLE / "client.py"), "choreography of events", env=env
        )
        assert await client.wait(within=60) == 0, client.output + "\n--- planner\n" + planner.output
        assert client.lines[0] == "Report: choreography of events"
        assert "Key terms: " in client.output and "Highlights:" in client.output
        assert (
            "- In choreography no central conductor exists: each agent reacts to events "
            "and publishes new events." in client.lines
        )
        last = client.lines[-1]
        assert last.startswith("plan ") and last.endswith(": completed"), last
        plan_id = last.removeprefix("plan ").removesuffix(": completed")

        settings = PlatformSettings(memory_url=services["SOORMA_MEMORY_URL"])
        async with PlatformContext.from_env(settings=settings) as context:
            plan = await context.memory.get_plan_context(plan_id)
        assert plan is not None and plan.status == "completed"
        steps = ["doc.fetch.requested", "doc.analyze.requested", "doc.report.requested"]
        assert set(plan.results) == {*steps, "final"}
        assert all(plan.results[step]["success"] for step in steps)
        sources = plan.results["doc.fetch.requested"]["result"]["sources"]
        assert plan.results["doc.analyze.requested"]["result"]["source_count"] == len(sources) == 3
        assert plan.results["final"]["report"] == "\n".join(client.lines[:-2])
        # Four decisions in order, each one model call that passed validation at once;
        # each tool was fed the previous tool's answer.
        audit = plan.bookkeeping.choreography.audit
        assert [(r["attempt"], r["model"], r["valid"]) for r in audit] == [
            ("first", "gpt-4o-mini", True)
        ] * 4
        decisions = [json.loads(r["raw_output"])["next_action"] for r in audit]
        assert [d.get("event_type", d["action"]) for d in decisions] == [*steps, "complete"]
        assert decisions[1]["data"]["sources"] == sources
        assert decisions[2]["data"]["analysis"] == plan.results["doc.analyze.requested"]["result"]
        assert plan.bookkeeping.choreography.actions == 4

        assert await planner.stop(signal.SIGINT) == 0, planner.output
    finally:
        await planner.kill()
    assert "publish doc.fetch.requested" in planner.output
    assert "complete" in planner.output


async def test_soorma_run_without_a_key_names_the_variable_to_set(services: dict[str, str]):
    env = offline_env(RESEARCH_MODEL="gpt-4o-mini", **services)
    run = await Proc.start(
        SOORMA, "run", "--no-reload", str(EXAMPLE / "planner.py"), env=env, preload=PRELOAD_AI
    )
    assert await run.wait(within=90) == 1, run.output
    assert run.lines[-1].startswith("soorma: no API key"), run.output
    assert "set the OPENAI_API_KEY environment variable" in run.lines[-1]
    assert run.lines[-1].endswith("or set RESEARCH_MODEL=offline")
    assert "Traceback" not in run.output


async def test_planner_without_a_key_names_the_variable_to_set():
    env = offline_env(SOORMA_REGISTRY_URL=f"http://127.0.0.1:{closed_port()}")
    planner = await Proc.start(
        sys.executable,
        str(EXAMPLE / "planner.py"),
        "--model",
        "gpt-4o-mini",
        env=env,
        preload=PRELOAD_AI,
    )
    assert await planner.wait() == 2
    assert "set the OPENAI_API_KEY environment variable" in planner.output
    assert "--offline" in planner.output


async def test_offline_plan_fails_with_the_reason_when_no_tool_is_registered(
    services: dict[str, str],
):
    # No workers.py: the scripted answer names doc.fetch.requested, which no live agent
    # consumes, so validation rejects it (first try and repair) and the plan fails.
    env = offline_env(**services)
    planner = await Proc.start(
        sys.executable, str(EXAMPLE / "planner.py"), "--offline", env=env, preload=PRELOAD_AI
    )
    try:
        await planner.wait_for("agent doc-research-planner ready", within=60)
        client = await Proc.start(sys.executable, str(EXAMPLE / "client.py"), "anything", env=env)
        assert await client.wait(within=60) == 1, client.output + "\n" + planner.output
        assert "research failed: no valid decision after 2 attempt(s)" in client.output
        assert "'doc.fetch.requested' does not exist or no live agent consumes it" in client.output
        plan_id = client.lines[-1].removeprefix("plan ").removesuffix(": failed")

        settings = PlatformSettings(memory_url=services["SOORMA_MEMORY_URL"])
        async with PlatformContext.from_env(settings=settings) as context:
            plan = await context.memory.get_plan_context(plan_id)
        assert plan is not None and plan.status == "failed"
        assert [(r["attempt"], r["valid"]) for r in plan.bookkeeping.choreography.audit] == [
            ("first", False),
            ("repair", False),
        ]
        assert plan.bookkeeping.choreography.actions == 0  # nothing was published
        assert await planner.stop(signal.SIGINT) == 0, planner.output
    finally:
        await planner.kill()
