"""``soorma plans cancel`` end to end: the CLI publishes the request as its caller, the
owning planner ends the plan, and the tracker shows it cancelled with the reason."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from tracker_stack import Listener, Stack, agent_context, run_cli

from soorma.agents.planner import Planner
from soorma_common.state import PlanDefinition, StateAction, StateConfig, StateTransition

pytestmark = pytest.mark.asyncio

STATES = {
    "start": StateConfig(state_name="start", default_next="review"),
    "review": StateConfig(
        state_name="review",
        action=StateAction(event_type="doc.review", response_event="doc.reviewed"),
        transitions=[StateTransition(on_event="doc.reviewed", to_state="done")],
    ),
    "done": StateConfig(state_name="done", is_terminal=True),
}


async def test_soorma_plans_cancel_ends_a_running_plan_with_its_reason(
    stack: Stack, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    planner = Planner(
        name="reviewer",
        context=agent_context(stack, tenant_id="acme"),
        plan_definition=PlanDefinition(plan_type="doc.goal", states=STATES),
    )
    await planner.start()
    try:
        async with (
            agent_context(stack, tenant_id="acme") as context,
            Listener(stack, ["plan.cancel_requested"]) as requests,
        ):
            await context.bus.request("doc.goal", {}, "doc.done", correlation_id="doc-1")
            plan = await context.tracker.wait_for_plan(correlation_id="doc-1", until_finished=False)
            await stack.plan_when(plan.plan_id, lambda p: p["current_state"] == "review")
            env = {"SOORMA_EVENT_SERVICE_URL": stack.events.url, "SOORMA_USER_ID": "alice"}
            for name, value in env.items():
                monkeypatch.setenv(name, value)
            # Another tenant does not reach the plan at all.
            monkeypatch.setenv("SOORMA_TENANT_ID", "globex")
            assert (
                await run_cli(
                    "plans", "cancel", "doc-1", "--reason", "x", "--url", stack.tracker.url
                )
                == 1
            )
            assert "doc-1" in capsys.readouterr().err
            monkeypatch.setenv("SOORMA_TENANT_ID", "acme")
            code = await run_cli(
                "plans",
                "cancel",
                "doc-1",
                "--reason",
                "wrong document",
                "--wait",
                "20",
                "--url",
                stack.tracker.url,
            )
            out = capsys.readouterr().out
            assert code == 0, out
            assert f"cancel requested for plan {plan.plan_id}" in out
            assert out.rstrip().endswith("plan cancelled (wrong document)")
            # The caller's request, then the plan's own to the step's (possible) sub-plan.
            asked, cascaded = await requests.wait_for(2)
            assert (asked.tenant_id, asked.user_id) == ("acme", "alice")
            assert asked.data == {"plan_id": plan.plan_id, "reason": "wrong document"}
            assert cascaded.data["parent_plan_id"] == plan.plan_id
            shown = await stack.ok(f"/plans/{plan.plan_id}", context="false")
            assert (shown["status"], shown["reason"]) == ("cancelled", "wrong document")
            # Cancelling an ended plan is refused before anything is published.
            assert (
                await run_cli(
                    "plans", "cancel", plan.plan_id, "--reason", "again", "--url", stack.tracker.url
                )
                == 1
            )
            assert "already ended (cancelled)" in capsys.readouterr().err
    finally:
        await planner.stop()
        await planner.context.close()


async def test_the_cancel_route_publishes_the_request_as_the_caller(stack: Stack) -> None:
    plan_id = str(uuid.uuid4())
    await stack.publish(
        {
            "topic": "system-events",
            "type": "plan.started",
            "correlation_id": plan_id,
            "plan_id": plan_id,
            "data": {"plan_id": plan_id, "current_state": "review"},
        }
    )
    await stack.plan_when(plan_id, lambda p: p["status"] == "running")
    url = f"{stack.tracker.url}/v1/tracker/plans/{plan_id}/cancel"
    async with Listener(stack, ["plan.cancel_requested"]) as requests:
        other = await stack.client.post(
            url, json={"reason": "x"}, headers={"X-Tenant-ID": "globex"}
        )
        assert other.status_code == 404, other.text
        empty = await stack.client.post(url, json={"reason": ""}, headers={"X-Tenant-ID": "acme"})
        assert empty.status_code == 422
        sent = await stack.client.post(
            url, json={"reason": "stop"}, headers={"X-Tenant-ID": "acme", "X-User-ID": "bob"}
        )
        assert sent.status_code == 202, sent.text
        (request,) = await requests.wait_for(1)
    assert sent.json() == {"plan_id": plan_id, "event_id": request.id}
    assert (request.tenant_id, request.user_id) == ("acme", "bob")
    assert request.data == {"plan_id": plan_id, "reason": "stop"}
    assert (request.plan_id, request.correlation_id) == (plan_id, plan_id)
    await stack.publish(
        {
            "topic": "system-events",
            "type": "plan.cancelled",
            "correlation_id": plan_id,
            "plan_id": plan_id,
            "data": {"plan_id": plan_id, "reason": "stop", "cancelled_by": "bob"},
        }
    )
    await stack.plan_when(plan_id, lambda p: p["status"] == "cancelled")
    (listed,) = [p for p in (await stack.ok("/plans"))["plans"] if p["plan_id"] == plan_id]
    assert (listed["cancelled_by"], listed["reason"]) == ("bob", "stop")
    ended = await stack.client.post(url, json={"reason": "x"}, headers={"X-Tenant-ID": "acme"})
    assert ended.status_code == 409, ended.text
