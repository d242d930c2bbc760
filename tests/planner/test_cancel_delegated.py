"""Cancelling a plan cancels the worker tasks it delegated, and theirs.

A plan's step is a Worker task whose handler delegated a sub-task to another Worker and
then blocks; the sub-task's handler blocks too. Cancelling the plan interrupts both
handlers (``CancelledError``), marks both task contexts cancelled, publishes no answer
for either (also when a sub-task's answer arrives late), and the tracker shows both
cancelled. A finished task and another tenant's task are out of a cancel's reach.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest
import pytest_asyncio
from planner_support import Platform, wait_for

from soorma import PlatformContext, Worker
from soorma.agents._cancel import step_cancel_requests
from soorma.agents.planner import Planner
from soorma.cli import main
from soorma.tasking.cancelled import cancellation
from soorma_common.bookkeeping import ChoreographyBookkeeping, PlanBookkeeping
from soorma_common.events import SYSTEM_EVENTS, TASK_CANCEL_REQUESTED
from soorma_common.state import PlanDefinition, StateAction, StateConfig, StateTransition
from testsupport.capture import capture
from testsupport.server import serve
from testsupport.settle import MARKER, caught_up, settled
from tracker_service import create_app as create_tracker_app
from tracker_service.settings import Settings as TrackerSettings

pytestmark = pytest.mark.asyncio

TRIP = {
    "start": StateConfig(state_name="start", default_next="research"),
    "research": StateConfig(
        state_name="research",
        action=StateAction(event_type="research.requested", response_event="research.done"),
        transitions=[StateTransition(on_event="research.done", to_state="done")],
    ),
    "done": StateConfig(state_name="done", is_terminal=True),
}


@pytest_asyncio.fixture
async def tracked(platform: Platform, tmp_path: Any) -> AsyncIterator[PlatformContext]:
    """A context of the platform with a tracker projecting its events."""
    settings = TrackerSettings(
        tracker_database_url=f"sqlite+aiosqlite:///{tmp_path}/tracker.db",
        event_service_url=platform.events,
        memory_url=platform.memory,
        registry_url=platform.registry,
        tracker_visibility_timeout=2.0,
    )
    async with serve(create_tracker_app(settings)) as tracker:
        context = PlatformContext.from_env(
            settings=dataclasses.replace(platform.settings, tracker_url=tracker.url)
        )
        async with context:
            yield context


def _context(platform: Platform, **identity: str) -> PlatformContext:
    return PlatformContext.from_env(settings=dataclasses.replace(platform.settings, **identity))


class Blocked:
    """What a blocking handler went through: started, interrupted, cleaned up."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.interrupted = asyncio.Event()
        self.cleaned_up = asyncio.Event()
        self.runs = 0


def workers(platform: Platform, research: Blocked, fetch: Blocked) -> tuple[Worker, Worker]:
    """``researcher`` delegates ``source.fetch`` to ``fetcher`` and waits; both block."""
    researcher = Worker(name="researcher", context=platform.context())
    fetcher = Worker(name="fetcher", context=platform.context())

    @researcher.on_task("research.requested")
    async def start_research(task: Any, context: PlatformContext) -> None:
        research.runs += 1
        await task.delegate("source.fetch", {"url": "x"}, "source.fetched")
        research.started.set()
        try:
            await research.release.wait()
        except asyncio.CancelledError:
            research.interrupted.set()
            raise
        finally:
            research.cleaned_up.set()

    @researcher.on_result("source.fetched")
    async def fetched(result: Any, context: PlatformContext) -> None:
        task = await result.restore_task()
        await task.complete({"source": result.data})

    @fetcher.on_task("source.fetch")
    async def fetch_source(task: Any, context: PlatformContext) -> None:
        fetch.runs += 1
        fetch.started.set()
        try:
            await fetch.release.wait()
        except asyncio.CancelledError:
            fetch.interrupted.set()
            raise
        finally:
            fetch.cleaned_up.set()
        await task.complete({"page": "..."})

    return researcher, fetcher


