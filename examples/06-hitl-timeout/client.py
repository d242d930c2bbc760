"""Submit an expense; optionally play the person who answers.

    python client.py                 ->  escalated (nobody answered)       plan <id>
    python client.py --answer yes    ->  approved                          plan <id>
    python client.py --answer no     ->  rejected                          plan <id>

Then: ``soorma plans show <id>`` (or http://127.0.0.1:8084/ui) shows the path taken.
"""

from __future__ import annotations

import argparse
import asyncio
import uuid

from approval import GOAL_EVENT, RESPONSE_EVENT

from soorma import PlatformContext, run_client
from soorma_common.events import HUMAN_INPUT


async def answer_when_asked(
    context: PlatformContext, item: str, approve: bool, ready: asyncio.Event
) -> None:
    async with context.bus.subscribe("notification-events", event_types=[HUMAN_INPUT]) as asks:
        await asks.wait_ready(10)
        ready.set()
        async for ask in asks:
            if ask.data.get("item") != item:
                continue  # somebody else's expense: not ours to answer
            await context.bus.publish(
                ask.data["response_topic"],
                ask.data["response_event"],
                {"approved": approve},
                correlation_id=ask.data["sub_task_id"],
            )
            return


async def main(answer: str | None) -> int:
    async with PlatformContext.from_env() as context:
        person = None
        goal_cid = str(uuid.uuid4())
        item = f"train ticket {goal_cid[:8]}"
        if answer is not None:
            ready = asyncio.Event()
            person = asyncio.create_task(answer_when_asked(context, item, answer == "yes", ready))
            await ready.wait()
        decision = await context.bus.call(
            GOAL_EVENT,
            {"item": item, "amount": "42 EUR"},
            response_event=RESPONSE_EVENT,
            correlation_id=goal_cid,
            timeout=60,
        )
        if person is not None:
            person.cancel()
        plan_id = decision.data.get("plan_id")
        state = "?"
        if context.tracker is not None:
            plan = await context.tracker.wait_for_plan(correlation_id=goal_cid, timeout=30)
            state = plan.current_state or "?"
        print(f"{state} plan {plan_id}")
    return 0 if decision.data.get("status") == "completed" else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answer", choices=["yes", "no"], help="answer as the person")
    raise SystemExit(run_client(main(parser.parse_args().answer)))
