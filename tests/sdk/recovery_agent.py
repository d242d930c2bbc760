"""An agent replica for the recovery tests, run as its own process (and SIGKILLed).

Handles ``job.created`` on business-facts: prints ``started <n>``, sleeps
``RECOVERY_SLEEP`` seconds, prints ``done <n>``. ``RECOVERY_VT`` sets the visibility
timeout, ``RECOVERY_CONCURRENCY`` and ``RECOVERY_MAX_DELIVERIES`` (optional) the agent's
``max_concurrency`` and ``max_deliveries``. Prints ``ready consumer=<id>`` once its
stream is live, and ``reported <k> started`` each time the event service has answered a
report of ``k`` handler starts (what a test waits for before a SIGKILL that must count).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from soorma import Agent, AgentOptions


async def main() -> None:
    pause = float(os.environ.get("RECOVERY_SLEEP", "0"))
    most = os.environ.get("RECOVERY_MAX_DELIVERIES")
    agent = Agent(
        name="recovering",
        options=AgentOptions(
            visibility_timeout=float(os.environ["RECOVERY_VT"]),
            ack_window=0,
            max_concurrency=int(os.environ.get("RECOVERY_CONCURRENCY", "16")),
            max_deliveries=int(most) if most else None,
        ),
    )

    @agent.on_event(topic="business-facts", event_type="job.created")
    async def handle(event, context):
        n = event.data["n"]
        print(f"started {n}", flush=True)
        await asyncio.sleep(pause)
        print(f"done {n}", flush=True)

    await agent.start()
    bus = agent.context.bus
    extend = bus.extend

    async def extend_and_say(group: str, ids: Any, **kwargs: Any) -> int:
        renewed = await extend(group, ids, **kwargs)
        if kwargs.get("running"):
            print(f"reported {len(kwargs['running'])} started", flush=True)
        return renewed

    bus.extend = extend_and_say  # type: ignore[method-assign]
    print(f"ready consumer={agent.consumer_id}", flush=True)
    await agent.wait()


if __name__ == "__main__":
    asyncio.run(main())
