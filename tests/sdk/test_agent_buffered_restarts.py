"""An event buffered by an agent that keeps getting killed is not dead-lettered for it.

The agent holds up to ``prefetch`` deliveries but runs ``max_concurrency`` handlers, so
a delivery can wait in its buffer while the process is SIGKILLed, again and again; each
restart re-delivers it at once (same consumer id). Only deliveries whose handler
started count towards ``max_deliveries``: the waiting one survives more restarts than
that and is handled, while the event whose handler was killed each time (a poison
event, as far as the bus can tell) is dead-lettered. Issue 9's chaos run lost a goal
this way.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import httpx
import pytest
from sdk_helpers import Proc, subprocess_env

from soorma import PlatformContext
from testsupport.server import LiveServer

pytestmark = pytest.mark.asyncio

SCRIPT = str(Path(__file__).with_name("recovery_agent.py"))
MAX_DELIVERIES = 3
# Long enough for the agent to report its handler running (about half a second).
REPORTED = 1.5


async def test_a_buffered_event_outlives_max_deliveries_restarts_and_is_handled(
    event_service: LiveServer, context: PlatformContext, tmp_path: Path
) -> None:
    env = subprocess_env(
        SOORMA_EVENT_SERVICE_URL=event_service.url,
        SOORMA_REGISTRY_URL="http://127.0.0.1:9",
        SOORMA_STATE_DIR=str(tmp_path),
        SOORMA_CONSUMER_ID="buffering-0",
        RECOVERY_VT="600",  # nothing here waits for a lease to expire
        RECOVERY_CONCURRENCY="1",  # prefetch 2: one runs, one waits
        RECOVERY_MAX_DELIVERIES=str(MAX_DELIVERIES),
    )
    procs: list[Proc] = []
    try:
        for life in range(MAX_DELIVERIES):
            proc = await Proc.start(sys.executable, SCRIPT, env={**env, "RECOVERY_SLEEP": "600"})
            procs.append(proc)
            await proc.wait_for("ready consumer=buffering-0", within=60)
            if life == 0:
                for n in range(2):
                    await context.bus.announce("job.created", {"n": n})
            await proc.wait_for("started 0", within=20)
            await asyncio.sleep(REPORTED)
            assert "started 1" not in "\n".join(proc.lines)
            proc.proc.kill()
            await proc.wait()
        # Job 1 has now been delivered MAX_DELIVERIES times without reaching a handler.
        last = await Proc.start(sys.executable, SCRIPT, env={**env, "RECOVERY_SLEEP": "0"})
        procs.append(last)
        await last.wait_for("done 1", within=30)
        assert "started 0" not in "\n".join(last.lines)
        async with httpx.AsyncClient(base_url=event_service.url) as client:
            r = await client.get("/v1/events/dlq", params={"topic": "business-facts"})
        [dead] = r.json()["events"]
        assert dead["event"]["data"] == {"n": 0}
        assert dead["reason"].startswith(f"handler was running in {MAX_DELIVERIES} deliveries")
    finally:
        for proc in procs:
            await proc.kill()
