"""Worker task model: delegate, chain, fan-out with own data, complete/fail, progress."""

from __future__ import annotations

import contextlib

import pytest
import pytest_asyncio
from worker_helpers import echo_tool, next_event

from soorma import (
    DelegationSpec,
    Event,
    PlatformContext,
    ResultContext,
    TaskContext,
    Tool,
    Worker,
)

# One set of services for the module; each test is a tenant of its own on them.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module")
async def context(tenant_context: PlatformContext) -> PlatformContext:
    return tenant_context


@contextlib.asynccontextmanager
async def running(*agents):
    for agent in agents:
        await agent.start()
    try:
        yield
    finally:
        for agent in reversed(agents):
            await agent.stop()


def chaining_worker(context: PlatformContext) -> Worker:
    """research.requested -> search -> summarize -> complete (two chained delegations)."""
    worker = Worker(name="researcher", context=context)

    @worker.on_task("research.requested")
    async def research(task: TaskContext, ctx):
        await task.delegate("search.requested", {"q": task.data["topic"]}, "search.done")

    @worker.on_result("search.done")
    @worker.on_result("summary.done")
    async def step(result: ResultContext, ctx):
        task = await result.restore_task()
        task.state.setdefault("steps", []).append(result.event_type)
        if result.event_type == "search.done":
            await task.delegate(
                "summarize.requested", {"found": result.data["result"]}, "summary.done"
            )
            return
        await task.complete({"steps": task.state["steps"], "summary": result.data["result"]})

    return worker


async def test_worker_chains_sub_tasks_and_answers_with_the_callers_correlation_id(
    context: PlatformContext,
):
    worker = chaining_worker(context)
    tool = echo_tool(context, ["search.requested", "summarize.requested"])
    async with running(tool, worker):
        answer = await context.bus.call(
            "research.requested",
            {"topic": "AI"},
            response_event="research.completed",
            correlation_id="caller-42",
            timeout=20,
        )
    assert answer.type == "research.completed"
    assert answer.correlation_id == "caller-42"
    assert answer.data["status"] == "completed"
    assert answer.data["success"] is True
    result = answer.data["result"]
    assert result["steps"] == ["search.done", "summary.done"]
    assert result["summary"]["echo"] == {"found": {"echo": {"q": "AI"}, "type": "search.requested"}}
    # The context is deleted once the task completed.
    assert await context.memory.get_task_context(answer.data["task_id"]) is None


async def test_parallel_specs_with_the_same_event_type_keep_their_own_data(
    context: PlatformContext,
):
    worker = Worker(name="fanner", context=context)

    @worker.on_task("fan.requested")
    async def fan(task, ctx):
        group = await task.delegate_parallel(
            [DelegationSpec("shard.requested", {"shard": n}, "shard.done") for n in range(4)]
        )
        # Saving after the fan-out races with the answers; it must not erase them.
        task.state["group"] = group
        await task.save()

    @worker.on_result("shard.done")
    async def gather(result, ctx):
        task = await result.restore_task()
        task.update_sub_task_result(result.correlation_id, result.data)
        results = task.aggregate_parallel_results(task.group_of(result.correlation_id))
        if results is not None:
            # Delegation order is kept, and every sub-task saw its own data.
            await task.complete([r["result"]["echo"] for r in results.values()])

    tool = echo_tool(context, ["shard.requested"])
    async with running(tool, worker):
        answer = await context.bus.call("fan.requested", {}, response_event="fan.done", timeout=20)
    assert answer.data["result"] == [{"shard": n} for n in range(4)]


async def test_fail_answers_the_caller_with_success_false(context: PlatformContext):
    worker = Worker(name="grumpy", context=context)

    @worker.on_task("grumpy.requested")
    async def refuse(task, ctx):
        await task.delegate("check.requested", {}, "check.done")

    @worker.on_result("check.done")
    async def after_check(result, ctx):
        task = await result.restore_task()
        await task.fail(ValueError("input rejected by policy"))

    tool = echo_tool(context, ["check.requested"])
    async with running(tool, worker):
        answer = await context.bus.call(
            "grumpy.requested",
            {},
            response_event="grumpy.done",
            correlation_id="c-9",
            timeout=20,
        )
    assert answer.correlation_id == "c-9"
    assert answer.data == {
        "task_id": answer.data["task_id"],
        "status": "failed",
        "success": False,
        "error": "input rejected by policy",
        "error_type": "ValueError",
    }
    assert await context.memory.get_task_context(answer.data["task_id"]) is None


