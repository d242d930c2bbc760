"""Two deliveries of one request in flight at once run it once (issue 9, claims).

A lease that ran out while the event service was down, or a planner re-sending its
request after a restart, puts a second copy of a request in another replica's hands
while the first still runs. Here two replicas of one agent in separate groups each get
their own copy of the same request (the same event id) at the same time; the handler
is slow, so neither has recorded an answer when the other looks.

Most run in process (``PlatformHarness``) on a manual clock, on SQLite and PostgreSQL:
the handler's work and the claim's lease take clock time, which the test moves on.
One tool test and the lapse of a claim also run in real time against the services
under uvicorn (the system tier).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import pytest
import pytest_asyncio
from worker_helpers import collect, next_event

from soorma import AgentOptions, PlatformContext, Tool, Worker, run_once
from soorma.testing import PlatformHarness
from soorma_common.clock import ManualClock

pytestmark = pytest.mark.asyncio


async def until(predicate: Callable[[], bool], *, within: float = 10.0) -> None:
    """Wait (real time) until ``predicate()`` holds; polls, as what it looks at (a
    handler's list, a log record) has no event to await."""
    async with asyncio.timeout(within):
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.005)


@dataclass
class Clocked:
    platform: PlatformHarness
    clock: ManualClock

    @property
    def context(self) -> PlatformContext:
        return self.platform.context

    async def advance_until(
        self, predicate: Callable[[], bool], *, step: float = 0.5, most: float = 30.0
    ) -> None:
        """Move the clock on ``step`` seconds at a time, each time giving what that set
        off a moment of real time to happen (database calls), until ``predicate()``."""
        moved = 0.0
        while not predicate():
            if moved >= most:
                raise AssertionError(f"still not so after {most:g} s on the clock")
            await self.clock.advance(step)
            moved += step
            with contextlib.suppress(TimeoutError):
                await until(predicate, within=0.2)


@pytest_asyncio.fixture
async def clocked(db_url: str) -> AsyncIterator[Clocked]:
    """The platform in process on a manual clock, its memory on SQLite or PostgreSQL."""
    clock = ManualClock()
    memory = {"memory_database_url": db_url}
    async with PlatformHarness(clock=clock, memory_settings=memory) as platform:
        yield Clocked(platform, clock)


def waiting(caplog: pytest.LogCaptureFixture) -> Callable[[], bool]:
    """Whether a delivery has found the request's claim held and waits for its answer."""
    caplog.set_level(logging.INFO, logger="soorma.agent")
    return lambda: any("waiting for its answer" in r.getMessage() for r in caplog.records)


def request_envelope(context: PlatformContext, event_type: str, response_event: str) -> object:
    return context.bus.build_event(
        "action-requests",
        event_type,
        {},
        correlation_id="caller-1",
        response_event=response_event,
        response_topic="action-results",
    )


def slow_tool(context: PlatformContext | None, runs: list[str], group: str) -> Tool:
    tool = Tool(name="pricer", options=AgentOptions(group=group), context=context)

    @tool.on_invoke("price.requested")
    async def price(request, ctx):
        runs.append(request.request_id)
        await ctx.clock.sleep(1.0)  # real time, unless the platform runs on a manual clock
        return {"price": 42, "run": len(runs)}

    return tool


async def test_two_tool_replicas_given_one_request_at_once_run_it_once(
    clocked: Clocked, caplog: pytest.LogCaptureFixture
):
    runs: list[str] = []
    platform, waits = clocked.platform, waiting(caplog)
    request = request_envelope(platform.context, "price.requested", "price.done")
    replicas = [slow_tool(None, runs, group) for group in ("pricer-a", "pricer-b")]
    await platform.start(*replicas)
    await platform.context.bus.publish_event(request)  # one copy to each replica
    await until(lambda: bool(runs) and waits())  # one runs it, the other waits
    await clocked.advance_until(lambda: len(platform.events("price.done")) == 2)
    both = platform.events("price.done")
    assert runs == [request.id]
    assert both[0].id == both[1].id and both[0].data == both[1].data
    assert both[0].data["result"] == {"price": 42, "run": 1}


async def test_two_tool_replicas_given_one_request_at_once_run_it_once_in_real_time(
    light_context: PlatformContext,
):
    context = light_context
    runs: list[str] = []
    request = request_envelope(context, "price.requested", "price.done")
    replicas = [slow_tool(context, runs, group) for group in ("pricer-a", "pricer-b")]
    async with context.bus.subscribe(["action-results"], event_types=["price.done"]) as answers:
        await answers.wait_ready()
        for tool in replicas:
            await tool.start()
        try:
            await context.bus.publish_event(request)  # one copy to each replica
            both = await collect(answers, 2)
        finally:
            for tool in replicas:
                await tool.stop()
    assert runs == [request.id]
    assert both[0].id == both[1].id and both[0].data == both[1].data
    assert both[0].data["result"] == {"price": 42, "run": 1}


def slow_worker(context: PlatformContext | None, runs: list[str], group: str) -> Worker:
    worker = Worker(name="packer", options=AgentOptions(group=group), context=context)

    @worker.on_task("pack.requested")
    async def pack(task, ctx):
        runs.append(task.task_id)
        await ctx.clock.sleep(1.0)
        await task.complete({"boxes": len(runs)})

    return worker


