"""apply_change, the one versioned-record write under plans and task contexts, against the
real memory service (SQLite always, PostgreSQL when configured)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from memory_service import create_app
from soorma._versioned import Change, apply_change
from soorma.client import Identity
from soorma.memory import MemoryClient
from soorma.planning.records import PlanRecords, PlanState
from soorma.tasking.stored import TaskRecords
from soorma_common.errors import PlanNotFound, TaskNotFound, VersionConflict
from soorma_common.memory import TaskContextRecord
from soorma_common.state import StateConfig
from testsupport.services import db_url, in_process, memory_settings

__all__ = ["db_url"]  # a fixture: pytest finds it by its name in this module

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def memory(db_url: str, tmp_path: Any) -> AsyncIterator[MemoryClient]:
    async with in_process(create_app(memory_settings(db_url, tmp_path))) as http:
        yield MemoryClient(
            base_url="http://memory",
            http=http,
            identity=Identity(tenant_id="tenant-a", user_id="user-1"),
        )


def count(record: TaskContextRecord) -> Change[TaskContextRecord, int]:
    """A pure change: one more in ``state["n"]``; the outcome is the new count."""
    n = record.state.get("n", 0) + 1
    return Change(record.model_copy(update={"state": {**record.state, "n": n}}), n)


async def test_a_stale_copy_re_applies_its_change_to_the_fresh_record(memory: MemoryClient):
    await memory.store_task_context("t1", None, {"event_type": "x"})
    tasks = TaskRecords(memory)
    stale = await tasks.load("t1")
    await apply_change(tasks, "t1", await tasks.load("t1"), count)  # another writer

    applied = await apply_change(tasks, "t1", stale, count)

    assert applied.written and applied.outcome == 2
    stored = await tasks.load("t1")
    assert stored.state["n"] == 2 and stored.version == stale.version + 2


async def test_without_retries_a_stale_copy_is_a_version_conflict(memory: MemoryClient):
    await memory.store_task_context("t1", None, {"event_type": "x"})
    tasks = TaskRecords(memory)
    stale = await tasks.load("t1")
    await apply_change(tasks, "t1", await tasks.load("t1"), count)

    with pytest.raises(VersionConflict):
        await apply_change(tasks, "t1", stale, count, retries=0)
    assert (await tasks.load("t1")).state["n"] == 1


async def test_concurrent_writers_each_apply_their_change_once(memory: MemoryClient):
    machine = {"start": StateConfig(state_name="start", is_terminal=True)}
    plans = PlanRecords(memory)
    await plans.create(PlanState(plan_id="p1", goal_event="g", state_machine=machine))
    copies = [await plans.load("p1") for _ in range(6)]  # all read before anyone writes
    runs: list[str] = []

    def add(name: str):
        def change(plan: PlanState) -> Change[PlanState, None]:
            runs.append(name)
            after = plan.copy()
            after.state["seen"] = [*plan.state.get("seen", []), name]
            return Change(after, None)

        return change

    await asyncio.gather(
        *(apply_change(plans, "p1", c, add(f"w{i}")) for i, c in enumerate(copies))
    )

    stored = await plans.load("p1")
    assert sorted(stored.state["seen"]) == [f"w{i}" for i in range(6)]
    assert len(runs) > 6  # the losers re-ran their change on fresh copies


async def test_a_decision_to_write_nothing_on_a_possibly_stale_copy_is_checked_again(
    memory: MemoryClient,
):
    await memory.store_task_context("t1", None, {"event_type": "x", "state": {"ready": False}})
    tasks = TaskRecords(memory)
    stale = await tasks.load("t1")
    ready = stale.model_copy(update={"state": {"ready": True}})
    await tasks.replace(ready, expected_version=stale.version)

    def go_if_ready(record: TaskContextRecord) -> Change[TaskContextRecord, bool]:
        if not record.state["ready"]:
            return Change(None, False)
        return Change(record.model_copy(update={"state": {"ready": True, "went": 1}}), True)

    trusted = await apply_change(tasks, "t1", stale, go_if_ready)
    assert not trusted.written and trusted.record is stale and trusted.outcome is False

    checked = await apply_change(tasks, "t1", stale, go_if_ready, verified=False)
    assert checked.written and checked.outcome is True
    assert (await tasks.load("t1")).state == {"ready": True, "went": 1}


async def test_rebase_builds_the_retry_from_the_fresh_record_and_may_stop_it(
    memory: MemoryClient,
):
    await memory.store_task_context("t1", None, {"event_type": "x"})
    tasks = TaskRecords(memory)
    local = await tasks.load("t1")
    other = await tasks.load("t1")
    await tasks.replace(
        other.model_copy(update={"data": {"theirs": 1}}), expected_version=other.version
    )
    mine = local.model_copy(update={"state": {"mine": 1}})

    def keep_mine(fresh: TaskContextRecord) -> TaskContextRecord:
        return fresh.model_copy(update={"state": mine.state})

    await apply_change(tasks, "t1", mine, lambda r: Change(r, None), rebase=keep_mine)
    stored = await tasks.load("t1")
    assert (stored.data, stored.state) == ({"theirs": 1}, {"mine": 1})

    def taken(fresh: TaskContextRecord) -> TaskContextRecord:
        raise TaskNotFound("someone else finishes it")

    with pytest.raises(TaskNotFound):
        await apply_change(tasks, "t1", mine, lambda r: Change(r, None), rebase=taken)


async def test_loading_a_missing_record_names_its_kind(memory: MemoryClient):
    with pytest.raises(TaskNotFound):
        await TaskRecords(memory).load("nope")
    with pytest.raises(PlanNotFound):
        await PlanRecords(memory).load("nope")
