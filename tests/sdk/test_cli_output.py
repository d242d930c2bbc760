"""Readable local output (issue 11 item 4): ``soorma dev``'s banner and log formats, what
an agent prints at start, and ``soorma events tail`` over every topic - real processes
(the ``soorma init`` that writes an agent runs in this process: ``run_cli``)."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from pathlib import Path

import httpx
import pytest
from sdk_helpers import Proc, make_context, run_cli, subprocess_env

import memory_service
from soorma.client import verified_tls
from testsupport.server import LiveServer, closed_port, free_port, serve
from testsupport.services import memory_settings

pytestmark = pytest.mark.asyncio

SOORMA = str(Path(sys.executable).with_name("soorma"))
memory_only = pytest.mark.parametrize("event_settings", ["memory"], indirect=True)
# Nothing listens here: "the platform is not there".
NOWHERE = f"http://127.0.0.1:{closed_port()}"
TEXT_LINE = re.compile(r"^\d\d:\d\d:\d\d\.\d{3} (INFO|WARN|ERROR|DEBUG) +[\w.]+: ")


@pytest.mark.parametrize("log_format", ["text", "json"])
async def test_soorma_dev_logs_one_readable_line_per_record_or_json(
    tmp_path: Path, log_format: str
):
    port, platform = free_port(), free_port()
    args = ["dev", "--only", "events", "--port", f"events={port}", "--log-level", "info"]
    args += ["--port", f"platform={platform}"]
    if log_format == "json":
        args += ["--log-format", "json"]
    proc = await Proc.start(SOORMA, *args, env=subprocess_env(), cwd=str(tmp_path))
    try:
        await proc.wait_for("soorma dev: ready", within=60)
        assert await proc.stop(signal.SIGINT) == 0, proc.output
    finally:
        await proc.kill()
    # uvicorn's own records go through the services' handler, in the chosen format.
    logs = [line for line in proc.lines if "uvicorn" in line]
    assert logs, proc.output
    for line in logs:
        if log_format == "json":
            record = json.loads(line)
            assert record["level"] and record["logger"].startswith("uvicorn"), line
        else:
            assert TEXT_LINE.match(line), line
    assert f"events  http://127.0.0.1:{platform}/events  (also :{port})" in proc.output
    assert "in process memory" in proc.output


@memory_only
async def test_an_agent_says_who_it_is_and_does_not_log_each_http_request(
    tmp_path: Path, event_service: LiveServer
):
    settings = memory_settings(f"sqlite+aiosqlite:///{tmp_path}/m.db", tmp_path)
    app = memory_service.create_app(settings)
    async with serve(app) as memory:
        await _agent_at_info(tmp_path, event_service, memory.url)


async def _agent_at_info(tmp_path: Path, event_service: LiveServer, memory_url: str) -> None:
    init = await run_cli(
        "init", "echo-tool", "--type", "tool", env=subprocess_env(), cwd=str(tmp_path)
    )
    assert init.proc.returncode == 0, init.output
    # The skeleton logs at INFO (logging.basicConfig(level=INFO)), as users do.
    env = subprocess_env(
        SOORMA_EVENT_SERVICE_URL=event_service.url,
        SOORMA_REGISTRY_URL=NOWHERE,
        SOORMA_MEMORY_URL=memory_url,
    )
    tool = await Proc.start(sys.executable, str(tmp_path / "echo-tool" / "agent.py"), env=env)
    try:
        await tool.wait_for("agent echo-tool ready")
        async with make_context(event_service.url) as context:
            async with context.bus.subscribe("action-results") as answers:
                await answers.wait_ready()
                for n in range(3):  # each one a publish and an ack by the tool
                    await context.bus.request(
                        "echo_tool.requested", {"text": f"hi {n}"}, "echo_tool.completed"
                    )
                async with asyncio.timeout(20):
                    for _ in range(3):
                        await anext(aiter(answers))
        assert await tool.stop(signal.SIGTERM) == 0, tool.output
    finally:
        await tool.kill()
    line = await tool.wait_for("starting: listens to")
    assert "agent echo-tool (tool) starting: listens to action-requests:echo_tool.requested" in line
    assert f"events={event_service.url}" in line and f"registry={NOWHERE}" in line
    assert "HTTP Request" not in tool.output, tool.output


async def test_an_agent_without_a_platform_says_so_in_one_line(tmp_path: Path):
    init = await run_cli(
        "init", "lonely", "--type", "tool", env=subprocess_env(), cwd=str(tmp_path)
    )
    assert init.proc.returncode == 0, init.output
    env = subprocess_env(
        SOORMA_EVENT_SERVICE_URL=NOWHERE, SOORMA_REGISTRY_URL=NOWHERE, SOORMA_MEMORY_URL=NOWHERE
    )
    tool = await Proc.start(sys.executable, str(tmp_path / "lonely" / "agent.py"), env=env)
    try:
        line = await tool.wait_for("no event service at")
        # Ctrl-C while it waits for the platform ends it (it used to be swallowed).
        assert await tool.stop(signal.SIGINT, within=15) == 0, tool.output
    finally:
        await tool.kill()
    assert f"agent lonely: no event service at {NOWHERE}; is the platform running?" in line
    assert "soorma dev" in line
    assert "Traceback" not in tool.output


async def _publish(url: str, topic: str, event_type: str, data: dict) -> None:
    body = {"event": {"topic": topic, "type": event_type, "data": data}}
    async with httpx.AsyncClient(
        verify=verified_tls(),
    ) as http:
        response = await http.post(f"{url}/v1/events/publish", json=body)
        assert response.status_code == 200, response.text


@memory_only
async def test_events_tail_without_topic_follows_every_topic_as_json(event_service: LiveServer):
    env = subprocess_env(SOORMA_EVENT_SERVICE_URL=event_service.url, SOORMA_REGISTRY_URL=NOWHERE)
    tail = await Proc.start(SOORMA, "events", "tail", "--json", "--count", "3", env=env)
    try:
        await tail.wait_for("tailing all topics")
        await _publish(event_service.url, "business-facts", "order.placed", {"n": 1})
        await _publish(event_service.url, "plan-events", "plan.started", {"n": 2})
        await _publish(event_service.url, "notification-events", "mail.sent", {"n": 3})
        assert await tail.wait() == 0, tail.output
    finally:
        await tail.kill()
    events = [json.loads(line) for line in tail.lines if line.startswith("{")]
    assert [(e["topic"], e["type"], e["data"]["n"]) for e in events] == [
        ("business-facts", "order.placed", 1),
        ("plan-events", "plan.started", 2),
        ("notification-events", "mail.sent", 3),
    ]


@memory_only
async def test_events_tail_colours_only_when_asked_or_on_a_terminal(event_service: LiveServer):
    env = subprocess_env(SOORMA_EVENT_SERVICE_URL=event_service.url, SOORMA_REGISTRY_URL=NOWHERE)
    tails = {
        color: await Proc.start(
            SOORMA, "events", "tail", "--topic", "business-facts", "--count", "1",
            *(["--color", color] if color != "auto" else []), env=env,
        )
        for color in ("always", "auto")
    }  # fmt: skip
    try:
        for tail in tails.values():
            await tail.wait_for("tailing business-facts")
        await _publish(event_service.url, "business-facts", "order.failed", {"n": 1})
        for tail in tails.values():
            assert await tail.wait() == 0, tail.output
    finally:
        for tail in tails.values():
            await tail.kill()
    coloured = tails["always"].lines[-1]
    assert "\033[36mbusiness-facts\033[0m" in coloured
    assert "\033[31morder.failed\033[0m" in coloured  # failures stand out
    plain = tails["auto"].lines[-1]  # a pipe is not a terminal
    assert "\033[" not in plain and "business-facts order.failed" in plain