async def test_cancelling_a_plan_cancels_its_worker_task_and_the_sub_task_it_delegated(
    platform: Platform, tracked: PlatformContext, capsys: pytest.CaptureFixture[str]
) -> None:
    context = tracked
    research, fetch = Blocked(), Blocked()
    for agent in (
        Planner(
            name="trip",
            context=platform.context(),
            plan_definition=PlanDefinition(plan_type="trip.goal", states=TRIP),
        ),
        *workers(platform, research, fetch),
    ):
        await platform.start(agent)
    async with (
        capture(context, ["action-requests"], ["research.requested", "source.fetch"]) as asks,
        capture(
            context,
            ["action-results"],
            ["research.done", "source.fetched", "trip.done", MARKER],
        ) as answers,
        capture(context, [SYSTEM_EVENTS], ["task.cancelled", MARKER]) as cancelled,
    ):
        await context.bus.request("trip.goal", {}, "trip.done", correlation_id="trip-1")
        await asyncio.wait_for(research.started.wait(), 20)
        await asyncio.wait_for(fetch.started.wait(), 20)
        await wait_for(lambda: len(asks) == 2)
        step = next(e for e in asks if e.type == "research.requested")
        sub = next(e for e in asks if e.type == "source.fetch")
        assert step.plan_id

        # Tenant B forges a cancel request for tenant A's running task: nothing happens.
        async with _context(platform, tenant_id="tenant-b") as other:
            await other.bus.publish(
                SYSTEM_EVENTS,
                TASK_CANCEL_REQUESTED,
                {"task_id": step.id, "plan_id": step.plan_id, "reason": "not mine"},
                correlation_id=step.id,
            )
            await settled(other)
        await settled(context, in_flight={"researcher": 1, "fetcher": 1})
        await caught_up(context, cancelled, SYSTEM_EVENTS)
        assert not research.cleaned_up.is_set() and without_markers(cancelled) == []
        assert cancellation(await context.memory.get_task_context(step.id)) is None

        await context.cancel_plan(step.plan_id, "changed my mind")
        await asyncio.wait_for(research.interrupted.wait(), 20)
        await asyncio.wait_for(fetch.interrupted.wait(), 20)
        await wait_for(lambda: len({e.data["task_id"] for e in without_markers(cancelled)}) == 2)
        # Asked again: the plan and its workers announce the same events (same ids).
        await context.cancel_plan(step.plan_id, "changed my mind again")
        # The sub-task's answer arrives after all: it is ignored.
        late = await context.bus.respond(
            "source.fetched", {"page": "late"}, correlation_id=sub.correlation_id
        )
        # Every agent has handled all of it, and the captures have what they published.
        await settled(context)
        await caught_up(context, answers, "action-results")
        await caught_up(context, cancelled, SYSTEM_EVENTS)
    answers, cancelled = without_markers(answers), without_markers(cancelled)

    assert research.cleaned_up.is_set() and fetch.cleaned_up.is_set()
    assert (research.runs, fetch.runs) == (1, 1)
    plan_answers = [a for a in answers if a.type == "trip.done"]
    # A repeated announcement carries the same id (consumers drop it): one answer.
    assert len({a.id for a in plan_answers}) == 1
    assert plan_answers[0].data["status"] == "cancelled"
    # No answer from either worker: only the late answer this test sent.
    assert [a.id for a in answers if a.type != "trip.done"] == [late]
    assert len({e.id for e in cancelled}) == 2
    by_task = {e.data["task_id"]: e for e in cancelled}
    assert set(by_task) == {step.id, sub.id}
    assert by_task[step.id].data["reason"] == f"plan {step.plan_id} cancelled: changed my mind"
    assert by_task[sub.id].data["reason"] == (
        f"task {step.id} cancelled: plan {step.plan_id} cancelled: changed my mind"
    )
    for task_id in (step.id, sub.id):
        mark = cancellation(await context.memory.get_task_context(task_id))
        assert mark is not None and mark["status"] == "cancelled"

    async def tracked_cancelled() -> bool:
        tasks = [await context.tracker.task(t) for t in (step.id, sub.id)]
        return all(t.status == "cancelled" for t in tasks)

    await wait_for_async(tracked_cancelled)
    shown = await context.tracker.task(step.id)
    assert shown.reason == f"plan {step.plan_id} cancelled: changed my mind"
    assert [(s.task_id, s.status) for s in shown.sub_tasks] == [(sub.id, "cancelled")]
    # The CLI shows it too.
    url = context.settings.tracker_url
    assert await asyncio.to_thread(cli, "tasks", "show", step.id, "--url", str(url)) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == (
        f"task {step.id}  ∅ cancelled (plan {step.plan_id} cancelled: changed my mind)"
    )
    assert f"  sub-task {sub.id}  ∅ cancelled  source.fetch" in printed