async def test_two_worker_replicas_given_one_task_at_once_run_it_once(
    clocked: Clocked, caplog: pytest.LogCaptureFixture
):
    runs: list[str] = []
    platform, waits = clocked.platform, waiting(caplog)
    request = request_envelope(platform.context, "pack.requested", "pack.done")
    replicas = [slow_worker(None, runs, group) for group in ("packer-a", "packer-b")]
    await platform.start(*replicas)
    await platform.context.bus.publish_event(request)
    await until(lambda: bool(runs) and waits())
    await clocked.advance_until(lambda: len(platform.events("pack.done")) == 2)
    both = platform.events("pack.done")
    assert runs == [request.id]
    assert both[0].id == both[1].id and both[0].data["result"] == both[1].data["result"]
    assert both[0].data["result"] == {"boxes": 1}


async def test_a_claim_left_by_a_killed_holder_is_taken_when_its_lease_runs_out(
    clocked: Clocked, caplog: pytest.LogCaptureFixture
):
    """A replica killed while running a request leaves its claim, unrenewed: another
    delivery waits for it to lapse (not for ever, and not running it meanwhile)."""
    runs: list[str] = []
    platform, clock = clocked.platform, clocked.clock
    request = request_envelope(platform.context, "price.requested", "price.done")
    memory = platform.context.memory
    assert memory is not None
    held = await memory.claim_request(f"pricer:{request.id}", "killed-replica", lease_seconds=2)
    assert held.status == "granted"
    await platform.start(slow_tool(None, runs, "pricer"))
    await platform.context.bus.publish_event(request)
    await until(waiting(caplog))
    for seconds in (1.0, 0.999):
        await clock.advance(seconds)
        await asyncio.sleep(0.1)  # a look at the claim, had it lapsed, would run it now
        assert runs == []  # the claim is live: its holder may still answer
    # The lease runs out now: a look soon after (the longest pause between looks is a
    # second) takes the claim and runs the request.
    await clocked.advance_until(lambda: bool(runs), step=0.05, most=1.0)
    assert runs == [request.id]
    await clocked.advance_until(lambda: bool(platform.events("price.done")))
    [answer] = platform.events("price.done")
    assert answer.data["result"] == {"price": 42, "run": 1}


async def test_a_claim_left_by_a_killed_holder_is_taken_when_its_lease_runs_out_in_real_time(
    light_context: PlatformContext,
):
    context = light_context
    runs: list[str] = []
    request = request_envelope(context, "price.requested", "price.done")
    assert context.memory is not None
    held = await context.memory.claim_request(
        f"pricer:{request.id}", "killed-replica", lease_seconds=2
    )
    assert held.status == "granted"
    tool = slow_tool(context, runs, "pricer")
    async with context.bus.subscribe(["action-results"], event_types=["price.done"]) as answers:
        await answers.wait_ready()
        await tool.start()
        try:
            started = time.monotonic()
            await context.bus.publish_event(request)
            await asyncio.sleep(1.0)
            assert runs == []  # the claim is live: its holder may still answer
            answer = await next_event(answers)
        finally:
            await tool.stop()
    assert runs == [request.id]
    assert answer.data["result"] == {"price": 42, "run": 1}
    assert 1.8 <= time.monotonic() - started < 8


def failing_once_worker(context: PlatformContext, runs: list[str]) -> Worker:
    worker = Worker(
        name="flaky",
        context=context,
        options=AgentOptions(visibility_timeout=30),
    )

    @worker.on_task("flaky.requested")
    async def flaky(task, ctx):
        runs.append(task.task_id)
        if len(runs) == 1:
            raise RuntimeError("first try fails")
        await task.complete({"tries": len(runs)})

    return worker


async def test_a_failed_handler_gives_its_claim_back_so_the_redelivery_runs_at_once(
    context: PlatformContext,
):
    runs: list[str] = []
    request = request_envelope(context, "flaky.requested", "flaky.done")
    worker = failing_once_worker(context, runs)
    worker.answers.claim_lease = 30.0  # a lapse would take longer than the deadline
    async with context.bus.subscribe(["action-results"], event_types=["flaky.done"]) as answers:
        await answers.wait_ready()
        await worker.start()
        try:
            await context.bus.publish_event(request)
            answer = await next_event(answers, within=15)
        finally:
            await worker.stop()
    assert runs == [request.id, request.id]
    assert answer.data["result"] == {"tries": 2}


async def test_run_once_called_twice_at_once_with_one_key_runs_the_work_once(
    clocked: Clocked, caplog: pytest.LogCaptureFixture
):
    runs: list[int] = []
    context, waits = clocked.context, waiting(caplog)

    async def work() -> dict:
        runs.append(1)
        await context.clock.sleep(1.0)
        return {"found": len(runs)}

    key = f"searcher:{time.time_ns()}"
    both = asyncio.gather(run_once(context, key, work), run_once(context, key, work))
    await until(lambda: bool(runs) and waits())
    await clocked.advance_until(both.done)
    assert runs == [1]
    assert both.result() == [{"found": 1}, {"found": 1}]
