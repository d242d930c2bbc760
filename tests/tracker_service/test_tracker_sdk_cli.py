"""``context.tracker`` and ``soorma plans`` against a running tracker."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from tracker_stack import Stack, run_cli

from soorma import PlatformContext, PlatformSettings
from soorma_common.errors import PlanNotFound

pytestmark = pytest.mark.asyncio


async def _plan(stack: Stack, *, finish: bool = True) -> dict[str, str]:
    plan_id, cid = str(uuid.uuid4()), f"goal-{uuid.uuid4()}"
    goal = await stack.publish(
        {
            "topic": "action-requests",
            "type": "trip.plan",
            "correlation_id": cid,
            "response_event": "trip.planned",
        }
    )
    common = {"topic": "system-events", "correlation_id": plan_id, "plan_id": plan_id}
    await stack.publish(
        {
            **common,
            "type": "plan.started",
            "parent_event_id": goal,
            "data": {"plan_id": plan_id, "current_state": "book"},
        }
    )
    await stack.publish(
        {
            **common,
            "type": "plan.state_changed",
            "data": {
                "plan_id": plan_id,
                "from_state": None,
                "to_state": "book",
                "status": "running",
            },
        }
    )
    if finish:
        await stack.publish(
            {
                **common,
                "type": "plan.completed",
                "data": {"plan_id": plan_id, "current_state": "book"},
            }
        )
    return {"plan_id": plan_id, "cid": cid}


def _context(stack: Stack) -> PlatformContext:
    return PlatformContext.from_env(
        settings=PlatformSettings(
            tracker_url=stack.tracker.url, event_service_url=stack.events.url, tenant_id="acme"
        )
    )


async def test_context_tracker_reads_and_waits_for_plans(stack: Stack) -> None:
    async with _context(stack) as context:
        ids = await _plan(stack)
        plan = await context.tracker.wait_for_plan(correlation_id=ids["cid"], timeout=20)
        assert plan.plan_id == ids["plan_id"] and plan.status.value == "completed"
        assert plan.goal_event == "trip.plan"
        timeline = await context.tracker.timeline(plan.plan_id)
        assert timeline.entries[0].type == "plan.started"
        page = await context.tracker.list_plans(status="completed")
        assert ids["plan_id"] in [p.plan_id for p in page.plans]
        assert (await context.tracker.metrics()).plans.total >= 1
        assert (await context.tracker.actions(plan.plan_id)).actions == []
        with pytest.raises(PlanNotFound):
            await context.tracker.get_plan("missing")
        with pytest.raises(TimeoutError, match="not seen"):
            await context.tracker.wait_for_plan("missing", timeout=0.5)


async def test_soorma_plans_list_show_and_follow(
    stack: Stack, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOORMA_TENANT_ID", "acme")
    done = await _plan(stack)
    await stack.plan_when(done["plan_id"], lambda p: p["status"] == "completed")
    assert await run_cli("plans", "list", "--url", stack.tracker.url) == 0
    assert done["plan_id"] in capsys.readouterr().out
    assert await run_cli("plans", "show", done["cid"], "--url", stack.tracker.url) == 0
    out = capsys.readouterr().out
    assert f"plan {done['plan_id']}" in out and "path: (start) -> book" in out
    assert "plan started" in out and "plan completed" in out
    assert (
        await run_cli("plans", "show", done["plan_id"], "--json", "--url", stack.tracker.url) == 0
    )
    shown = json.loads(capsys.readouterr().out)
    assert shown["plan"]["status"] == "completed" and len(shown["timeline"]) == 3
    # --follow prints entries as they come and returns when the plan ends.
    live = await _plan(stack, finish=False)
    await stack.plan_when(live["plan_id"], lambda p: p["event_count"] == 2)
    follower = asyncio.create_task(
        run_cli("plans", "show", live["plan_id"], "--follow", "--url", stack.tracker.url)
    )
    await asyncio.sleep(1.0)
    await stack.publish(
        {
            "topic": "system-events",
            "type": "plan.failed",
            "plan_id": live["plan_id"],
            "correlation_id": live["plan_id"],
            "data": {"plan_id": live["plan_id"], "reason": "no seats"},
        }
    )
    async with asyncio.timeout(20):
        assert await follower == 0
    out = capsys.readouterr().out
    assert "failed: no seats" in out and out.rstrip().endswith("plan failed (no seats)")
    assert await run_cli("plans", "show", "nope", "--url", stack.tracker.url) == 1
    assert "'nope'" in capsys.readouterr().err


async def _started(stack: Stack, plan_id: str, event_id: str) -> None:
    await stack.publish(
        {
            "id": event_id,
            "topic": "system-events",
            "type": "plan.started",
            "correlation_id": plan_id,
            "plan_id": plan_id,
            "data": {"plan_id": plan_id, "current_state": "book"},
        }
    )
    await stack.plan_when(plan_id, lambda p: p["status"] == "running")


async def test_plans_are_found_by_a_prefix_of_their_plan_correlation_or_event_id(
    stack: Stack, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOORMA_TENANT_ID", "acme")
    tag = uuid.uuid4().hex[:8]
    one, two = f"{tag}-aaaa-plan", f"{tag}-bbbb-plan"
    await _started(stack, one, f"ev{tag}-first")
    await _started(stack, two, f"ev{tag}-second")
    done = await _plan(stack)
    await stack.plan_when(done["plan_id"], lambda p: p["status"] == "completed")
    url = ("--url", stack.tracker.url)

    async def search(q: str) -> list[str]:
        return [p["plan_id"] for p in (await stack.ok("/plans", q=q))["plans"]]

    assert sorted(await search(tag)) == [one, two]
    assert await search(f"{tag}-bb") == [two]
    assert await search(f"ev{tag}-fi") == [one]
    assert await search(done["cid"][:12]) == [done["plan_id"]]
    assert await search("%%%%") == [] and await search("____") == []
    assert (await stack.get("/plans", q="abc")).status_code == 422
    assert await run_cli("plans", "show", f"{tag}-bb", *url) == 0
    assert f"plan {two}" in capsys.readouterr().out
    assert await run_cli("plans", "show", f"ev{tag}-sec", *url) == 0
    assert f"plan {two}" in capsys.readouterr().out
    assert await run_cli("plans", "show", done["plan_id"][:8], *url) == 0
    assert f"plan {done['plan_id']}" in capsys.readouterr().out
    assert await run_cli("plans", "show", tag, *url) == 1
    err = capsys.readouterr().err
    assert "matches 2 plans" in err and one in err and two in err
    assert await run_cli("plans", "list", "--search", f"{tag}-aa", *url) == 0
    listed = capsys.readouterr().out
    assert one in listed and two not in listed
    # Another tenant finds nothing by the same prefix.
    assert (await stack.ok("/plans", tenant="globex", q=tag))["plans"] == []
