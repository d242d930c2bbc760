"""An event buffered by an agent that keeps getting killed is not dead-lettered for it.

The agent holds up to ``prefetch`` deliveries but runs ``max_concurrency`` handlers, so
a delivery can wait in its buffer while the process is SIGKILLed, again and again; each
restart re-delivers it at once (same consumer id). Only deliveries whose handler
started count towards ``max_deliveries``: the waiting one survives more restarts than
that and is handled, while the event whose handler was killed each time (a poison
event, as far as the bus can tell) is dead-lettered. Issue 9's chaos run lost a goal
this way.

The agent reports starts soon, batched: many handlers starting within a second share a
request, on top of the regular lease renewals (in process on a manual clock, and on
Redis in real time).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from sdk_helpers import Proc, eventually, make_context, subprocess_env

from soorma import Agent, AgentOptions, Event, PlatformContext
from soorma.client import verified_tls
from soorma.testing import PlatformHarness
from soorma_common.clock import ManualClock
from testsupport import agent_timing
from testsupport.agent_timing import REAL_TIME, Timing, harness_timing
from testsupport.server import LiveServer

pytestmark = pytest.mark.asyncio
redis_event_service = agent_timing.redis_event_service

SCRIPT = str(Path(__file__).with_name("recovery_agent.py"))
MAX_DELIVERIES = 3


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
            # Killed once the event service knows the handler ran: this delivery counts.
            await proc.wait_for("reported 1 started", within=20)
            assert "started 1" not in "\n".join(proc.lines)
            proc.proc.kill()
            await proc.wait()
        # Job 1 has now been delivered MAX_DELIVERIES times without reaching a handler.
        last = await Proc.start(sys.executable, SCRIPT, env={**env, "RECOVERY_SLEEP": "0"})
        procs.append(last)
        await last.wait_for("done 1", within=30)
        assert "started 0" not in "\n".join(last.lines)
        async with httpx.AsyncClient(verify=verified_tls(), base_url=event_service.url) as client:
            r = await client.get("/v1/events/dlq", params={"topic": "business-facts"})
        [dead] = r.json()["events"]
        assert dead["event"]["data"] == {"n": 0}
        assert dead["reason"].startswith(f"handler was running in {MAX_DELIVERIES} deliveries")
    finally:
        for proc in procs:
            await proc.kill()


def reporting_agent(context: PlatformContext | None = None) -> Agent:
    return Agent(
        name="reporting",
        options=AgentOptions(
            visibility_timeout=60, max_concurrency=40, consumer_id="reporting-0"
        ),  # no lease renewal during the test
        context=context,
    )


async def test_handler_starts_are_reported_soon_in_few_requests() -> None:
    async with PlatformHarness(clock=ManualClock()) as platform:
        await _starts_reported(reporting_agent(), platform.context, harness_timing(platform))


@pytest.mark.redis
async def test_handler_starts_are_reported_soon_in_few_requests_redis(
    redis_event_service: LiveServer,
) -> None:
    url = redis_event_service.url
    async with make_context(url) as context, make_context(url) as agent_context:
        await _starts_reported(reporting_agent(agent_context), context, REAL_TIME)


async def _starts_reported(
    agent: Agent,
    context: PlatformContext,
    timing: Timing,
) -> None:
    """30 handler starts while ``timing.passes`` lets three seconds go by: each is
    reported within the next 3 s, in 2 to 5 requests."""
    release = asyncio.Event()
    started: list[str] = []

    @agent.on_event(topic="business-facts", event_type="job.created")
    async def handle(event: Event, ctx: PlatformContext) -> None:
        started.append(event.delivery_id or "")
        await release.wait()

    requests: list[list[str]] = []
    try:
        await timing.start(agent)
        bus = agent.context.bus
        extend = bus.extend

        async def counted(group: str, ids: Any, **kwargs: Any) -> int:
            requests.append(list(kwargs.get("running") or ()))
            return await extend(group, ids, **kwargs)

        bus.extend = counted  # type: ignore[method-assign]
        for n in range(30):  # 30 starts spread over three seconds
            await context.bus.announce("job.created", {"n": n})
            await timing.passes(0.1)
        await eventually(lambda: len(started) == 30)
        for _ in range(30):  # within three seconds
            if {i for r in requests for i in r} == set(started):
                break
            await timing.passes(0.1)
        assert {i for r in requests for i in r} == set(started)
        # Batched: about one request a second, not one per start.
        assert 2 <= len(requests) <= 5, requests
    finally:
        release.set()
        await timing.stop(agent)
