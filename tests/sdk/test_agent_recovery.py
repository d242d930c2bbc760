"""Fast recovery of agent replicas, with real processes killed by SIGKILL.

- with no configuration, two replicas on one host get different consumer ids and a
  restarted one gets its old id back (replica slots), then handles what its previous
  life held at once (the visibility timeout here is a minute: only resuming by
  consumer id explains it);
- when the killed replica does not come back, a live one takes its events over once
  its lease renewals stop;
- a handler running longer than the visibility timeout is not redelivered meanwhile
  (in process on a manual clock, and on Redis in real time: Redis keeps its own).

Identity resolution itself: test_agent_recovery_identity.py.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest
from sdk_helpers import Proc, eventually, make_context, subprocess_env

from soorma import Agent, AgentOptions, Event, PlatformContext
from soorma.consumer_identity import ConsumerIdentity
from soorma.testing import PlatformHarness
from soorma_common.clock import ManualClock
from testsupport import agent_timing
from testsupport.agent_timing import REAL_TIME, Timing, harness_timing
from testsupport.server import LiveServer

pytestmark = pytest.mark.asyncio
redis_event_service = agent_timing.redis_event_service

SCRIPT = str(Path(__file__).with_name("recovery_agent.py"))
HUNG = "600"  # seconds a "hung" handler sleeps: it never finishes within a test


def _env(service: LiveServer, state_dir: Path, **extra: str) -> dict[str, str]:
    return subprocess_env(
        SOORMA_EVENT_SERVICE_URL=service.url,
        SOORMA_REGISTRY_URL="http://127.0.0.1:9",
        SOORMA_STATE_DIR=str(state_dir),
        **extra,
    )


async def _replica(env: dict[str, str], procs: list[Proc]) -> tuple[Proc, str]:
    proc = await Proc.start(sys.executable, SCRIPT, env=env)
    procs.append(proc)
    line = await proc.wait_for("ready consumer=")
    return proc, line.split("consumer=", 1)[1]


async def _sigkill(proc: Proc) -> None:
    proc.proc.kill()
    await proc.wait()


async def test_a_killed_replica_restarts_with_its_own_id_and_resumes_its_events_at_once(
    event_service: LiveServer,
    context: PlatformContext,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SOORMA_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("SOORMA_CONSUMER_ID", raising=False)
    monkeypatch.delenv("SOORMA_REPLICA", raising=False)
    procs: list[Proc] = []
    env = _env(event_service, tmp_path, RECOVERY_VT="60")
    other: ConsumerIdentity | None = None
    try:
        first, first_id = await _replica({**env, "RECOVERY_SLEEP": HUNG}, procs)
        for n in range(2):
            await context.bus.announce("job.created", {"n": n})
        for n in range(2):
            await first.wait_for(f"started {n}")
        # Another replica on this host (this test process) gets a slot of its own.
        other = ConsumerIdentity("recovering")
        assert other.consumer_id != first_id
        await _sigkill(first)
        again, again_id = await _replica({**env, "RECOVERY_SLEEP": "0"}, procs)
        assert again_id == first_id
        for n in range(2):
            # Far inside the 60 s visibility timeout: only resuming by id explains it.
            await again.wait_for(f"done {n}", within=20)
    finally:
        if other is not None:
            other.release()
        for proc in procs:
            await proc.kill()


async def test_a_live_replica_takes_over_the_events_of_one_that_does_not_come_back(
    event_service: LiveServer,
    context: PlatformContext,
    tmp_path: Path,
) -> None:
    procs: list[Proc] = []
    done: list[int] = []
    survivor = Agent(
        name="recovering",
        options=AgentOptions(visibility_timeout=1, ack_window=0, consumer_id="survivor"),
        context=make_context(event_service.url),
    )

    @survivor.on_event(topic="business-facts", event_type="job.created")
    async def handle(event: Event, ctx: PlatformContext) -> None:
        done.append(event.data["n"])

    try:
        doomed, _ = await _replica(
            _env(event_service, tmp_path, RECOVERY_VT="1", RECOVERY_SLEEP=HUNG), procs
        )
        await survivor.start()
        # One job at a time until the doomed replica holds one.
        held = None
        for n in range(50):
            await context.bus.announce("job.created", {"n": n})
            await eventually(lambda n=n: f"started {n}" in doomed.lines or n in done)
            if f"started {n}" in doomed.lines:
                held = n
                break
        assert held is not None, "the doomed replica never got a job"
        # It renews its lease while alive: its job stays with it ...
        await asyncio.sleep(2.5)
        assert held not in done
        await _sigkill(doomed)
        # ... and moves once the renewals stop.
        await eventually(lambda: held in done, within=15)
    finally:
        await survivor.stop()
        await survivor.context.close()
        for proc in procs:
            await proc.kill()


async def test_a_handler_slower_than_the_visibility_timeout_is_not_redelivered() -> None:
    clock = ManualClock()
    async with PlatformHarness(clock=clock) as platform:
        agent = Agent(
            name="slow",
            options=AgentOptions(visibility_timeout=1, ack_window=0, consumer_id="worker"),
        )
        await _slow_handler_keeps_its_event(
            agent, platform.context, work=clock.sleep, timing=harness_timing(platform)
        )
        assert await _redeliveries(platform.http, "http://events.soorma.test") == 0


@pytest.mark.redis
async def test_a_handler_slower_than_the_visibility_timeout_is_not_redelivered_redis(
    redis_event_service: LiveServer,
) -> None:
    url = redis_event_service.url
    async with make_context(url) as context, make_context(url) as agent_context:
        agent = Agent(
            name="slow",
            options=AgentOptions(visibility_timeout=1, ack_window=0, consumer_id="worker"),
            context=agent_context,
        )
        await _slow_handler_keeps_its_event(agent, context, work=asyncio.sleep, timing=REAL_TIME)
        assert await _redeliveries(context.http, url) == 0


async def _redeliveries(http: httpx.AsyncClient, url: str) -> int:
    """Deliveries the event service took over (expired, nacked or resumed), by its metrics:
    whichever consumer took one, even the agent itself (which skips it as in flight)."""
    metrics = await http.get(f"{url}/metrics")
    assert "# TYPE soorma_event_redeliveries" in metrics.text, metrics.text[:500]
    found = re.findall(r"^soorma_event_redeliveries_total\S* (\S+)$", metrics.text, re.M)
    return int(sum(float(n) for n in found))


async def _slow_handler_keeps_its_event(
    agent: Agent,
    context: PlatformContext,
    *,
    work: Callable[[float], Awaitable[None]],
    timing: Timing,
) -> None:
    """The agent's handler works ``work(3.5)`` under a 1 s visibility timeout while
    ``timing.passes(3.5)`` lets that time go by; three idle consumers of its group get
    nothing."""
    started: list[int] = []
    finished: list[int] = []

    @agent.on_event(topic="business-facts", event_type="job.created")
    async def handle(event: Event, ctx: PlatformContext) -> None:
        started.append(event.data["n"])
        await work(3.5)  # three and a half visibility timeouts
        finished.append(event.data["n"])

    try:
        await timing.start(agent)
        await context.bus.announce("job.created", {"n": 0})
        await eventually(lambda: started == [0])
        # Other consumers of the group, idle: an expired lease would be claimed by one
        # of them (or by the agent itself, which would skip it as in flight).
        watchers = [
            context.bus.subscribe(
                "business-facts", group="slow", consumer=f"w{i}", visibility_timeout=1
            )
            for i in range(3)
        ]
        for watcher in watchers:
            await watcher.wait_ready()
        await timing.passes(3.5)
        await eventually(lambda: finished == [0], within=20)
        await timing.passes(0.5)  # a redelivery racing the ack would show up here
        await asyncio.sleep(0.05)  # ... and reach a watcher's queue
        stolen = [watcher._queue.qsize() for watcher in watchers]
        for watcher in watchers:
            await watcher.close()
    finally:
        await timing.stop(agent)
    assert stolen == [0, 0, 0], "the running handler's event was redelivered"
    assert started == [0]
