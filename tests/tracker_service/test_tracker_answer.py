"""``soorma tasks answer``: a person answers a pending human input from the terminal. The
tracker publishes the answer as the caller, the wait shows answered, and the answer is on
the plan's timeline. Another tenant cannot answer it; an answered input refuses a second."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from tracker_stack import Listener, Stack, first_wait, run_cli

pytestmark = pytest.mark.asyncio


async def _ask(stack: Stack) -> dict[str, str]:
    plan_id, sub = str(uuid.uuid4()), str(uuid.uuid4())
    task_id = await stack.publish(
        {
            "topic": "action-requests",
            "type": "review.do",
            "correlation_id": f"c-{sub}",
            "response_event": "review.done",
            "plan_id": plan_id,
        }
    )
    await stack.publish(
        {
            "topic": "notification-events",
            "type": "notification.human_input",
            "correlation_id": sub,
            "plan_id": plan_id,
            "data": {
                "question": "ok?",
                "task_id": task_id,
                "sub_task_id": sub,
                "response_event": "human.answered",
                "response_topic": "notification-events",
                "timeout_seconds": 60,
            },
        }
    )
    return {"plan_id": plan_id, "sub": sub, "task_id": task_id}


async def test_soorma_tasks_answer_publishes_the_answer_as_the_caller(
    stack: Stack, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = await _ask(stack)

    await stack.task_when(ids["sub"], first_wait("waiting"))
    url = ("--url", stack.tracker.url)
    monkeypatch.setenv("SOORMA_USER_ID", "carol")
    async with Listener(stack, ["human.answered"], topic="notification-events") as answers:
        monkeypatch.setenv("SOORMA_TENANT_ID", "globex")
        assert await run_cli("tasks", "answer", ids["sub"], "--data", '{"ok": 1}', *url) == 1
        assert ids["sub"] in capsys.readouterr().err
        monkeypatch.setenv("SOORMA_TENANT_ID", "acme")
        assert await run_cli("tasks", "answer", ids["sub"], "--data", "[1]", *url) == 2
        capsys.readouterr()
        # The task that asked names its pending input too.
        data = '{"approved": true}'
        assert await run_cli("tasks", "answer", ids["task_id"], "--data", data, *url) == 0
        assert f"answered {ids['task_id']}" in capsys.readouterr().out
        (answer,) = await answers.wait_for(1)
    assert answer.data == {"approved": True}
    assert (answer.correlation_id, answer.plan_id) == (ids["sub"], ids["plan_id"])
    assert (answer.tenant_id, answer.user_id) == ("acme", "carol")

    await stack.task_when(ids["sub"], first_wait("answered"))
    timeline = await stack.ok(f"/plans/{ids['plan_id']}/timeline")
    assert "human.answered" in [e["type"] for e in timeline["entries"]]
    assert await run_cli("tasks", "answer", ids["sub"], "--data", data, *url) == 1
    assert "waits no longer (answered)" in capsys.readouterr().err


async def test_soorma_tasks_answer_releases_a_planner_wait_with_its_expected_event(
    stack: Stack, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan_id = str(uuid.uuid4())
    await stack.publish(
        {
            "topic": "system-events",
            "type": "plan.waiting_for_input",
            "correlation_id": plan_id,
            "plan_id": plan_id,
            "data": {"plan_id": plan_id, "expected_event": "user.replied", "timeout_seconds": 60},
        }
    )
    await stack.plan_when(plan_id, lambda p: p["waits"] and p["waits"][0]["status"] == "waiting")
    monkeypatch.setenv("SOORMA_TENANT_ID", "acme")
    async with Listener(stack, ["user.replied"], topic="action-results") as released:
        code = await run_cli(
            "tasks", "answer", plan_id, "--data", '{"go": true}', "--url", stack.tracker.url
        )
        assert code == 0, capsys.readouterr().err
        (event,) = await released.wait_for(1)
    assert (event.correlation_id, event.plan_id, event.data) == (plan_id, plan_id, {"go": True})
    await stack.plan_when(plan_id, lambda p: p["waits"][0]["status"] == "answered")


async def test_the_list_shows_who_waits_on_a_person_and_who_took_a_timeout_branch(
    stack: Stack,
) -> None:
    ids = await _ask(stack)
    timed_out = str(uuid.uuid4())
    common = {"topic": "system-events", "correlation_id": timed_out, "plan_id": timed_out}
    await stack.publish({**common, "type": "plan.started", "data": {"plan_id": timed_out}})
    await stack.publish(
        {
            **common,
            "type": "plan.state_changed",
            "data": {
                "plan_id": timed_out,
                "from_state": "approval",
                "to_state": "expired",
                "status": "running",
                "trigger_event": "plan.wait_timeout",
            },
        }
    )

    async def listed() -> dict[str, Any] | None:
        plans = {p["plan_id"]: p for p in (await stack.ok("/plans"))["plans"]}
        ready = ids["plan_id"] in plans and plans.get(timed_out, {}).get("took_timeout_branch")
        return plans if ready and plans[ids["plan_id"]]["waiting_on_person"] else None

    plans = await stack.until(listed)
    asking = plans[ids["plan_id"]]
    assert asking["waiting_until"] and not asking["took_timeout_branch"]
    assert not plans[timed_out]["waiting_on_person"]
    await stack.client.post(
        f"{stack.tracker.url}/v1/tracker/tasks/{ids['sub']}/answer",
        json={"data": {}},
        headers={"X-Tenant-ID": "acme"},
    )

    async def answered() -> bool:
        plans = {p["plan_id"]: p for p in (await stack.ok("/plans"))["plans"]}
        return not plans[ids["plan_id"]]["waiting_on_person"]

    await stack.until(answered)
