"""A worker's task state lives in the memory service, not in the worker process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from worker_helpers import next_event

from soorma import PlatformContext
from testsupport.server import LiveServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sdk"))
from sdk_helpers import Proc, subprocess_env

pytestmark = pytest.mark.asyncio

SCRIPT = str(Path(__file__).with_name("resumable_worker.py"))


async def test_result_completes_the_task_after_the_delegating_process_was_killed(
    event_service: LiveServer,
    sqlite_memory_service: LiveServer,
    light_context: PlatformContext,
):
    context = light_context
    env = subprocess_env(
        SOORMA_EVENT_SERVICE_URL=event_service.url,
        SOORMA_MEMORY_URL=sqlite_memory_service.url,
        SOORMA_REGISTRY_URL="http://127.0.0.1:9",
    )
    bus = context.bus
    first = await Proc.start(sys.executable, SCRIPT, env=env)
    second: Proc | None = None
    try:
        await first.wait_for("agent resumable ready")
        async with bus.subscribe(["action-results"], event_types=["job.done"]) as answers:
            await answers.wait_ready()
            await bus.request("job.requested", {"job": "j-1"}, "job.done", correlation_id="orig-1")
            line = await first.wait_for("delegated ")
            sub_task_id = line.split()[-1]
            first.proc.kill()  # SIGKILL: no graceful shutdown, nothing flushed
            await first.wait()

            second = await Proc.start(sys.executable, SCRIPT, env=env)
            await second.wait_for("agent resumable ready")
            await bus.respond("step.done", {"answer": 42}, correlation_id=sub_task_id)
            answer = await next_event(answers, within=30)
            await second.wait_for("completed ")
    finally:
        await first.kill()
        if second is not None:
            await second.kill()
    assert answer.correlation_id == "orig-1"
    assert answer.data["status"] == "completed"
    assert answer.data["result"] == {"job": "j-1", "step": {"answer": 42}}
    assert await context.memory.get_task_context(answer.data["task_id"]) is None
