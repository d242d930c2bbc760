"""``soorma tasks timeout`` and ``POST /tasks/{id}/timeout``: a person ends a wait before
its deadline. The tracker publishes, as the caller, the timeout it would publish at the
deadline (same type, same id), so the waiting planner takes its timeout branch and the
worker its timeout; the wait shows timed out and the timeline says who did it. Another
tenant cannot reach the wait."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from tracker_stack import Listener, Stack, agent_context, first_wait, run_cli

from soorma.agents.planner import Planner
from soorma_common.state import PlanDefinition, StateConfig, StateWait
from tracker_service.projection import timeout_event_id

pytestmark = pytest.mark.asyncio

STATES = {
    "start": StateConfig(state_name="start", default_next="approval"),
    "approval": StateConfig(
        state_name="approval",
        wait=StateWait(
            event="manager.approved",
            on_event="approved",
            timeout_seconds=300,
            on_timeout="expired",
            reason="a manager approves spend",
        ),
    ),
    "approved": StateConfig(state_name="approved", is_terminal=True),
    "expired": StateConfig(state_name="expired", is_terminal=True),
}


async def test_soorma_tasks_timeout_sends_a_planner_wait_down_its_timeout_branch(
    stack: Stack, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    planner = Planner(
        name="spender",
        context=agent_context(stack, tenant_id="acme"),
        plan_definition=PlanDefinition(plan_type="spend.goal", states=STATES),
    )
    await planner.start()
    try:
        async with (
            agent_context(stack, tenant_id="acme") as context,
            Listener(stack, ["plan.wait_timeout"]) as timeouts,
            Listener(stack, ["spend.done"], topic="action-results") as done,
        ):
            await context.bus.request("spend.goal", {}, "spend.done", correlation_id="spend-1")
            plan = await context.tracker.wait_for_plan(
                correlation_id="spend-1", until_finished=False
            )
            shown = await stack.plan_when(
                plan.plan_id, lambda p: bool(p["waits"]) and p["waits"][0]["status"] == "waiting"
            )
            wait_id = shown["waits"][0]["wait_id"]
            url = ("--url", stack.tracker.url)
            monkeypatch.setenv("SOORMA_EVENT_SERVICE_URL", stack.events.url)
            monkeypatch.setenv("SOORMA_USER_ID", "alice")
            # Another tenant does not reach the wait.
            monkeypatch.setenv("SOORMA_TENANT_ID", "globex")
            assert await run_cli("tasks", "timeout", plan.plan_id, *url) == 1
            assert plan.plan_id in capsys.readouterr().err
            monkeypatch.setenv("SOORMA_TENANT_ID", "acme")
            # The plan's id names its pending WAIT.
            code = await run_cli(
                "tasks", "timeout", plan.plan_id, "--reason", "out of budget", *url
            )
            out = capsys.readouterr().out
            assert code == 0, out
            assert f"timed out {plan.plan_id}" in out
            (fired,) = await timeouts.wait_for(1)
            (answer,) = await done.wait_for(1)
        assert (fired.tenant_id, fired.user_id) == ("acme", "alice")
        assert fired.id == timeout_event_id("acme", wait_id)  # what the deadline would send
        assert fired.data["timed_out_by"] == "alice"
        assert fired.data["note"] == "out of budget"
        assert (fired.data["plan_id"], fired.data["wait_id"]) == (plan.plan_id, wait_id)
        assert answer.data["status"] == "completed"
        ended = await stack.plan_when(plan.plan_id, lambda p: p["status"] == "completed")
        assert ended["current_state"] == "expired"  # the WAIT's timeout branch
        assert ended["took_timeout_branch"] is True
        assert ended["waits"][0]["status"] == "timed_out"
        timeline = await stack.ok(f"/plans/{plan.plan_id}/timeline")
        (entry,) = [e for e in timeline["entries"] if e["type"] == "plan.wait_timeout"]
        assert entry["summary"] == "plan wait timeout by alice"
        # A wait that ended refuses a second timeout before anything is published.
        assert await run_cli("tasks", "timeout", plan.plan_id, *url) == 1
        assert "waits no longer (timed_out)" in capsys.readouterr().err
    finally:
        await planner.stop()
        await planner.context.close()


async def test_the_timeout_route_times_out_a_human_input_as_the_caller(stack: Stack) -> None:
    plan_id, sub = str(uuid.uuid4()), str(uuid.uuid4())
    await stack.publish(
        {
            "topic": "notification-events",
            "type": "notification.human_input",
            "correlation_id": sub,
            "plan_id": plan_id,
            "data": {
                "question": "ok?",
                "task_id": f"task-{sub}",
                "sub_task_id": sub,
                "response_event": "human.answered",
                "response_topic": "action-results",
                "timeout_seconds": 600,
            },
        }
    )

    await stack.task_when(sub, first_wait("waiting"))
    url = f"{stack.tracker.url}/v1/tracker/tasks/{sub}/timeout"
    async with Listener(stack, ["task.timeout"]) as timeouts:
        other = await stack.client.post(url, json={}, headers={"X-Tenant-ID": "globex"})
        assert other.status_code == 404, other.text
        sent = await stack.client.post(url, headers={"X-Tenant-ID": "acme", "X-User-ID": "dana"})
        assert sent.status_code == 202, sent.text
        assert sent.json()["event_type"] == "task.timeout"
        (fired,) = await timeouts.wait_for(1)
    assert fired.id == sent.json()["event_id"] == timeout_event_id("acme", sub)
    assert (fired.tenant_id, fired.user_id, fired.correlation_id) == ("acme", "dana", sub)
    assert fired.data["reason"] == "hitl_timeout"  # the worker's timeout, as at the deadline
    assert (fired.data["sub_task_id"], fired.data["timed_out_by"]) == (sub, "dana")

    task = await stack.task_when(sub, first_wait("timed_out"))
    assert task["status"] == "failed"
    timeline = await stack.ok(f"/plans/{plan_id}/timeline")
    summaries = [e["summary"] for e in timeline["entries"] if e["type"] == "task.timeout"]
    assert summaries == ["human input timed out by dana (hitl_timeout)"]
    again = await stack.client.post(url, json={}, headers={"X-Tenant-ID": "acme"})
    assert again.status_code == 409, again.text
    # The tracker's timeout of the wait, counted where it was projected (no replica
    # marked the wait first): once.
    metrics = await stack.ok("/metrics")
    assert metrics["projector"]["timeouts_fired"] == 1


async def test_a_timeout_the_tracker_did_not_send_is_not_counted_as_fired(stack: Stack) -> None:
    sub = str(uuid.uuid4())
    ask = {"task_id": f"task-{sub}", "sub_task_id": sub}
    await stack.publish(
        {
            "topic": "notification-events",
            "type": "notification.human_input",
            "correlation_id": sub,
            "data": {
                **ask,
                "question": "ok?",
                "response_event": "human.answered",
                "response_topic": "action-results",
                "timeout_seconds": 600,
            },
        }
    )

    await stack.task_when(sub, first_wait("waiting"))
    await stack.publish(  # someone else's timeout, with an id of its own
        {
            "topic": "system-events",
            "type": "task.timeout",
            "correlation_id": sub,
            "data": {**ask, "reason": "hitl_timeout"},
        }
    )
    await stack.task_when(sub, first_wait("timed_out"))
    metrics = await stack.ok("/metrics")
    assert metrics["projector"]["timeouts_fired"] == 0
