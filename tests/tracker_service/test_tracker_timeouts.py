"""Durable timeouts (``task.timeout``, ``plan.wait_timeout``): fired once, at the deadline,
across replicas and restarts; an answer in time cancels; a late answer is recorded, not acted on.

The trackers' timeout loops run on a manual clock: a test moves time past a deadline
instead of sleeping through it (the projector and the bus run in real time)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from tracker_stack import Listener, Stack, first_wait, start_stack

from soorma_common.clock import ManualClock

pytestmark = pytest.mark.asyncio

# Seconds between two passes of a tracker's timeout loop (the stack's setting).
INTERVAL = 0.1
# Far past every deadline the tests set: the manual clock's wall time starts at the real
# time it was made, while the events are stamped with real time some seconds later.
PAST_THE_DEADLINES = 300.0
MARKER = "test.marker"


@pytest_asyncio.fixture
async def stack(backends: dict[str, str], tmp_path: object) -> AsyncIterator[Stack]:
    async with start_stack(backends, tmp_path, clock=ManualClock()) as running:
        yield running


async def let_time_pass(stack: Stack, seconds: float, *, passes: int = 1) -> None:
    """Move the trackers' time ``seconds`` forward, then let every running tracker make
    ``passes`` timeout passes that all see the new time."""
    clock = stack.clock
    assert isinstance(clock, ManualClock)
    loops = len(stack.trackers)
    await clock.sleeping(loops)  # every loop waits for its next pass
    await clock.advance(seconds)
    for _ in range(passes):
        # A loop woken during the advance read the time as it woke: the next passes are
        # the ones that see all of it.
        await clock.sleeping(loops)
        await clock.advance(INTERVAL)
    await clock.sleeping(loops)


async def settle_bus(stack: Stack, listener: Listener) -> None:
    """Return once ``listener`` has every event published to its topic so far (a marker
    published now arrives after them)."""
    marker = await stack.publish({"topic": "system-events", "type": MARKER})
    await stack.until(_has(listener, marker))


def _has(listener: Listener, event_id: str) -> Any:
    async def probe() -> bool:
        return any(e.id == event_id for e in listener.events)

    return probe


def of_type(listener: Listener, event_type: str) -> list[Any]:
    return [e for e in listener.events if e.type == event_type]


async def ask_human(stack: Stack, seconds: float, *, tenant: str = "acme") -> dict[str, str]:
    plan_id, sub = str(uuid.uuid4()), str(uuid.uuid4())
    task_id = await stack.publish(
        {
            "topic": "action-requests",
            "type": "review.do",
            "correlation_id": f"c-{sub}",
            "response_event": "review.done",
            "plan_id": plan_id,
            "session_id": "s",
        },
        tenant=tenant,
    )
    await stack.publish(
        {
            "topic": "notification-events",
            "type": "notification.human_input",
            "correlation_id": sub,
            "plan_id": plan_id,
            "session_id": "s",
            "response_event": "human.answered",
            "response_topic": "notification-events",
            "data": {
                "question": "ok?",
                "task_id": task_id,
                "sub_task_id": sub,
                "response_event": "human.answered",
                "response_topic": "notification-events",
                "timeout_seconds": seconds,
            },
        },
        tenant=tenant,
    )
    return {"plan_id": plan_id, "sub": sub, "task_id": task_id}


async def answer(stack: Stack, sub: str) -> None:
    await stack.publish(
        {
            "topic": "notification-events",
            "type": "human.answered",
            "correlation_id": sub,
            "data": {"approved": True},
        }
    )


async def test_hitl_timeout_fires_once_across_two_replicas_and_a_late_answer_is_recorded(
    backends: dict[str, str], tmp_path: object
) -> None:
    async with (
        start_stack(backends, tmp_path, trackers=2, clock=ManualClock()) as stack,
        Listener(stack, ["task.timeout", MARKER]) as timeouts,
    ):
        ids = await ask_human(stack, 1.0)
        # The wait is recorded (the two replicas may project the request and the question
        # in either order): time can run out on it now.
        await stack.task_when(ids["task_id"], lambda t: bool(t["waits"]))
        await let_time_pass(stack, PAST_THE_DEADLINES)
        (fired,) = await timeouts.wait_for(1)
        assert fired.correlation_id == ids["sub"] and fired.plan_id == ids["plan_id"]
        assert fired.session_id == "s" and fired.source == "soorma-tracker"
        assert fired.data["reason"] == "hitl_timeout"
        assert (fired.data["task_id"], fired.data["sub_task_id"]) == (ids["task_id"], ids["sub"])
        assert fired.data["timeout_seconds"] == 1.0 and fired.data["deadline"]
        parent = await stack.task_when(ids["task_id"], lambda t: t["status"] == "failed")
        assert parent["reason"] == "hitl_timeout"
        (wait,) = parent["waits"]
        assert wait["status"] == "timed_out" and wait["timeout_event_id"] == fired.id
        await answer(stack, ids["sub"])
        late = await stack.task_when(ids["sub"], lambda t: t["waits"][0]["late_answer_at"])
        assert late["status"] == "failed" and late["waits"][0]["status"] == "timed_out"
        await let_time_pass(stack, INTERVAL, passes=10)  # many more passes: still one
        await settle_bus(stack, timeouts)
        assert len(of_type(timeouts, "task.timeout")) == 1
        metrics = await stack.ok("/metrics")
        assert metrics["projector"]["timeouts_fired"] == 1


async def test_an_answer_in_time_cancels_the_timeout(stack: Stack) -> None:
    async with Listener(stack, ["task.timeout", MARKER]) as timeouts:
        ids = await ask_human(stack, 1.5)
        await answer(stack, ids["sub"])
        parent = await stack.task_when(ids["task_id"], first_wait("answered"))
        assert parent["status"] == "running"
        await let_time_pass(stack, PAST_THE_DEADLINES, passes=3)
        await settle_bus(stack, timeouts)
        assert of_type(timeouts, "task.timeout") == []


async def test_overdue_timeouts_fire_once_at_start(
    backends: dict[str, str], tmp_path: object
) -> None:
    clock = ManualClock()
    async with (
        start_stack(backends, tmp_path, trackers=0, clock=clock) as stack,
        Listener(stack, ["task.timeout", MARKER]) as timeouts,
    ):
        first = await stack.add_tracker()
        ids = await ask_human(stack, 1.0)
        await stack.task_when(ids["task_id"], lambda t: t["status"] == "waiting")
        await stack.exits.enter_async_context(_stopped(first))
        stack.trackers.remove(first)
        await clock.advance(PAST_THE_DEADLINES)  # the deadline passes while no tracker runs
        await settle_bus(stack, timeouts)
        assert of_type(timeouts, "task.timeout") == []
        await stack.add_tracker()  # its first pass, at once, finds the wait overdue

        async def timed_out() -> list[Any]:
            return of_type(timeouts, "task.timeout")

        (timeout,) = await stack.until(timed_out)
        assert timeout.correlation_id == ids["sub"]
        await stack.add_tracker()  # a second start finds nothing left to fire
        await let_time_pass(stack, INTERVAL, passes=10)
        await settle_bus(stack, timeouts)
        assert len(of_type(timeouts, "task.timeout")) == 1


async def test_planner_wait_times_out_with_plan_wait_timeout(stack: Stack) -> None:
    plan_id = str(uuid.uuid4())
    async with Listener(stack, ["plan.wait_timeout"]) as timeouts:
        await stack.publish(
            {
                "topic": "system-events",
                "type": "plan.waiting_for_input",
                "correlation_id": plan_id,
                "plan_id": plan_id,
                "data": {
                    "plan_id": plan_id,
                    "expected_event": "user.replied",
                    "timeout_seconds": 1,
                    "reason": "ask",
                },
            }
        )
        await stack.plan_when(plan_id, lambda p: bool(p["waits"]))
        await let_time_pass(stack, PAST_THE_DEADLINES)
        (timeout,) = await timeouts.wait_for(1)
    assert (timeout.correlation_id, timeout.plan_id) == (plan_id, plan_id)
    assert timeout.data == {
        "plan_id": plan_id,
        "expected_event": "user.replied",
        "timeout_seconds": 1.0,
        "reason": "wait_timeout",
        "wait_id": timeout.data["wait_id"],
    }
    plan = await stack.plan_when(
        plan_id, lambda p: p["waits"] and p["waits"][0]["status"] == "timed_out"
    )
    assert plan["waits"][0]["kind"] == "plan_wait"


class _stopped:  # noqa: N801 - used like a function
    """Stop a tracker now (``async with``-able so the exit stack's own stop is harmless)."""

    def __init__(self, server: Any) -> None:
        self.server = server

    async def __aenter__(self) -> None:
        await self.server.stop()

    async def __aexit__(self, *exc: object) -> None:
        return None
