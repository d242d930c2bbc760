"""A declarative planner run as its own process, for the cancel crash test.

``CRASH_HOLD=mid_cancel`` stops it (print, then sleep) right after a cancellation was
stored and before it was announced, so the test can SIGKILL the process there.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from soorma import AgentOptions, Planner
from soorma.planning.plan import PlanContext
from soorma_common.state import PlanDefinition, StateAction, StateConfig, StateTransition

STATES = {
    "start": StateConfig(state_name="start", default_next="quoting"),
    "quoting": StateConfig(
        state_name="quoting",
        action=StateAction(event_type="quote.requested", response_event="quote.done"),
        transitions=[StateTransition(on_event="quote.done", to_state="done")],
    ),
    "done": StateConfig(state_name="done", is_terminal=True),
}

if os.environ.get("CRASH_HOLD") == "mid_cancel":
    stored_end = PlanContext._transition_status

    async def hold_after_storing(self: PlanContext, change: Any) -> bool:
        already = await stored_end(self, change)
        if self.status == "cancelled":
            print(f"cancel stored {self.plan_id}", flush=True)
            await asyncio.sleep(600)
        return already

    PlanContext._transition_status = hold_after_storing  # type: ignore[method-assign]

planner = Planner(
    name="buyer",
    plan_definition=PlanDefinition(plan_type="purchase.goal", states=STATES),
    options=AgentOptions(
        visibility_timeout=float(os.environ.get("CRASH_VISIBILITY", "2")), ack_window=0.9
    ),
)

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    planner.run()
