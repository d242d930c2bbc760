"""Tenant B cannot read, list or change tenant A's memory through the SDK."""

from __future__ import annotations

import pytest

from soorma_common.errors import PlanNotFound, TaskNotFound
from soorma_common.memory import PlanContextRecord, TaskContextRecord

pytestmark = pytest.mark.asyncio(loop_scope="module")

SUB = {"s1": {"sub_task_id": "s1", "event_type": "x", "response_event": "x.done"}}


async def test_tenant_b_cannot_see_or_touch_tenant_a_memory(make_memory):
    a, b = make_memory("tenant-a"), make_memory("tenant-b")
    await a.store_task_context("t1", "p1", {"sub_tasks": SUB, "state": {"secret": 1}})
    await a.store_plan_context("p1", "s1", {"goal_event": "g", "correlation_ids": ["c1"]})
    session = await a.create_session("private", session_id="s1")
    await a.store("key", "secret", "p1")

    # Reads: everything answers as missing.
    assert await b.get_task_context("t1") is None
    assert await b.get_task_by_subtask("s1") is None
    assert await b.get_plan_context("p1") is None
    assert await b.get_plan_by_correlation("c1") is None
    assert await b.get_plan("p1") is None
    assert await b.get_session(session.session_id) is None
    assert await b.retrieve("key", "p1") is None
    # Lists: empty.
    assert await b.list_plans() == []
    assert await b.list_sessions() == []
    assert await b.list_keys("p1") == []
    # Changes: refused as missing, and A's data is untouched.
    with pytest.raises(TaskNotFound):
        await b.record_sub_task_result("t1", "s1", result={"forged": True})
    with pytest.raises(TaskNotFound):
        await b.replace_task_context(TaskContextRecord(task_id="t1"))
    with pytest.raises(TaskNotFound):
        await b.update_task_context("t1", lambda r: r.state.update(secret=2))
    with pytest.raises(PlanNotFound):
        await b.replace_plan_context(PlanContextRecord(plan_id="p1"))
    with pytest.raises(PlanNotFound):
        await b.update_plan("p1", status="cancelled")
    assert await b.delete_task_context("t1") is False
    assert await b.delete_plan("p1") is False
    assert await b.delete_session("s1") is False
    assert await b.delete_item("key", "p1") is False
    assert await b.clear("p1") == 0

    task = await a.get_task_context("t1")
    assert task is not None and task.state == {"secret": 1}
    assert task.sub_tasks["s1"].result is None
    plan = await a.get_plan_context("p1")
    assert plan is not None and plan.status == "pending"
    assert await a.retrieve("key", "p1") == "secret"
    assert [s.session_id for s in await a.list_sessions()] == ["s1"]

    # B's writes under the same ids create B's own records, invisible to A.
    await b.store_task_context("t1", None, {"state": {"mine": True}})
    await b.store("key", "b-value", "p1")
    assert (await a.get_task_context("t1")).state == {"secret": 1}
    assert await a.retrieve("key", "p1") == "secret"
