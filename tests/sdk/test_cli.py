"""The ``soorma`` command as users run it: a real subprocess.

Except for three short checks of ``soorma init`` and ``events publish`` that run
``soorma.cli.main`` in this process (``run_cli``): what they check is what the command
writes and prints, which the tool-skeleton test also covers through real processes.
"""

from __future__ import annotations

import py_compile
import signal
import socket
import sys
from pathlib import Path

import httpx
import pytest
from sdk_helpers import Proc, run_cli, subprocess_env

from memory_service import create_app as create_memory_app
from soorma.client import verified_tls
from testsupport.server import LiveServer, free_port, serve
from testsupport.services import memory_settings

pytestmark = pytest.mark.asyncio

SOORMA = str(Path(sys.executable).with_name("soorma"))
SERVICES = ("registry", "events", "memory", "tracker", "gateway")


async def test_soorma_dev_serves_all_five_services_and_stops_cleanly_on_ctrl_c(tmp_path: Path):
    ports = {name: free_port() for name in SERVICES}
    platform_port = free_port()
    args = [f"--port={name}={port}" for name, port in ports.items()]
    args.append(f"--port=platform={platform_port}")
    data = tmp_path / ".soorma"
    env = subprocess_env(SOORMA_DATA_DIR=str(data))
    proc = await Proc.start(SOORMA, "dev", *args, env=env, cwd=str(tmp_path))
    try:
        await proc.wait_for("soorma dev: ready", within=60)
        async with httpx.AsyncClient(
            verify=verified_tls(),
        ) as http:
            for name, port in ports.items():
                response = await http.get(f"http://127.0.0.1:{port}/health")
                assert response.status_code == 200, name
                assert response.json()["status"] == "ok"
        assert await proc.stop(signal.SIGINT) == 0, proc.output
    finally:
        await proc.kill()
    for port in ports.values():
        assert f"(also :{port})" in proc.output
    # The banner: backends, where the data lives, the tracker UI, how agents connect.
    out = proc.output
    assert f"tracker UI: http://127.0.0.1:{platform_port}/tracker/ui" in out
    assert "in process memory" in out
    for name in ("registry", "memory", "tracker", "gateway"):
        assert f"SQLite {(data / f'{name}.db').resolve()}" in out, out
    # What an agent needs, on one line.
    assert f"  export SOORMA_URL=http://127.0.0.1:{platform_port}" in proc.lines, out
    # Readable by default: no JSON lines, no migration step-by-step.
    assert not [line for line in proc.lines if line.startswith("{")], out
    assert "alembic" not in out


async def test_soorma_dev_names_the_service_whose_port_is_taken(tmp_path: Path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = await Proc.start(
            SOORMA,
            "dev",
            "--only",
            "events",
            "--port",
            f"events={port}",
            "--port",
            f"platform={free_port()}",
            env=subprocess_env(),
            cwd=str(tmp_path),
        )
        try:
            assert await proc.wait() == 1
        finally:
            await proc.kill()
    assert f"port {port} for events" in proc.output
    assert "--port events=" in proc.output


# CLI behaviour does not depend on the event log backend; the SDK tests cover both.
memory_only = pytest.mark.parametrize("event_settings", ["memory"], indirect=True)


@memory_only
async def test_init_writes_a_tool_skeleton_that_runs_and_answers(
    tmp_path: Path, event_service: LiveServer
):
    init = await Proc.start(
        SOORMA, "init", "echo-tool", "--type", "tool", env=subprocess_env(), cwd=str(tmp_path)
    )
    assert await init.wait() == 0, init.output
    agent_file = tmp_path / "echo-tool" / "agent.py"
    assert (tmp_path / "echo-tool" / "README.md").exists()
    # The skeleton keeps its answers (the default): it runs with a memory service.
    memory_app = create_memory_app(
        memory_settings(f"sqlite+aiosqlite:///{tmp_path}/memory.db", tmp_path)
    )
    async with serve(memory_app) as memory:
        env = subprocess_env(
            SOORMA_EVENT_SERVICE_URL=event_service.url, SOORMA_MEMORY_URL=memory.url
        )
        tail = await _run_skeleton(agent_file, env)
    line = tail.lines[-1]
    assert "action-results echo_tool.completed" in line
    assert '"result":{"echo":"hi"}' in line


async def _run_skeleton(agent_file: Path, env: dict[str, str]) -> Proc:
    """Start the skeleton tool, send it one request; the ``events tail`` that saw the answer."""
    tool = await Proc.start(sys.executable, str(agent_file), env=env)
    try:
        await tool.wait_for("agent echo-tool ready")
        tail = await Proc.start(
            SOORMA, "events", "tail", "--topic", "action-results", "--count", "1", env=env
        )
        await tail.wait_for("tailing action-results")
        publish = await Proc.start(
            SOORMA,
            "events",
            "publish",
            "--topic",
            "action-requests",
            "--type",
            "echo_tool.requested",
            "--response-event",
            "echo_tool.completed",
            "--data",
            '{"text": "hi"}',
            env=env,
        )
        assert await publish.wait() == 0, publish.output
        assert await tail.wait() == 0, tail.output
        assert await tool.stop(signal.SIGTERM) == 0, tool.output
    finally:
        await tool.kill()
    return tail


@pytest.mark.parametrize("agent_type", ["worker", "planner"])
async def test_init_writes_worker_and_planner_skeletons(tmp_path: Path, agent_type: str):
    proc = await run_cli(
        "init", "my-agent", "--type", agent_type, env=subprocess_env(), cwd=str(tmp_path)
    )
    assert proc.proc.returncode == 0, proc.output
    source = tmp_path / "my-agent" / "agent.py"
    py_compile.compile(str(source), doraise=True)
    assert f"{agent_type}.run()" in source.read_text()


async def test_init_refuses_a_bad_name_with_a_hint(tmp_path: Path):
    proc = await run_cli("init", "My Agent", env=subprocess_env(), cwd=str(tmp_path))
    assert proc.proc.returncode == 2, proc.output
    assert "lowercase letters" in proc.output


async def test_events_publish_rejects_invalid_json_data():
    proc = await run_cli(
        "events",
        "publish",
        "--topic",
        "business-facts",
        "--type",
        "x",
        "--data",
        "{not json",
        env=subprocess_env(),
    )
    assert proc.proc.returncode == 2, proc.output
    assert "--data is not valid JSON" in proc.output


@memory_only
async def test_events_tail_prints_one_line_per_event(event_service: LiveServer):
    env = subprocess_env(SOORMA_EVENT_SERVICE_URL=event_service.url)
    tail = await Proc.start(
        SOORMA,
        "events",
        "tail",
        "--topic",
        "business-facts",
        "--type",
        "order.*",
        "--count",
        "2",
        env=env,
    )
    try:
        await tail.wait_for("tailing business-facts")
        async with httpx.AsyncClient(
            verify=verified_tls(),
        ) as http:
            for n in (1, 2):
                body = {
                    "event": {
                        "topic": "business-facts",
                        "type": "order.placed",
                        "data": {"n": n},
                        "correlation_id": f"c{n}",
                    }
                }
                response = await http.post(f"{event_service.url}/v1/events/publish", json=body)
                assert response.status_code == 200
        assert await tail.wait() == 0, tail.output
    finally:
        await tail.kill()
    lines = [line for line in tail.lines if "order.placed" in line]
    assert len(lines) == 2
    assert "business-facts order.placed" in lines[0] and "corr=c1" in lines[0]
    assert lines[1].endswith('{"n":2}')
