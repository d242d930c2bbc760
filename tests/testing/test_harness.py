"""PlatformHarness: real services in process, agents started on them, answers and events."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from soorma import Agent, AgentOptions, Tool, Worker
from soorma.testing import PlatformHarness
from soorma_common.events import NOTIFICATION_EVENTS

pytestmark = pytest.mark.asyncio


def greeter(name: str = "greeter") -> Tool:
    tool = Tool(name=name, description="Greets.")

    @tool.on_invoke("greet.requested")
    async def greet(request: Any, context: Any) -> dict[str, str]:
        if not request.data.get("name"):
            raise ValueError("data.name is required")
        return {"greeting": f"Hello, {request.data['name']}!"}

    return tool


async def test_a_tool_answers_a_call_and_every_event_is_recorded():
    tool = greeter()
    async with PlatformHarness() as platform:
        await platform.start(tool)
        answer = await platform.call(
            "greet.requested", {"name": "Ada"}, response_event="greet.completed"
        )
        assert answer.data["success"] is True
        assert answer.data["result"] == {"greeting": "Hello, Ada!"}
        # Recorded as soon as the publishes returned, with what the service stamped.
        request, response = platform.events()
        assert (request.type, request.topic, request.source) == (
            "greet.requested",
            "action-requests",
            "soorma-test",
        )
        assert (response.type, response.topic, response.source) == (
            "greet.completed",
            "action-results",
            "greeter",
        )
        assert response.correlation_id == request.correlation_id == answer.correlation_id
        assert response.tenant_id == "default" and response.user_id == "anonymous"
        assert platform.events("greet.*", source="greeter") == [response]
        assert platform.recorder.by_topic() == {
            "action-requests": [request],
            "action-results": [response],
        }
        assert list(platform.recorder.by_type()) == ["greet.requested", "greet.completed"]
        assert platform.events(topic="business-facts") == []
        # The tool registered itself with the real registry.
        agent = await platform.context.registry.get_agent("greeter")
        assert agent.name == "greeter"
    assert not tool.running


async def test_a_failing_handler_answers_with_the_error():
    async with PlatformHarness() as platform:
        await platform.start(greeter())
        answer = await platform.call("greet.requested", {}, response_event="greet.completed")
    assert answer.data["success"] is False
    assert "data.name is required" in answer.data["error"]


async def test_a_call_nobody_answers_times_out_naming_what_was_published():
    async with PlatformHarness(timeout=0.2) as platform:
        with pytest.raises(
            TimeoutError,
            match=r"0 of 1 event\(s\) matching type='x.done'.*"
            r"last published: x.requested",
        ):
            await platform.call("x.requested", {}, response_event="x.done")


async def test_request_returns_at_once_and_the_answer_is_awaited_later():
    seen: list[str] = []
    agent = Agent(name="echo")

    @agent.on_event("echo.requested", topic="action-requests")
    async def echo(event: Any, context: Any) -> None:
        seen.append(event.data["text"])
        await context.bus.respond(
            event.response_event, {"text": event.data["text"]}, correlation_id=event.correlation_id
        )

    async with PlatformHarness() as platform:
        await platform.start(agent)
        pending = await platform.request(
            "echo.requested", {"text": "hi"}, response_event="echo.done"
        )
        assert pending.correlation_id == pending.event_id
        answer = await pending
        assert answer.data == {"text": "hi"} and seen == ["hi"]
        # Awaiting again finds the same (recorded) answer.
        assert (await pending.wait()).id == answer.id


async def test_async_with_start_stops_and_deregisters_the_agent_after_the_block():
    tool = greeter()
    async with PlatformHarness() as platform:
        async with platform.start(tool):
            assert tool.running
            assert [a.name for a in await platform.context.registry.list_agents()] == ["greeter"]
        assert not tool.running
        assert await platform.context.registry.list_agents() == []
        # A stopped agent starts again on the same harness (same consumer group).
        await platform.start(tool)
        answer = await platform.call(
            "greet.requested", {"name": "Bo"}, response_event="greet.completed"
        )
        assert answer.data["result"]["greeting"] == "Hello, Bo!"


async def test_wait_for_event_counts_past_and_future_events():
    async with PlatformHarness() as platform:
        await platform.publish("business-facts", "order.placed", {"n": 1})
        first = await platform.wait_for_event("order.*")
        assert first.data == {"n": 1}
        await platform.context.bus.publish_batch(
            [
                platform.context.bus.build_event("business-facts", "order.placed", {"n": n})
                for n in (2, 3)
            ]
        )
        third = await platform.wait_for_event("order.placed", count=3)
        assert third.data == {"n": 3}
        assert [e.data["n"] for e in platform.events(where=lambda e: e.data["n"] > 1)] == [2, 3]
        with pytest.raises(TimeoutError, match="3 of 4"):
            await platform.wait_for_event("order.placed", count=4, timeout=0.05)


async def test_a_worker_task_is_visible_while_it_waits_for_a_human():
    worker = Worker(name="approver")

    @worker.on_task("approval.requested")
    async def ask(task: Any, context: Any) -> None:
        await task.request_human_input(
            "approve?", response_event="approval.given", timeout_seconds=60
        )

    @worker.on_result("approval.given", topic=NOTIFICATION_EVENTS)
    async def approved(result: Any, context: Any) -> None:
        task = await result.restore_task()
        await task.complete({"approved": result.data["ok"]})

    async with PlatformHarness() as platform:
        await platform.start(worker)
        pending = await platform.request("approval.requested", {}, response_event="approval.done")
        question = await platform.wait_for_event("notification.human_input")
        task = await platform.task(sub_task_id=question.correlation_id)
        assert task is not None and task.task_id == question.data["task_id"]
        assert await platform.task(task.task_id) == task
        await platform.publish(
            NOTIFICATION_EVENTS,
            "approval.given",
            {"ok": True},
            correlation_id=question.correlation_id,
        )
        answer = await pending
        assert answer.data["result"] == {"approved": True}


async def test_each_harness_is_a_fresh_platform():
    async with PlatformHarness() as first:
        await first.context.memory.store("k", {"v": 1}, plan_id="p-1")
        await first.publish("business-facts", "x.happened")
        assert await first.context.memory.retrieve("k", plan_id="p-1") == {"v": 1}
    async with PlatformHarness() as second:
        assert await second.context.memory.retrieve("k", plan_id="p-1") is None
        assert second.events() == []


async def test_tenants_are_kept_apart_as_by_the_real_services():
    async with PlatformHarness(tenant_id="acme") as platform:
        await platform.context.memory.store("k", {"v": 1}, plan_id="p-1")
        await platform.publish("business-facts", "x.happened")
        globex = platform.new_context(tenant_id="globex")
        assert await globex.memory.retrieve("k", plan_id="p-1") is None
        await globex.bus.publish("business-facts", "y.happened")
        assert [(e.type, e.tenant_id) for e in platform.events()] == [
            ("x.happened", "acme"),
            ("y.happened", "globex"),
        ]
        assert [e.type for e in platform.events(tenant_id="globex")] == ["y.happened"]
        assert await platform.context.memory.retrieve("k", plan_id="p-1") == {"v": 1}


async def test_environment_settings_do_not_leak_into_the_harness(monkeypatch: Any):
    # A developer's shell pointing at Redis and JWT auth must not change the harness.
    monkeypatch.setenv("SOORMA_EVENT_BACKEND", "redis")
    monkeypatch.setenv("SOORMA_REDIS_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("SOORMA_AUTH_MODE", "jwt")
    monkeypatch.setenv("SOORMA_EVENT_SERVICE_URL", "http://127.0.0.1:1")
    async with PlatformHarness() as platform:
        await platform.start(greeter())
        answer = await platform.call(
            "greet.requested", {"name": "Ada"}, response_event="greet.completed"
        )
    assert answer.data["success"] is True


async def test_the_services_leave_the_test_logging_alone():
    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    async with PlatformHarness():
        assert (list(root.handlers), root.level) == before
    assert (list(root.handlers), root.level) == before


async def test_a_handler_that_raises_is_named_when_the_answer_never_comes():
    agent = Agent(
        name="broken",
        options=AgentOptions(max_deliveries=2),
    )

    @agent.on_event("x.requested", topic="action-requests")
    async def explode(event: Any, context: Any) -> None:
        raise ValueError("boom")

    async with PlatformHarness(timeout=0.5) as platform:
        await platform.start(agent)
        with pytest.raises(
            TimeoutError,
            match=r"errors logged: agent broken: handler .*explode "
            r"failed on x\.requested .*ValueError: boom",
        ):
            await platform.call("x.requested", {}, response_event="x.done")
        assert any("ValueError: boom" in error for error in platform.errors)


async def test_a_harness_on_an_earlier_data_dir_finds_its_plans(tmp_path: Any):
    # The platform "restarts": memory and registry data survive, the in-memory log does not.
    async with PlatformHarness(data_dir=tmp_path) as platform:
        await platform.context.memory.store("k", {"v": 1}, plan_id="p-1")
    async with PlatformHarness(data_dir=tmp_path) as platform:
        assert await platform.context.memory.retrieve("k", plan_id="p-1") == {"v": 1}
    assert (tmp_path / "memory.db").exists()
