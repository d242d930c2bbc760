"""SDK bookkeeping lives in its own column: a record's ``state`` holds only the user's keys.

Records from before the column (the SDK's keys inside ``state``) are moved out by the
0004 migration; after it, ``state`` is the user's whole, whatever its keys are named.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from memory_bodies import plan_body

from memory_service.models import plans, task_contexts
from memory_service.sql import MIGRATIONS, VERSION_TABLE, open_sql_store
from memory_service.sql.base import utcnow
from servicekit.db import make_engine
from soorma_common.memory import PlanContextRecord, TaskContextRecord

pytestmark = pytest.mark.asyncio

T = {"X-Tenant-ID": "t"}

# What releases before the bookkeeping column stored in a plan's and a task's state.
LEGACY_PLAN_STATE: dict[str, Any] = {
    "mine": 1,
    "_plan": {
        "correlation_id": "goal-c",
        "response_topic": "action-results",
        "tenant_id": "t",
        "user_id": "u",
        "pending": {"req-1": "searching"},
        "applied": {"trigger-1": "searching"},
    },
    "choreography_planner": "advisor",
    "choreography_actions": 2,
    "_waiting_for": "approval.granted",
    "llm_audit": [{"attempt": "first"}],
    "pause_reason": "budget",
    "deferred_events": [{"id": "e-1"}],
}
LEGACY_TASK_STATE: dict[str, Any] = {
    "mine": 2,
    "__soorma__": {"agent_id": "w", "tenant_id": "t", "sent": {"s-1": {"data": {"q": 1}}}},
}


def assert_plan_lifted(record: PlanContextRecord) -> None:
    assert record.state == {"mine": 1}
    book = record.bookkeeping
    assert (book.correlation_id, book.tenant_id, book.user_id) == ("goal-c", "t", "u")
    assert book.pending == {"req-1": "searching"}
    assert book.applied == {"trigger-1": "searching"}
    assert (book.pause_reason, book.deferred_events) == ("budget", [{"id": "e-1"}])
    assert book.choreography is not None
    chor = book.choreography
    assert (chor.planner, chor.actions, chor.waiting_for) == ("advisor", 2, "approval.granted")
    assert chor.audit == [{"attempt": "first"}]


def assert_task_lifted(record: TaskContextRecord) -> None:
    assert record.state == {"mine": 2}
    assert (record.bookkeeping.agent_id, record.bookkeeping.tenant_id) == ("w", "t")
    assert record.bookkeeping.sent == {"s-1": {"data": {"q": 1}}}


def _upgrade_to(connection: sa.Connection, revision: str) -> None:
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    config.attributes["version_table"] = VERSION_TABLE
    command.upgrade(config, revision)


async def test_the_upgrade_moves_sdk_keys_out_of_stored_state(db_url: str) -> None:
    engine = make_engine(db_url)
    now = utcnow()
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_upgrade_to, "0003_recorded_answers")
            # Only columns the 0003 schema has (no bookkeeping yet).
            await conn.execute(
                sa.insert(plans).values(
                    tenant_id="t",
                    plan_id="old",
                    goal_event="g",
                    goal_data={},
                    status="running",
                    state_machine={},
                    results={},
                    state=LEGACY_PLAN_STATE,
                    correlation_ids=[],
                    version=4,
                    created_at=now,
                    updated_at=now,
                )
            )
            await conn.execute(
                sa.insert(plans).values(
                    tenant_id="t",
                    plan_id="user-keys",
                    goal_event="g",
                    goal_data={},
                    status="running",
                    state_machine={},
                    results={},
                    state={"pause_reason": "the user's own"},
                    correlation_ids=[],
                    version=1,
                    created_at=now,
                    updated_at=now,
                )
            )
            await conn.execute(
                sa.insert(task_contexts).values(
                    tenant_id="t",
                    task_id="old-task",
                    event_type="x",
                    response_topic="r",
                    data={},
                    state=LEGACY_TASK_STATE,
                    version=2,
                    created_at=now,
                    updated_at=now,
                )
            )
    finally:
        await engine.dispose()
    store = await open_sql_store(db_url)  # upgrades to head
    try:
        old = await store.get_plan("t", "old")
        assert_plan_lifted(old)
        assert old.version == 4
        assert_task_lifted(await store.get_task("t", "old-task"))
        # Without the old SDK's marker the keys are the user's: left where they are.
        assert (await store.get_plan("t", "user-keys")).state == {"pause_reason": "the user's own"}
        async with store.engine.connect() as conn:
            stored = (
                await conn.execute(sa.select(plans.c.state).where(plans.c.plan_id == "old"))
            ).scalar_one()
        assert stored == {"mine": 1}
    finally:
        await store.close()


async def test_bookkeeping_round_trips_and_user_keys_named_like_sdk_keys_stay(
    client: httpx.AsyncClient,
) -> None:
    book = {
        "pending": {"c-1": "start"},
        "failure_reason": None,
        "choreography": {"actions": 3, "audit": [{"attempt": "repair"}]},
    }
    state = {"llm_audit": "mine", "_waiting_for": "me", "pause_reason": "also mine"}
    body = plan_body("p-new", state=state, bookkeeping=book)
    assert (await client.post("/v1/memory/plan-context", json=body, headers=T)).status_code == 200
    got = (await client.get("/v1/memory/plan-context/p-new", headers=T)).json()
    assert got["state"] == state
    assert got["bookkeeping"]["pending"] == {"c-1": "start"}
    assert got["bookkeeping"]["choreography"]["actions"] == 3
    assert got["bookkeeping"]["choreography"]["audit"] == [{"attempt": "repair"}]
