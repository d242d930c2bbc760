"""A clean stop: the first Ctrl-C on an agent says what it waits for and how long, the
second stops at once; ``soorma dev`` stops in under a second, without a traceback."""

from __future__ import annotations

import asyncio
import signal
import sys
import textwrap
import time
from pathlib import Path

import httpx
import pytest
from sdk_helpers import Proc, subprocess_env

from event_service import create_app
from event_service.settings import Settings
from soorma.client import verified_tls
from testsupport.server import free_port, serve

pytestmark = pytest.mark.asyncio

SOORMA = str(Path(sys.executable).with_name("soorma"))
NOWHERE = "http://127.0.0.1:9"

AGENT = textwrap.dedent(
    """
    import asyncio
    import logging
    from soorma import Agent, AgentOptions

    logging.basicConfig(level=logging.INFO)

    agent = Agent(name="slow", options=AgentOptions(shutdown_timeout=30))

    @agent.on_event(topic="business-facts", event_type="job.created")
    async def handle(event, context):
        print("started", flush=True)
        await asyncio.sleep(600)

    agent.run()
    """
)


async def test_first_ctrl_c_says_what_it_waits_for_and_the_second_stops_at_once(
    tmp_path: Path,
) -> None:
    script = tmp_path / "slow.py"
    script.write_text(AGENT)
    async with serve(create_app(Settings(event_backend="memory"))) as events:
        env = subprocess_env(
            SOORMA_EVENT_SERVICE_URL=events.url,
            SOORMA_REGISTRY_URL=NOWHERE,
            SOORMA_MEMORY_URL=NOWHERE,
        )
        agent = await Proc.start(sys.executable, str(script), env=env)
        try:
            await agent.wait_for("agent slow ready", within=60)
            body = {"event": {"topic": "business-facts", "type": "job.created", "data": {}}}
            async with httpx.AsyncClient(
                verify=verified_tls(),
            ) as http:
                published = await http.post(f"{events.url}/v1/events/publish", json=body)
                assert published.status_code == 200, published.text
            await agent.wait_for("started")
            agent.proc.send_signal(signal.SIGINT)
            line = await agent.wait_for("waiting up to")
            assert "waiting up to 30 s for 1 handler(s) in progress" in line
            assert "Ctrl-C again to stop at once" in line
            started = time.monotonic()
            assert await agent.stop(signal.SIGINT, within=10) == 0, agent.output
            assert time.monotonic() - started < 5
        finally:
            await agent.kill()
    assert "cancelled 1 handler(s) on a second Ctrl-C" in agent.output
    assert "Traceback" not in agent.output


async def test_soorma_dev_stops_in_under_a_second_with_a_stream_open(tmp_path: Path) -> None:
    # All five: the tracker and the gateway hold streams of their own to the event service.
    ports = {name: free_port() for name in ("registry", "events", "memory", "tracker", "gateway")}
    events_port, platform_port = ports["events"], free_port()
    args = [f"--port={name}={port}" for name, port in ports.items()]
    args.append(f"--port=platform={platform_port}")
    env = subprocess_env(SOORMA_DATA_DIR=str(tmp_path / ".soorma"))
    proc = await Proc.start(SOORMA, "dev", *args, env=env, cwd=str(tmp_path))
    try:
        await proc.wait_for("soorma dev: ready", within=60)
        async with httpx.AsyncClient(verify=verified_tls(), timeout=None) as http:
            # An agent's open stream, through the one address and directly.
            streams = [
                f"http://127.0.0.1:{platform_port}/events/v1/events/stream",
                f"http://127.0.0.1:{events_port}/v1/events/stream",
            ]
            async with (
                http.stream("GET", streams[0], params={"topics": "business-facts"}) as one,
                http.stream("GET", streams[1], params={"topics": "business-facts"}) as two,
            ):
                assert one.status_code == two.status_code == 200
                await asyncio.sleep(0.2)
                started = time.monotonic()
                proc.proc.send_signal(signal.SIGINT)
                code = await proc.wait(within=10)
                elapsed = time.monotonic() - started
    finally:
        await proc.kill()
    assert code == 0, proc.output
    print(f"soorma dev stopped in {elapsed:.2f} s")
    # The target is under a second (printed above, measured unloaded). The bound here only
    # guards against the old behaviour (3.4 s, waiting out open streams) on a busy machine.
    assert elapsed < 3.0, (elapsed, proc.output)
    assert "Traceback" not in proc.output
    assert "CancelledError" not in proc.output
