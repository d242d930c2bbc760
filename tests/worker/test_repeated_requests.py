"""A request handled once is not run again when it comes back (issue 9, item 1).

The bus is at-least-once, and a planner that died before its ack re-sends its request
under the same event id. A Tool answers such a request from its recorded answer; a
Worker answers a finished task from its recorded answer and re-sends (same ids) the
open requests of a task it delegated, without running the handler again. Each case uses
a fresh agent for the second delivery, as a restarted process would be.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
import pytest_asyncio
from worker_helpers import next_event

from soorma import PlatformContext, PlatformSettings, Tool, Worker
from soorma.client import verified_tls
from testsupport.server import LiveServer

# One set of services for the module; each test is a tenant of its own on them.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module")
async def context(tenant_context: PlatformContext) -> PlatformContext:
    return tenant_context


@pytest.fixture
def memory_service(shared_memory_service: LiveServer) -> LiveServer:
    return shared_memory_service


def request_envelope(
    context: PlatformContext, event_type: str, response_event: str, data: dict
) -> object:
    return context.bus.build_event(
        "action-requests",
        event_type,
        data,
        correlation_id="caller-1",
        response_event=response_event,
        response_topic="action-results",
    )


def counting_tool(context: PlatformContext, runs: list[str]) -> Tool:
    tool = Tool(name="pricer", context=context)

    @tool.on_invoke("price.requested")
    async def price(request, ctx):
        runs.append(request.request_id)
        return {"price": 42}

    return tool


async def test_tool_answers_a_repeated_request_from_its_recorded_answer(
    context: PlatformContext,
):
    bus = context.bus
    runs: list[str] = []
    request = request_envelope(context, "price.requested", "price.done", {"item": "x"})
    async with bus.subscribe(["action-results"], event_types=["price.done"]) as answers:
        await answers.wait_ready()
        first = counting_tool(context, runs)
        await first.start()
        try:
            await bus.publish_event(request)
            one = await next_event(answers)
        finally:
            await first.stop()
        second = counting_tool(context, runs)  # a restarted process: nothing in memory
        await second.start()
        try:
            await bus.publish_event(request)  # the same request, re-sent
            two = await next_event(answers)
        finally:
            await second.stop()
    assert runs == [request.id]
    assert two.id == one.id and two.data == one.data == {
        "request_id": request.id,
        "success": True,
        "result": {"price": 42},
    }
    assert two.correlation_id == "caller-1"


def finishing_worker(context: PlatformContext, runs: list[str]) -> Worker:
    worker = Worker(name="packer", context=context)

    @worker.on_task("pack.requested")
    async def pack(task, ctx):
        runs.append(task.task_id)
        await task.complete({"boxes": 2})

    return worker


async def test_worker_answers_a_repeated_finished_task_without_running_it(
    context: PlatformContext,
):
    bus = context.bus
    runs: list[str] = []
    request = request_envelope(context, "pack.requested", "pack.done", {})
    async with bus.subscribe(["action-results"], event_types=["pack.done"]) as answers:
        await answers.wait_ready()
        seen = []
        for _ in range(2):
            worker = finishing_worker(context, runs)  # the second one: a restart
            await worker.start()
            try:
                await bus.publish_event(request)
                seen.append(await next_event(answers))
            finally:
                await worker.stop()
    assert runs == [request.id]
    assert seen[0].id == seen[1].id and seen[1].data["result"] == {"boxes": 2}
    assert seen[1].correlation_id == "caller-1"


def delegating_worker(context: PlatformContext, runs: list[str]) -> Worker:
    worker = Worker(name="buyer", context=context)

    @worker.on_task("buy.requested")
    async def buy(task, ctx):
        runs.append(task.task_id)
        await task.delegate("quote.requested", {"item": "desk"}, "quote.done")

    @worker.on_result("quote.done")
    async def quoted(result, ctx):
        task = await result.restore_task()
        await task.complete({"quote": result.data})

    return worker


async def test_worker_re_sends_the_open_delegation_of_a_repeated_task_under_its_id(
    context: PlatformContext,
):
    bus = context.bus
    runs: list[str] = []
    request = request_envelope(context, "buy.requested", "buy.done", {})
    async with (
        bus.subscribe(["action-requests"], event_types=["quote.requested"]) as quotes,
        bus.subscribe(["action-results"], event_types=["buy.done"]) as answers,
    ):
        await quotes.wait_ready()
        await answers.wait_ready()
        first = delegating_worker(context, runs)
        await first.start()
        try:
            await bus.publish_event(request)
            sent = await next_event(quotes)
        finally:
            await first.stop()
        second = delegating_worker(context, runs)
        await second.start()
        try:
            await bus.publish_event(request)  # the task again, its sub-task still open
            again = await next_event(quotes)
            await bus.respond("quote.done", {"price": 99}, correlation_id=sent.correlation_id)
            answer = await next_event(answers)
        finally:
            await second.stop()
    assert runs == [request.id]
    assert again.id == sent.id and again.correlation_id == sent.correlation_id
    assert answer.data["result"] == {"quote": {"price": 99}}


async def test_recorded_answers_are_per_tenant_first_wins_and_checked(
    memory_service: LiveServer,
):
    headers_a = {"X-Tenant-ID": "tenant-a"}
    headers_b = {"X-Tenant-ID": "tenant-b"}
    async with httpx.AsyncClient(verify=verified_tls(), base_url=memory_service.url) as http:
        url = "/v1/memory/answers/req-1"
        first = await http.put(url, json={"answer": {"n": 1}}, headers=headers_a)
        assert first.status_code == 200, first.text
        kept = await http.put(url, json={"answer": {"n": 2}}, headers=headers_a)
        assert kept.json()["answer"] == {"n": 1}  # the first answer wins
        assert (await http.get(url, headers=headers_a)).json()["answer"] == {"n": 1}
        # Tenant B sees nothing of tenant A's, and keeps its own.
        missing = await http.get(url, headers=headers_b)
        assert missing.status_code == 404 and "req-1" in missing.json()["error"]["message"]
        own = await http.put(url, json={"answer": {"n": 3}}, headers=headers_b)
        assert own.json()["answer"] == {"n": 3}
        assert (await http.get(url, headers=headers_a)).json()["answer"] == {"n": 1}
        bad = await http.put(
            url, json={"answer": {"n": 1}, "retention_seconds": 0}, headers=headers_a
        )
        assert bad.status_code == 422 and "retention_seconds" in bad.text
        not_object = await http.put(url, json={"answer": [1]}, headers=headers_a)
        assert not_object.status_code == 422 and "answer" in not_object.text
        # An expired answer is gone and may be replaced.
        short = await http.put(
            "/v1/memory/answers/req-2",
            json={"answer": {"n": 1}, "retention_seconds": 1},
            headers=headers_a,
        )
        assert short.status_code == 200
        await asyncio.sleep(1.1)
        assert (await http.get("/v1/memory/answers/req-2", headers=headers_a)).status_code == 404
        replaced = await http.put(
            "/v1/memory/answers/req-2", json={"answer": {"n": 5}}, headers=headers_a
        )
        assert replaced.json()["answer"] == {"n": 5}


async def test_memory_client_records_and_reads_answers(memory_service: LiveServer):
    settings = PlatformSettings(memory_url=memory_service.url, tenant_id="t-client")
    async with PlatformContext.from_env(settings=settings) as ctx:
        assert ctx.memory is not None
        assert await ctx.memory.recorded_answer("r-9") is None
        assert await ctx.memory.record_answer("r-9", {"ok": True}) == {"ok": True}
        assert await ctx.memory.record_answer("r-9", {"ok": False}) == {"ok": True}
        assert await ctx.memory.recorded_answer("r-9") == {"ok": True}
