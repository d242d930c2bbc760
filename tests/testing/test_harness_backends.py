"""The harness on the production backends: Redis Streams and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio as redis

from soorma import Tool
from soorma.agents.planner import Planner
from soorma.testing import PlatformHarness
from soorma_common.state import PlanDefinition, StateAction, StateConfig, StateTransition

pytestmark = [pytest.mark.asyncio, pytest.mark.redis, pytest.mark.postgres]

PLAN = PlanDefinition(
    plan_type="sum.goal",
    states={
        "start": StateConfig(state_name="start", default_next="adding"),
        "adding": StateConfig(
            state_name="adding",
            action=StateAction(
                event_type="add.requested",
                response_event="add.completed",
                data={"numbers": "{goal_data.numbers}"},
            ),
            transitions=[StateTransition(on_event="add.completed", to_state="done")],
        ),
        "done": StateConfig(state_name="done", is_terminal=True),
    },
)


async def test_a_plan_runs_on_redis_and_postgres(
    redis_url: str, redis_prefix: str, postgres_url: str
):
    adder = Tool(name="adder")

    @adder.on_invoke("add.requested")
    async def add(request: Any, context: Any) -> dict[str, int]:
        return {"sum": sum(request.data["numbers"])}

    harness = PlatformHarness(
        event_settings={
            "event_backend": "redis",
            "redis_url": redis_url,
            "redis_prefix": redis_prefix,
            "block_seconds": 0.2,
        },
        # Memory and registry share one fresh database (their tables do not overlap).
        memory_settings={"memory_database_url": postgres_url},
        registry_settings={"registry_database_url": postgres_url},
    )
    async with harness as platform:
        await platform.start(adder, Planner(name="summer", plan_definition=PLAN))
        answer = await platform.call("sum.goal", {"numbers": [1, 2, 3]}, response_event="sum.done")
        plan = await platform.plan(correlation_id=answer.correlation_id)
        assert plan is not None and plan.results["adding"]["result"] == {"sum": 6}
        assert [a.name for a in await platform.context.registry.list_agents()] == [
            "adder",
            "summer",
        ]
        # The events went through Redis Streams under the test's prefix.
        client = redis.Redis.from_url(redis_url)
        try:
            assert [key async for key in client.scan_iter(match=f"{redis_prefix}*")]
        finally:
            await client.aclose()
    assert answer.data["status"] == "completed"