async def test_a_finished_task_is_left_alone(platform: Platform) -> None:
    context = platform.context()
    quick = Worker(name="quick", context=platform.context())

    @quick.on_task("sum.requested")
    async def add(task: Any, context: PlatformContext) -> None:
        await task.complete({"sum": sum(task.data["values"])})

    await platform.start(quick)
    async with (
        capture(context, ["action-results"], ["sum.done", MARKER]) as answers,
        capture(context, [SYSTEM_EVENTS], ["task.cancelled", MARKER]) as cancelled,
    ):
        request_id = await context.bus.request("sum.requested", {"values": [1, 2]}, "sum.done")
        await wait_for(lambda: len(answers) == 1)
        await context.bus.publish(
            SYSTEM_EVENTS,
            TASK_CANCEL_REQUESTED,
            {"task_id": request_id, "event_type": "sum.requested", "reason": "too late"},
            correlation_id=request_id,
        )
        await settled(context)
        await caught_up(context, answers, "action-results")
        await caught_up(context, cancelled, SYSTEM_EVENTS)
    answers, cancelled = without_markers(answers), without_markers(cancelled)
    assert answers[0].data["result"] == {"sum": 3}
    assert len(answers) == 1 and cancelled == []
    assert await context.memory.get_task_context(request_id) is None


async def test_each_outstanding_request_of_a_cancelled_plan_is_asked_to_cancel() -> None:
    """Both kinds of plan: a state machine's pending steps and a ChoreographyPlanner's
    pending requests (read from its bookkeeping), each with its request type."""
    plan = SimpleNamespace(
        plan_id="plan-1",
        session_id="s-1",
        state_machine=TRIP,
        bookkeeping=PlanBookkeeping(
            choreography=ChoreographyBookkeeping(
                pending={"req-2": {"event_type": "hotel.search", "response_event": "x"}}
            )
        ),
    )
    bus = PlatformContext.from_env().bus
    events = step_cancel_requests(bus, plan, {"req-1": "research"}, "customer called")  # type: ignore[arg-type]
    again = step_cancel_requests(bus, plan, {"req-1": "research"}, "customer called")  # type: ignore[arg-type]
    assert [(e.type, e.data) for e in events] == [
        (
            "task.cancel_requested",
            {
                "task_id": task_id,
                "plan_id": "plan-1",
                "reason": "plan plan-1 cancelled: customer called",
                "event_type": event_type,
            },
        )
        for task_id, event_type in (("req-1", "research.requested"), ("req-2", "hotel.search"))
    ]
    assert [e.id for e in events] == [e.id for e in again]
    assert len({e.id for e in events}) == 2


def without_markers(events: list[Any]) -> list[Any]:
    return [e for e in events if e.type != MARKER]


def cli(*argv: str) -> int:
    """Run the ``soorma`` command; its exit code."""
    try:
        main(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


async def test_a_task_cancelled_before_its_request_arrives_never_runs(platform: Platform) -> None:
    context = platform.context()
    runs: list[str] = []
    slow = Worker(name="slow", context=platform.context())

    @slow.on_task("sum.requested")
    async def add(task: Any, context: PlatformContext) -> None:
        runs.append(task.task_id)
        await task.complete({"sum": 0})

    await platform.start(slow)
    request_id = "sum-request-1"
    async with (
        capture(context, ["action-results"], ["sum.done", MARKER]) as answers,
        capture(context, [SYSTEM_EVENTS], ["task.cancelled", MARKER]) as cancelled,
    ):
        # The cancel overtakes its request (e.g. the request waits in a backlog).
        await context.bus.publish(
            SYSTEM_EVENTS,
            TASK_CANCEL_REQUESTED,
            {"task_id": request_id, "event_type": "sum.requested", "reason": "never mind"},
            correlation_id=request_id,
        )
        await wait_for(lambda: len(cancelled) == 1)
        await context.bus.request("sum.requested", {"values": [1]}, "sum.done", event_id=request_id)
        # A request of another type this worker does not handle is not its to cancel.
        await context.bus.publish(
            SYSTEM_EVENTS,
            TASK_CANCEL_REQUESTED,
            {"task_id": "other-1", "event_type": "other.requested", "reason": "x"},
            correlation_id="other-1",
        )
        await settled(context)
        await caught_up(context, answers, "action-results")
        await caught_up(context, cancelled, SYSTEM_EVENTS)
    answers, cancelled = without_markers(answers), without_markers(cancelled)
    assert runs == [] and answers == []
    assert [e.data["task_id"] for e in cancelled] == [request_id]
    assert cancellation(await context.memory.get_task_context(request_id)) is not None
    assert await context.memory.get_task_context("other-1") is None


async def wait_for_async(probe: Any, within: float = 20.0) -> None:
    """Wait until the coroutine ``probe()`` answers true."""
    async with asyncio.timeout(within):
        while not await probe():  # noqa: ASYNC110
            await asyncio.sleep(0.1)
