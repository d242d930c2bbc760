"""The plan page's data: the memory context (state machine, LLM audit) read as the plan's
tenant, and the live SSE stream of one plan."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from tracker_stack import Stack

from testsupport.server import LiveServer

pytestmark = pytest.mark.asyncio


def lifecycle(plan_id: str, type_: str, **data: Any) -> dict[str, Any]:
    return {
        "topic": "system-events",
        "type": type_,
        "correlation_id": plan_id,
        "plan_id": plan_id,
        "data": {"plan_id": plan_id, **data},
    }


async def test_plan_detail_carries_the_memory_context_of_its_own_tenant(stack: Stack) -> None:
    plan_id = str(uuid.uuid4())
    audit = {
        "attempt": "first",
        "model": "mock/m",
        "prompt": [{"role": "user", "content": "q"}],
        "raw_output": "{}",
        "latency_ms": 12.5,
        "tokens": {"total": 3},
        "valid": False,
        "errors": ["bad json"],
    }
    machine = {"start": {"transitions": [{"on_event": "x.done", "to_state": "end"}]}}
    r = await stack.client.post(
        f"{stack.memory.url}/v1/memory/plan-context",
        headers={"X-Tenant-ID": "acme"},
        json={
            "plan_id": plan_id,
            "goal_event": "g",
            "current_state": "start",
            "state_machine": machine,
            "bookkeeping": {"choreography": {"audit": [audit]}},
        },
    )
    assert r.status_code in (200, 201), r.text
    await stack.publish(lifecycle(plan_id, "plan.started", current_state="start"))
    await stack.plan_when(plan_id, lambda p: p["status"] == "running")
    detail = await stack.ok(f"/plans/{plan_id}")
    assert detail["context_error"] is None
    ctx = detail["context"]
    assert ctx["state_machine"] == machine and ctx["current_state"] == "start"
    assert ctx["llm_audit"][0]["errors"] == ["bad json"]
    assert ctx["llm_audit"][0]["model"] == "mock/m"
    # Another tenant's plan of the same id: the context is read as the plan's tenant.
    await stack.publish(lifecycle(plan_id, "plan.started"), tenant="globex")
    await stack.plan_when(plan_id, lambda p: p["status"] == "running", tenant="globex")
    other = await stack.ok(f"/plans/{plan_id}", tenant="globex")
    assert other["context"] is None and "no context" in other["context_error"]


async def _frames(response: httpx.Response, out: list[tuple[str, Any]]) -> None:
    event = None
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: ") and event:
            out.append((event, json.loads(line[6:])))


@contextlib.asynccontextmanager
async def plan_stream(
    stack: Stack, plan_id: str, tracker: LiveServer | None = None
) -> AsyncIterator[list[tuple[str, Any]]]:
    """The plan's stream, read into the yielded list; on exit, waits for the stream's end."""
    frames: list[tuple[str, Any]] = []
    async with stack.client.stream(
        "GET",
        f"{(tracker or stack.tracker).url}/v1/tracker/plans/{plan_id}/stream",
        headers={"X-Tenant-ID": "acme"},
    ) as response:
        assert response.status_code == 200
        reader = asyncio.create_task(_frames(response, frames))
        try:
            yield frames
            async with asyncio.timeout(20):
                await reader
        finally:
            reader.cancel()


async def _has(frames: list[tuple[str, Any]], kind: str, n: int) -> bool:
    return sum(1 for k, _ in frames if k == kind) >= n


def _entry_types(frames: list[tuple[str, Any]]) -> list[str]:
    return [d["type"] for k, d in frames if k == "entry"]


async def test_plan_stream_sends_the_plan_each_entry_and_the_end(stack: Stack) -> None:
    plan_id = str(uuid.uuid4())
    await stack.publish(lifecycle(plan_id, "plan.started", current_state="a"))
    await stack.plan_when(plan_id, lambda p: p["status"] == "running")
    async with plan_stream(stack, plan_id) as frames:
        await stack.until(lambda: _has(frames, "entry", 1))
        await stack.publish(
            lifecycle(plan_id, "plan.state_changed", from_state="a", to_state="b", status="running")
        )
        await stack.publish(lifecycle(plan_id, "plan.completed", current_state="b"))
    kinds = [k for k, _ in frames]
    assert kinds[0] == "plan" and kinds[-1] == "end"
    assert _entry_types(frames) == ["plan.started", "plan.state_changed", "plan.completed"]
    assert frames[-1][1]["status"] == "completed"


async def test_an_entry_projected_after_the_plan_ended_comes_before_the_end(stack: Stack) -> None:
    # The tap has no order across topics: a tool's result published before the plan's
    # terminal event can be projected after it. The stream sees the plan end, keeps
    # looking while entries still come, and sends the late one before ``end``.
    watcher = await stack.add_tracker(tracker_projector=False, tracker_stream_settle_seconds=5.0)
    plan_id = str(uuid.uuid4())
    await stack.publish(lifecycle(plan_id, "plan.started", current_state="a"))
    await stack.publish(lifecycle(plan_id, "plan.completed", current_state="a"))
    await stack.plan_when(plan_id, lambda p: p["status"] == "completed")
    async with plan_stream(stack, plan_id, watcher) as frames:
        await stack.until(lambda: _has(frames, "entry", 2))
        assert frames[0][0] == "plan" and frames[0][1]["status"] == "completed"
        await stack.publish(
            {
                "topic": "action-results",
                "type": "web.search.completed",
                "correlation_id": str(uuid.uuid4()),
                "plan_id": plan_id,
                "data": {"results": ["late"]},
            }
        )
    assert _entry_types(frames) == ["plan.started", "plan.completed", "web.search.completed"]
    assert frames[-1][0] == "end" and frames[-1][1]["status"] == "completed"


async def test_the_stream_of_a_plan_that_ended_earlier_ends_at_once(stack: Stack) -> None:
    # Its terminal event is older than the settle time: nothing of it is still on the way,
    # and the stream ends well before the 60 s a just-ended plan's stream would wait.
    watcher = await stack.add_tracker(tracker_projector=False, tracker_stream_settle_seconds=60.0)
    plan_id = str(uuid.uuid4())
    hour_ago = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    for type_ in ("plan.started", "plan.completed"):
        await stack.publish({**lifecycle(plan_id, type_, current_state="a"), "time": hour_ago})
    await stack.plan_when(plan_id, lambda p: p["status"] == "completed")
    async with plan_stream(stack, plan_id, watcher) as frames:
        pass
    assert [k for k, _ in frames] == ["plan", "entry", "entry", "end"]
