"""MemoryClient task-context methods against the real memory service."""

from __future__ import annotations

import pytest

from soorma.memory import MemoryClient
from soorma_common.errors import TaskNotFound, VersionConflict
from soorma_common.memory import SubTaskRecord, SubTaskStatus, TaskContextRecord

pytestmark = pytest.mark.asyncio(loop_scope="module")


def two_sub_tasks() -> dict[str, dict]:
    return {
        sid: {
            "sub_task_id": sid,
            "event_type": "x.requested",
            "response_event": "x.done",
            "parallel_group_id": "g1",
        }
        for sid in ("s1", "s2")
    }


async def test_store_then_get_returns_the_typed_record_with_a_version(memory: MemoryClient):
    stored = await memory.store_task_context(
        "t1",
        "plan-1",
        {
            "event_type": "research.requested",
            "correlation_id": "caller-1",
            "response_event": "research.completed",
            "data": {"topic": "AI"},
            "sub_tasks": two_sub_tasks(),
            "state": {"step": 1},
        },
    )
    assert isinstance(stored, TaskContextRecord)
    assert stored.version == 1
    got = await memory.get_task_context("t1")
    assert got is not None
    assert got.plan_id == "plan-1"
    assert got.correlation_id == "caller-1"
    assert got.data == {"topic": "AI"}
    assert got.state == {"step": 1}
    assert set(got.sub_tasks) == {"s1", "s2"}
    assert isinstance(got.sub_tasks["s1"], SubTaskRecord)
    assert got.sub_tasks["s1"].status is SubTaskStatus.PENDING


async def test_get_missing_task_context_is_none_and_delete_missing_is_false(memory: MemoryClient):
    assert await memory.get_task_context("nope") is None
    assert await memory.get_task_by_subtask("nope") is None
    assert await memory.delete_task_context("nope") is False


async def test_delete_task_context_removes_it(memory: MemoryClient):
    await memory.store_task_context("t1", None, {"event_type": "a"})
    assert await memory.delete_task_context("t1") is True
    assert await memory.get_task_context("t1") is None


async def test_get_task_by_subtask_finds_the_owner(memory: MemoryClient):
    await memory.store_task_context("t1", None, {"sub_tasks": two_sub_tasks()})
    owner = await memory.get_task_by_subtask("s2")
    assert owner is not None and owner.task_id == "t1"


async def test_record_sub_task_result_returns_the_whole_updated_context(memory: MemoryClient):
    await memory.store_task_context("t1", None, {"sub_tasks": two_sub_tasks()})
    after_one = await memory.record_sub_task_result("t1", "s1", result={"score": 0.9})
    assert after_one.sub_tasks["s1"].status is SubTaskStatus.COMPLETED
    assert after_one.sub_tasks["s1"].result == {"score": 0.9}
    assert after_one.sub_tasks["s2"].status is SubTaskStatus.PENDING
    after_two = await memory.record_sub_task_result(
        "t1", "s2", status="failed", error="tool crashed"
    )
    assert after_two.version > after_one.version
    assert after_two.sub_tasks["s2"].status is SubTaskStatus.FAILED
    assert after_two.sub_tasks["s2"].error == "tool crashed"
    assert after_two.sub_tasks["s1"].result == {"score": 0.9}


async def test_record_result_for_an_unknown_sub_task_raises_task_not_found(memory: MemoryClient):
    await memory.store_task_context("t1", None, {"sub_tasks": two_sub_tasks()})
    with pytest.raises(TaskNotFound) as info:
        await memory.record_sub_task_result("t1", "s9", result={})
    assert info.value.details == {"task_id": "t1", "sub_task_id": "s9"}


async def test_store_with_a_stale_expected_version_raises_version_conflict(memory: MemoryClient):
    await memory.store_task_context("t1", None, {"state": {"n": 1}})
    await memory.store_task_context("t1", None, {"state": {"n": 2}})
    with pytest.raises(VersionConflict) as info:
        await memory.store_task_context("t1", None, {"state": {"n": 3}}, expected_version=1)
    assert info.value.details["current_version"] == 2
    created = await memory.store_task_context("t2", None, {}, expected_version=0)
    assert created.version == 1


async def test_replace_task_context_never_creates_one(memory: MemoryClient):
    with pytest.raises(TaskNotFound):
        await memory.replace_task_context(TaskContextRecord(task_id="ghost"))
    stored = await memory.store_task_context("t1", None, {"state": {"n": 1}})
    stored.state["n"] = 2
    replaced = await memory.replace_task_context(stored, expected_version=stored.version)
    assert replaced.state == {"n": 2}
    assert replaced.version == stored.version + 1


async def test_update_task_context_retries_after_a_concurrent_write(
    memory: MemoryClient, make_memory
):
    await memory.store_task_context("t1", None, {"state": {"seen": []}})
    other = make_memory()
    calls = 0

    async def add_mine(record: TaskContextRecord) -> None:
        nonlocal calls
        calls += 1
        if calls == 1:
            # Another writer gets in between our read and our write.
            await other.update_task_context("t1", lambda r: r.state["seen"].append("theirs"))
        record.state["seen"].append("mine")

    updated = await memory.update_task_context("t1", add_mine)
    assert calls == 2
    assert updated.state["seen"] == ["theirs", "mine"]


async def test_update_task_context_gives_up_after_the_retries(memory: MemoryClient, make_memory):
    await memory.store_task_context("t1", None, {"state": {"n": 0}})
    other = make_memory()
    calls = 0

    async def always_raced(record: TaskContextRecord) -> None:
        nonlocal calls
        calls += 1
        await other.store_task_context("t1", None, {"state": {"n": -calls}})
        record.state["n"] = calls

    with pytest.raises(VersionConflict):
        await memory.update_task_context("t1", always_raced, retries=2)
    assert calls == 3
