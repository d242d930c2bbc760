"""A request whose claim holder is killed runs on another replica once the claim lapses,
and not before (issue 9, claims).

The holder is a real process (tests/crash/claiming_tool.py) killed with SIGKILL while
its body runs; the other replica, in this process, got its own copy of the same request
(its own consumer group) and waits for the claim instead of running the body alongside.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from crash_support import sigkill, start_agent

from soorma import AgentOptions, PlatformContext, Tool

pytestmark = [pytest.mark.asyncio, pytest.mark.redis, pytest.mark.postgres]

LEASE = 2.0


async def test_the_other_replica_runs_a_request_once_its_killed_holder_claim_lapses(
    services: dict[str, str], context: PlatformContext
):
    holder = await start_agent(
        "claiming_tool.py", services, "agent claim-pricer ready", CLAIM_LEASE=str(LEASE)
    )
    runs: list[float] = []
    # Its own group, started once the holder runs the body (so the holder claims
    # first); "earliest": the new group is given the request sent before it started.
    other = Tool(
        name="claim-pricer",
        options=AgentOptions(group="claim-pricer-b", start_from="earliest"),
        context=context,
    )
    other.answers.claim_lease = LEASE

    @other.on_invoke("claim.requested")
    async def price(request: Any, ctx: Any) -> dict[str, Any]:
        runs.append(time.monotonic())
        return {"price": 7}

    call = asyncio.create_task(
        context.bus.call("claim.requested", {}, response_event="claim.done", timeout=60)
    )
    try:
        await holder.wait_for("body-started", within=30)
        await other.start()
        await asyncio.sleep(2 * LEASE)  # the holder renews: the other copy keeps waiting
        assert runs == []
        await sigkill(holder)
        killed = time.monotonic()
        answer = await call
    finally:
        call.cancel()
        await other.stop()
        if holder.proc.returncode is None:
            await sigkill(holder)
    assert answer.data["result"] == {"price": 7}
    assert len(runs) == 1 and runs[0] - killed < LEASE + 3
