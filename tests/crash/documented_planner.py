"""The hand-written Planner pattern of docs/planner.md, run as its own process.

``CRASH_HOLD=after_create`` makes the goal handler stop (print, then sleep) right after
``open_plan`` stored the plan, so the test can SIGKILL the process there;
``after_step`` stops it after ``execute_next()`` published the first request.
"""

from __future__ import annotations

import asyncio
import logging
import os

from soorma import AgentOptions, Planner
from soorma_common.state import StateAction, StateConfig, StateTransition

HOLD = os.environ.get("CRASH_HOLD", "")

STATES = {
    "start": StateConfig(state_name="start", default_next="quoting"),
    "quoting": StateConfig(
        state_name="quoting",
        action=StateAction(
            event_type="quote.requested",
            response_event="quote.done",
            data={"item": "{goal_data.item}"},
        ),
        transitions=[StateTransition(on_event="quote.done", to_state="done")],
    ),
    "done": StateConfig(state_name="done", is_terminal=True),
}

planner = Planner(
    name="buyer",
    transition_topics=["action-results"],
    options=AgentOptions(
        visibility_timeout=float(os.environ.get("CRASH_VISIBILITY", "2")), ack_window=0.9
    ),
)


@planner.on_goal("purchase.goal")
async def on_goal(goal, context):
    plan = await goal.open_plan(context, STATES)
    print(f"created {plan.plan_id}", flush=True)
    if HOLD == "after_create":
        await asyncio.sleep(600)
    await plan.execute_next()
    print(f"stepped {plan.plan_id}", flush=True)
    if HOLD == "after_step":
        await asyncio.sleep(600)


@planner.on_transition()
async def on_transition(transition, context):
    await planner.advance(transition)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    planner.run()