async def test_a_failed_sub_task_result_is_recorded_as_failed(context: PlatformContext):
    worker = Worker(name="tolerant", context=context)
    seen: list[tuple[bool, str | None]] = []

    @worker.on_task("tolerant.requested")
    async def start(task, ctx):
        await task.delegate("flaky.requested", {}, "flaky.done")

    @worker.on_result("flaky.done")
    async def after(result, ctx):
        task = await result.restore_task()
        sub = task.sub_tasks[result.correlation_id]
        seen.append((result.success, result.error))
        await task.complete(
            {"sub_status": sub.status, "is_complete": task.all_sub_tasks_answered()}
        )

    tool = Tool(name="flaky", context=context)

    @tool.on_invoke("flaky.requested")
    async def flaky(request, ctx):
        raise RuntimeError("backend down")

    async with running(tool, worker):
        answer = await context.bus.call(
            "tolerant.requested", {}, response_event="tolerant.done", timeout=20
        )
    assert seen == [(False, "backend down")]
    assert answer.data["result"] == {"sub_status": "failed", "is_complete": True}


async def test_report_progress_publishes_task_progress_on_system_events(
    context: PlatformContext,
):
    worker = Worker(name="progressive", context=context)

    @worker.on_task("long.requested")
    async def long_job(task, ctx):
        await task.report_progress(0.5, "halfway", stage="crunching")
        await task.complete({"ok": True})

    async with context.bus.subscribe(["system-events"], event_types=["task.progress"]) as sub:
        await sub.wait_ready()
        async with running(worker):
            answer = await context.bus.call(
                "long.requested",
                {},
                response_event="long.done",
                correlation_id="c-p",
                timeout=20,
            )
            progress = await next_event(sub)
    assert answer.data["result"] == {"ok": True}
    assert progress.type == "task.progress"
    assert progress.correlation_id == "c-p"
    assert progress.data["progress"] == 0.5
    assert progress.data["message"] == "halfway"
    assert progress.data["stage"] == "crunching"
    assert progress.data["task_id"] == answer.data["task_id"]


async def test_a_late_result_for_a_finished_task_is_acked_not_retried(context: PlatformContext):
    worker = Worker(name="late", context=context)
    calls: list[str] = []

    @worker.on_result("x.done")
    async def on_x(result, ctx):
        calls.append(result.correlation_id)
        await result.restore_task()

    handler = worker.handlers[0]
    event = Event.from_delivery(
        {
            "id": "e1",
            "source": "t",
            "type": "x.done",
            "topic": "action-results",
            "data": {"success": True},
            "correlation_id": "unknown-sub-task",
        }
    )
    # Does not raise: the wrapper treats "no task owns this sub-task" as done.
    await handler.func(event, context)
    assert calls == ["unknown-sub-task"]


async def test_decorators_check_signatures_and_return_the_function(context: PlatformContext):
    worker = Worker(name="strict", context=context)

    async def handler(task, ctx):
        return None

    assert worker.on_task("a.requested")(handler) is handler
    assert worker.on_result("a.done")(worker.on_result("b.done")(handler)) is handler
    assert [(h.topic, h.event_type) for h in worker.handlers] == [
        ("action-requests", "a.requested"),
        ("action-results", "b.done"),
        ("action-results", "a.done"),
    ]
    with pytest.raises(TypeError, match="async def handler\\(task, context\\)"):
        worker.on_task("c.requested")(lambda task, ctx: None)

    async def one_arg(result):
        return None

    with pytest.raises(TypeError, match="2 positional arguments"):
        worker.on_result("c.done")(one_arg)
    with pytest.raises(ValueError):
        worker.on_result("c.done", topic="Bad Topic")


async def test_task_save_and_restore_round_trip(context: PlatformContext):
    request = Event.from_delivery(
        {
            "id": "req-1",
            "source": "t",
            "type": "job.requested",
            "topic": "action-requests",
            "data": {"n": 1},
            "correlation_id": "orig",
            "response_event": "job.done",
            "plan_id": "plan-7",
            "session_id": "sess-1",
            "tenant_id": context.settings.tenant_id,
        }
    )
    task = TaskContext.from_event(request, context, agent_id="w")
    task.state["phase"] = "one"
    await task.save()
    restored = await TaskContext.restore("req-1", context)
    assert restored is not None
    assert (restored.task_id, restored.correlation_id, restored.response_event) == (
        "req-1",
        "orig",
        "job.done",
    )
    assert restored.plan_id == "plan-7" and restored.session_id == "sess-1"
    assert restored.agent_id == "w"
    # SDK bookkeeping stays out of the handler's state.
    assert restored.state == {"phase": "one"}
    assert await TaskContext.restore("missing", context) is None
    with pytest.raises(ValueError):
        await task.delegate_parallel([])


async def test_a_worker_without_a_memory_client_refuses_to_start(context: PlatformContext):
    bare = PlatformContext(bus=context.bus)
    worker = Worker(name="amnesiac", context=bare)

    @worker.on_task("x.requested")
    async def handle(task, ctx):
        return None

    with pytest.raises(RuntimeError, match=r"needs context\.memory"):
        await worker.start()
    assert not worker.running
