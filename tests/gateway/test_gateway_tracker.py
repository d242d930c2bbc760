"""A gateway task that starts a plan: the tracker finds the plan under the task's id."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import httpx
import pytest
import pytest_asyncio
from a2a.types.a2a_pb2 import TaskState
from test_gateway_outcomes import make_writer

from event_service import create_app as create_event_app
from gateway_a2a import create_app as create_gateway_app
from gateway_a2a.settings import Settings as GatewaySettings
from memory_service import create_app as create_memory_app
from registry_service import create_app as create_registry_app
from soorma.agents.planner import Planner
from soorma.client import verified_tls
from soorma_common.state import PlanDefinition, StateAction, StateConfig, StateTransition
from testsupport.a2a import (
    a2a_client,
    agent_context,
    collect,
    echo_tool,
    final_task,
    send_request,
    user_message,
)
from testsupport.server import free_port, serve
from testsupport.services import event_settings, memory_settings, registry_settings
from tracker_service import create_app as create_tracker_app
from tracker_service.settings import Settings as TrackerSettings

pytestmark = pytest.mark.asyncio

PLAN = PlanDefinition(
    plan_type="shout.goal",
    description="Shout a text",
    states={
        "start": StateConfig(state_name="start", default_next="echo"),
        "echo": StateConfig(
            state_name="echo",
            action=StateAction(
                event_type="echo.requested",
                response_event="shout.echoed",
                data={"text": "{goal_data.text}"},
            ),
            transitions=[StateTransition(on_event="shout.echoed", to_state="done")],
        ),
        "done": StateConfig(state_name="done", is_terminal=True),
    },
)


@pytest_asyncio.fixture
async def services(tmp_path: Any) -> AsyncIterator[dict[str, str]]:
    async with AsyncExitStack() as stack:

        def sqlite(name: str) -> str:
            return f"sqlite+aiosqlite:///{tmp_path}/{name}.db"

        events = await stack.enter_async_context(serve(create_event_app(event_settings())))
        registry = await stack.enter_async_context(
            serve(create_registry_app(registry_settings(sqlite("registry"), tmp_path)))
        )
        memory = await stack.enter_async_context(
            serve(create_memory_app(memory_settings(sqlite("memory"), tmp_path)))
        )
        tracker = await stack.enter_async_context(
            serve(
                create_tracker_app(
                    TrackerSettings(
                        tracker_database_url=sqlite("tracker"),
                        event_service_url=events.url,
                        memory_url=memory.url,
                        data_dir=tmp_path,
                    )
                )
            )
        )
        context = agent_context(events.url, registry.url, memory.url)
        stack.push_async_callback(context.close)
        for agent in (
            echo_tool(context),
            Planner(
                name="shouter",
                context=context,
                plan_definition=PLAN,
                goal_description="Shout a text",
            ),
        ):
            await agent.start()
            stack.push_async_callback(agent.stop)
        port = free_port()
        gateway = await stack.enter_async_context(
            serve(
                create_gateway_app(
                    GatewaySettings(
                        event_service_url=events.url,
                        registry_url=registry.url,
                        data_dir=tmp_path,
                        gateway_url=f"http://127.0.0.1:{port}",
                        gateway_card_ttl_seconds=0,
                        gateway_default_skill="shout.goal",
                        gateway_replica_id="tracked",
                    )
                ),
                port,
            )
        )
        yield {
            "gateway": gateway.url,
            "tracker": tracker.url,
            "events": events.url,
            "registry": registry.url,
            "memory": memory.url,
        }


async def test_plan_started_by_a_task_is_tracked_under_its_id(services: dict[str, str]):
    async with a2a_client(services["gateway"], streaming=False) as client:
        # No skill named: the configured default skill, the planner's goal.
        task = final_task(await collect(client, send_request(user_message(text="hey"))))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, task
    async with httpx.AsyncClient(verify=verified_tls(), base_url=services["tracker"]) as http:
        for _ in range(100):  # the tracker projects the tap asynchronously
            found = await http.get(f"/v1/tracker/plans/by-correlation/{task.id}")
            if found.status_code != 404 and found.json().get("status") == "completed":
                break
            await asyncio.sleep(0.1)
    assert found.status_code == 200, found.text
    assert found.json()["status"] == "completed"


async def test_artifacts_sent_before_the_answer_are_not_taken_for_it(services: dict[str, str]):
    context = agent_context(services["events"], services["registry"], services["memory"])
    writer = make_writer(context)
    await writer.start()
    try:
        async with a2a_client(services["gateway"], streaming=False) as client:
            request = send_request(
                user_message(data={"topic": "t", "mode": "story"}, skill="write")
            )
            task = final_task(await collect(client, request))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        async with httpx.AsyncClient(verify=verified_tls(), base_url=services["tracker"]) as http:
            for _ in range(100):
                tracked = await http.get(f"/v1/tracker/tasks/{task.id}")
                if tracked.status_code == 200 and tracked.json().get("answer_type"):
                    break
                await asyncio.sleep(0.1)
        assert tracked.json()["answer_type"] == "a2a.task.result", tracked.text
        assert tracked.json()["result"] == {"topic": "t"}
    finally:
        await writer.stop()
        await context.close()
