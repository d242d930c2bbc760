"""examples/06-hitl-timeout end to end: planner and worker as real processes, the event,
memory, registry and tracker services running; the timeout branch with nobody answering,
the happy branch with an answer, both visible in ``soorma plans show``."""

from __future__ import annotations

import asyncio
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
from testsupport.server import serve
from tracker_service import create_app as create_tracker_app
from tracker_service.settings import Settings as TrackerSettings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sdk"))
from sdk_helpers import Proc, subprocess_env

pytestmark = pytest.mark.asyncio

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "06-hitl-timeout"


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
        serve(
            create_tracker_app(
                TrackerSettings(
                    tracker_database_url=f"sqlite+aiosqlite:///{tmp_path}/tracker.db",
                    event_service_url=events.url,
                    memory_url=memory.url,
                    tracker_timeout_interval_seconds=0.1,
                )
            )
        ) as tracker,
    ):
        yield {
            "SOORMA_EVENT_SERVICE_URL": events.url,
            "SOORMA_MEMORY_URL": memory.url,
            "SOORMA_REGISTRY_URL": registry.url,
            "SOORMA_TRACKER_URL": tracker.url,
        }


SOORMA = str(Path(sys.executable).parent / "soorma")


async def run(env: dict[str, str], script: str, *args: str) -> tuple[int, str]:
    proc = await Proc.start(sys.executable, str(EXAMPLE / script), *args, env=env, cwd=str(EXAMPLE))
    code = await proc.wait(90)
    return code, proc.output


async def soorma(env: dict[str, str], *args: str) -> tuple[int, str]:
    proc = await Proc.start(SOORMA, *args, env=env)
    code = await proc.wait(60)
    return code, proc.output


async def test_timeout_branch_without_an_answer_and_happy_branch_with_one(services):
    env = subprocess_env(**services)
    planner = await Proc.start(sys.executable, str(EXAMPLE / "planner.py"), env=env)
    worker = await Proc.start(sys.executable, str(EXAMPLE / "worker.py"), env=env)
    try:
        await planner.wait_for("agent expense-planner ready", within=60)
        await worker.wait_for("agent approver ready", within=60)
        (timed, timed_out), (yes, approved) = await asyncio.gather(
            run(env, "client.py"), run(env, "client.py", "--answer", "yes")
        )
        assert timed == 0 and timed_out.startswith("escalated plan "), timed_out
        assert yes == 0 and approved.startswith("approved plan "), approved
        timeout_plan = timed_out.split()[-1]
        happy_plan = approved.split()[-1]

        code, shown = await soorma(env, "plans", "show", timeout_plan)
        assert code == 0, shown
        assert "path: start -> reviewing -> escalated" in shown
        assert "human input timed out (hitl_timeout)" in shown
        assert "wait human_input for expense.approval.answered: timed_out" in shown
        code, shown = await soorma(env, "plans", "show", happy_plan)
        assert code == 0, shown
        assert "path: start -> reviewing -> approved" in shown
        assert "wait human_input for expense.approval.answered: answered" in shown
        assert "timed out" not in shown
    finally:
        await planner.kill()
        await worker.kill()
