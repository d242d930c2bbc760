"""Cancelling a plan: ``context.cancel_plan`` publishes ``plan.cancel_requested``; the
owning planner ends the plan ``cancelled``, answers its goal, cancels its sub-plans, and
ignores answers that arrive afterwards. Another tenant's request changes nothing."""

from __future__ import annotations

import dataclasses

import pytest
from planner_support import Platform, wait_for

from soorma import PlatformContext
from soorma.agents.planner import Planner
from soorma.planning.plan import PlanContext
from soorma_common.state import PlanDefinition, StateAction, StateConfig, StateTransition
from testsupport.capture import capture
from testsupport.settle import MARKER, caught_up, settled

pytestmark = pytest.mark.asyncio

TRIP = {
    "start": StateConfig(state_name="start", default_next="hotel"),
    "hotel": StateConfig(
        state_name="hotel",
        action=StateAction(event_type="hotel.goal", response_event="hotel.done"),
        transitions=[StateTransition(on_event="hotel.done", to_state="done")],
    ),
    "done": StateConfig(state_name="done", is_terminal=True),
}
HOTEL = {
    "start": StateConfig(state_name="start", default_next="booking"),
    "booking": StateConfig(
        state_name="booking",
        action=StateAction(event_type="room.book", response_event="room.booked"),
        transitions=[StateTransition(on_event="room.booked", to_state="booked")],
    ),
    "booked": StateConfig(state_name="booked", is_terminal=True),
}


def _context(platform: Platform, **identity: str) -> PlatformContext:
    return PlatformContext.from_env(settings=dataclasses.replace(platform.settings, **identity))


async def _status(plan_id: str, context: PlatformContext) -> PlanContext:
    plan = await PlanContext.restore(plan_id, context)
    assert plan is not None
    return plan


async def test_cancel_ends_the_plan_and_its_sub_plans_once_and_answers_the_goal(
    platform: Platform,
) -> None:
    context = platform.context()
    for name, plan_type, states in (("trip", "trip.goal", TRIP), ("hotel", "hotel.goal", HOTEL)):
        await platform.start(
            Planner(
                name=name,
                context=platform.context(),
                plan_definition=PlanDefinition(plan_type=plan_type, states=states),
            )
        )
    async with (
        capture(context, ["action-requests"], ["room.book"]) as asks,
        capture(context, ["action-results"], ["trip.done", MARKER]) as answers,
        capture(
            context, ["system-events"], ["plan.cancelled", "plan.state_changed", MARKER]
        ) as seen,
    ):
        await context.bus.request("trip.goal", {}, "trip.done", correlation_id="trip-1")
        await wait_for(lambda: len(asks) == 1)
        hotel_id = asks[0].plan_id
        assert hotel_id
        trip_id = (await _status(hotel_id, context)).parent_plan_id
        assert trip_id

        async with _context(platform, tenant_id="tenant-b") as other:
            await other.cancel_plan(trip_id, "not mine")
            await settled(other)
        await settled(context)
        assert (await _status(trip_id, context)).status == "running"

        async with _context(platform, user_id="alice") as alice:
            await alice.cancel_plan(trip_id, "changed my mind")
        await wait_for(lambda: len(answers) == 1)
        await wait_for(lambda: len([e for e in seen if e.type == "plan.cancelled"]) == 2)
        # The hotel's answer arrives after its plan was cancelled: nothing moves.
        await context.bus.respond(
            "room.booked", {"room": 12}, correlation_id=asks[0].correlation_id
        )
        # Every planner has handled it, and the captures have what they published.
        await settled(context)
        await caught_up(context, answers, "action-results")
        await caught_up(context, seen, "system-events")
    answers = [e for e in answers if e.type != MARKER]
    seen = [e for e in seen if e.type != MARKER]

    assert answers[0].correlation_id == "trip-1"
    assert answers[0].data == {
        "plan_id": trip_id,
        "status": "cancelled",
        "error": "changed my mind",
        "cancelled_by": "alice",
    }
    ended = {e.plan_id: e.data for e in seen if e.type == "plan.cancelled"}
    assert ended[trip_id]["reason"] == "changed my mind"
    assert ended[hotel_id]["reason"] == f"parent plan {trip_id} cancelled: changed my mind"
    trip, hotel = await _status(trip_id, context), await _status(hotel_id, context)
    assert (trip.status, hotel.status) == ("cancelled", "cancelled")
    assert trip.bookkeeping.failure_reason == "changed my mind"
    assert trip.bookkeeping.cancelled_by == "alice"
    assert (trip.current_state, hotel.current_state) == ("hotel", "booking")
    moves = [e.data["to_state"] for e in seen if e.type == "plan.state_changed"]
    assert sorted(moves) == ["booking", "hotel"]
