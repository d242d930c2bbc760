"""MemoryClient plan-context, plan and session methods against the real memory service."""

from __future__ import annotations

import asyncio

import pytest

from soorma.memory import MemoryClient
from soorma_common.errors import Conflict, PlanNotFound, VersionConflict
from soorma_common.memory import PlanContextRecord, PlanStatus, PlanSummary, SessionSummary

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_store_and_get_plan_context(memory: MemoryClient):
    stored = await memory.store_plan_context(
        "p1",
        "sess-1",
        {
            "goal_event": "research.goal",
            "goal_data": {"topic": "AI"},
            "status": "running",
            "current_state": "search",
            "state_machine": {"search": {"next": "done"}},
            "correlation_ids": ["c-1", "c-2"],
        },
    )
    assert isinstance(stored, PlanContextRecord) and stored.version == 1
    got = await memory.get_plan_context("p1")
    assert got is not None
    assert got.session_id == "sess-1"
    assert got.status is PlanStatus.RUNNING
    assert got.state_machine == {"search": {"next": "done"}}


async def test_get_plan_by_correlation_matches_plan_id_and_correlation_ids(memory: MemoryClient):
    await memory.store_plan_context("p1", None, {"goal_event": "g", "correlation_ids": ["c-1"]})
    by_corr = await memory.get_plan_by_correlation("c-1")
    by_id = await memory.get_plan_by_correlation("p1")
    assert by_corr is not None and by_corr.plan_id == "p1"
    assert by_id is not None and by_id.plan_id == "p1"
    assert await memory.get_plan_by_correlation("c-unknown") is None


async def test_missing_plan_context_is_none_and_delete_reports_it(memory: MemoryClient):
    assert await memory.get_plan_context("nope") is None
    assert await memory.delete_plan_context("nope") is False
    await memory.store_plan_context("p1", None, {"goal_event": "g"})
    assert await memory.delete_plan_context("p1") is True
    assert await memory.get_plan_context("p1") is None


async def test_replace_plan_context_with_stale_version_conflicts(memory: MemoryClient):
    stored = await memory.store_plan_context("p1", None, {"goal_event": "g"})
    stored.current_state = "a"
    await memory.replace_plan_context(stored, expected_version=stored.version)
    stored.current_state = "b"
    with pytest.raises(VersionConflict):
        await memory.replace_plan_context(stored, expected_version=stored.version)
    with pytest.raises(PlanNotFound):
        await memory.replace_plan_context(PlanContextRecord(plan_id="ghost"))


async def test_concurrent_plan_updates_lose_nothing(memory: MemoryClient):
    await memory.store_plan_context("p1", None, {"goal_event": "g"})

    async def record(step: int) -> None:
        def add(plan: PlanContextRecord) -> None:
            plan.results[f"step{step}"] = step
            plan.correlation_ids.append(f"c-{step}")

        await memory.update_plan_context("p1", add, retries=20)

    await asyncio.gather(*(record(i) for i in range(6)))
    plan = await memory.get_plan_context("p1")
    assert plan is not None
    assert plan.results == {f"step{i}": i for i in range(6)}
    assert sorted(plan.correlation_ids) == sorted(f"c-{i}" for i in range(6))


async def test_update_plan_context_retries_after_a_concurrent_write(
    memory: MemoryClient, make_memory
):
    await memory.store_plan_context("p1", None, {"goal_event": "g"})
    other = make_memory()
    calls = 0

    async def advance(plan: PlanContextRecord) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            await other.update_plan_context("p1", lambda p: p.results.update(theirs=1))
        plan.current_state = "review"

    updated = await memory.update_plan_context("p1", advance)
    assert calls == 2
    assert updated.current_state == "review"
    assert updated.results == {"theirs": 1}


async def test_create_get_update_delete_plan(memory: MemoryClient):
    plan = await memory.create_plan_record(
        "research.goal", {"topic": "AI"}, "research.done", session_id="s1"
    )
    assert isinstance(plan, PlanSummary)
    assert plan.status is PlanStatus.PENDING and plan.plan_id
    with pytest.raises(Conflict):
        await memory.create_plan_record("research.goal", plan_id=plan.plan_id)
    got = await memory.get_plan(plan.plan_id)
    assert got is not None and got.response_event == "research.done"
    running = await memory.update_plan(plan.plan_id, status="running")
    assert running.status is PlanStatus.RUNNING and running.version == plan.version + 1
    with pytest.raises(VersionConflict):
        await memory.update_plan(plan.plan_id, status="paused", expected_version=plan.version)
    assert await memory.delete_plan(plan.plan_id) is True
    assert await memory.get_plan(plan.plan_id) is None
    assert await memory.delete_plan(plan.plan_id) is False
    with pytest.raises(PlanNotFound):
        await memory.update_plan(plan.plan_id, status="running")


async def test_list_plans_filters_by_status_session_parent_and_limit(memory: MemoryClient):
    root = await memory.create_plan_record("g", session_id="s1", plan_id="root", status="running")
    await memory.create_plan_record(
        "g", session_id="s1", parent_plan_id=root.plan_id, plan_id="child"
    )
    await memory.create_plan_record("g", session_id="s2", plan_id="other", status="completed")
    assert {p.plan_id for p in await memory.list_plans()} == {"root", "child", "other"}
    assert [p.plan_id for p in await memory.list_plans(status="completed")] == ["other"]
    both = await memory.list_plans(status=["running", PlanStatus.PENDING])
    assert {p.plan_id for p in both} == {"root", "child"}
    assert {p.plan_id for p in await memory.list_plans(session_id="s1")} == {"root", "child"}
    assert [p.plan_id for p in await memory.list_plans(parent_plan_id="root")] == ["child"]
    assert len(await memory.list_plans(limit=1)) == 1


async def test_sessions_create_list_get_delete(memory: MemoryClient):
    session = await memory.create_session("budget chat", {"channel": "web"})
    assert isinstance(session, SessionSummary) and session.plan_count == 0
    await memory.create_plan_record("g", session_id=session.session_id, plan_id="in-session")
    fetched = await memory.get_session(session.session_id)
    assert fetched is not None
    assert fetched.name == "budget chat" and fetched.metadata == {"channel": "web"}
    assert fetched.plan_count == 1
    named = await memory.create_session(session_id="chosen")
    with pytest.raises(Conflict):
        await memory.create_session(session_id="chosen")
    listed = await memory.list_sessions()
    assert {s.session_id for s in listed} == {session.session_id, named.session_id}
    assert len(await memory.list_sessions(limit=1)) == 1
    assert await memory.delete_session(session.session_id) is True
    assert await memory.get_session(session.session_id) is None
    # Deleting a session deletes its plans.
    assert await memory.get_plan("in-session") is None
    assert await memory.delete_session(session.session_id) is False
