"""``soorma call``: publishes a request, waits for its answer and prints it."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest
from sdk_helpers import Proc, run_cli, subprocess_env

from event_service import create_app
from event_service.settings import Settings
from soorma.cli import default_response_event
from testsupport.server import serve

SOORMA = str(Path(sys.executable).with_name("soorma"))


@pytest.mark.asyncio
async def test_init_suggests_soorma_call_and_soorma_call_prints_the_answer(tmp_path: Path):
    # `soorma init` in this process (tests/sdk/test_cli.py runs it as one); the agent
    # and `soorma call` are real processes.
    init = await run_cli(
        "init", "echo-tool", "--type", "tool", env=subprocess_env(), cwd=str(tmp_path)
    )
    assert init.proc.returncode == 0, init.output
    suggested = """then try it: soorma call echo_tool.requested --data '{"text": "hello"}'"""
    assert suggested in init.lines
    async with serve(create_app(Settings(event_backend="memory"))) as events:
        # No memory service: the skeleton runs without keeping its answers.
        agent = (tmp_path / "echo-tool" / "agent.py").read_text()
        (tmp_path / "echo-tool" / "agent.py").write_text(
            agent.replace('description="Describe', 'answer_retention=0, description="Describe')
        )
        env = subprocess_env(
            SOORMA_EVENT_SERVICE_URL=events.url, SOORMA_REGISTRY_URL="http://127.0.0.1:9"
        )
        tool = await Proc.start(sys.executable, str(tmp_path / "echo-tool" / "agent.py"), env=env)
        try:
            await tool.wait_for("agent echo-tool ready", within=60)
            call = await Proc.start(
                SOORMA, "call", "echo_tool.requested", "--data", '{"text": "hi"}', env=env
            )
            assert await call.wait(within=60) == 0, call.output
            assert await tool.stop(signal.SIGTERM) == 0, tool.output
        finally:
            await tool.kill()
    assert len(call.lines) == 1, call.output
    assert '"success": true' in call.lines[0]
    assert '"result": {"echo": "hi"}' in call.lines[0]


def test_the_default_answer_of_a_request_is_its_completed_event() -> None:
    assert default_response_event("greet.requested") == "greet.completed"
    assert default_response_event("order.check") == "order.check.completed"
