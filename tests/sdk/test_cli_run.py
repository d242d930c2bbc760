"""``soorma run``: a project's agents in one process, restarted when their code changes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest
from sdk_helpers import Proc, subprocess_env

from event_service import create_app
from event_service.settings import Settings
from soorma import PlatformContext, PlatformSettings
from testsupport.server import serve

pytestmark = pytest.mark.asyncio

SOORMA = str(Path(sys.executable).with_name("soorma"))

AGENT = textwrap.dedent(
    """
    from soorma import Tool

    tool = Tool(name="{name}", description="Says its version.", answer_retention=0)

    @tool.on_invoke("{name}.requested")
    async def handle(request, context):
        return {{"version": "{version}"}}

    if __name__ == "__main__":
        raise SystemExit("soorma run imports this file; it must not run it as __main__")
    """
)


async def _ask(context: PlatformContext, name: str) -> str:
    answer = await context.bus.call(
        f"{name}.requested", {}, response_event=f"{name}.completed", timeout=20
    )
    return str(answer.data["result"]["version"])


async def test_run_starts_every_agent_of_a_folder_and_restarts_them_on_a_change(
    tmp_path: Path,
) -> None:
    project = tmp_path / "agents"
    project.mkdir()
    (project / "one.py").write_text(AGENT.format(name="one", version="v1"))
    (project / "two.py").write_text(AGENT.format(name="two", version="v1"))
    async with serve(create_app(Settings(event_backend="memory"))) as events:
        env = subprocess_env(
            SOORMA_EVENT_SERVICE_URL=events.url, SOORMA_REGISTRY_URL="http://127.0.0.1:9"
        )
        run = await Proc.start(SOORMA, "run", str(project), env=env, cwd=str(tmp_path))
        try:
            await run.wait_for("soorma run: running", within=60)
            settings = PlatformSettings(event_service_url=events.url)
            async with PlatformContext.from_env(settings=settings) as context:
                assert await _ask(context, "one") == "v1"
                assert await _ask(context, "two") == "v1"
                await asyncio.sleep(1.1)  # a coarse file clock still sees a new mtime
                (project / "two.py").write_text(AGENT.format(name="two", version="v2"))
                await run.wait_for("soorma run: two.py changed; restarting", within=30)
                async with asyncio.timeout(60):
                    while sum("soorma run: running" in line for line in run.lines) < 2:  # noqa: ASYNC110
                        await asyncio.sleep(0.1)
                assert await _ask(context, "two") == "v2"
            assert await run.stop(signal.SIGINT, within=20) == 0, run.output
        finally:
            await run.kill()
    running = next(line for line in run.lines if "soorma run: running" in line)
    assert "one (" in running and "two (" in running
    assert "Traceback" not in run.output


async def test_run_says_when_a_target_defines_no_agent(tmp_path: Path) -> None:
    (tmp_path / "empty.py").write_text("x = 1\n")
    run = await Proc.start(
        SOORMA, "run", "--no-reload", str(tmp_path / "empty.py"), env=subprocess_env()
    )
    assert await run.wait(within=60) == 1
    assert run.lines == [
        f"soorma: no agent (Agent, Tool, Worker, Planner) defined in {tmp_path / 'empty.py'}"
    ]


async def test_run_stopped_with_sigterm_stops_its_agents_too(tmp_path: Path) -> None:
    (tmp_path / "one.py").write_text(AGENT.format(name="one", version="v1"))
    async with serve(create_app(Settings(event_backend="memory"))) as events:
        env = subprocess_env(
            SOORMA_EVENT_SERVICE_URL=events.url, SOORMA_REGISTRY_URL="http://127.0.0.1:9"
        )
        run = await Proc.start(SOORMA, "run", str(tmp_path / "one.py"), env=env)
        try:
            await run.wait_for("soorma run: running", within=60)
            # The output closes only once the agents' process has exited as well.
            assert await run.stop(signal.SIGTERM, within=20) == 0, run.output
        finally:
            await run.kill()
    assert "agent one stopped" in run.output


async def test_run_connects_where_the_platforms_discovery_document_says(tmp_path: Path) -> None:
    (tmp_path / "one.py").write_text(AGENT.format(name="one", version="v1"))
    async with serve(create_app(Settings(event_backend="memory"))) as events:
        # SOORMA_URL at a lone event service: no discovery document there.
        env = subprocess_env(SOORMA_URL=events.url)
        run = await Proc.start(SOORMA, "run", "--no-reload", str(tmp_path / "one.py"), env=env)
        assert await run.wait(within=60) == 1, run.output
    assert run.lines[-1].startswith(f"soorma: SOORMA_URL={events.url} is not a Soorma platform")


async def test_an_agent_held_by_two_names_is_started_once(tmp_path: Path) -> None:
    from soorma._run import load_agents

    (tmp_path / "aliased.py").write_text(
        AGENT.format(name="one", version="v1") + "\nfor _agent in [tool]:\n    pass\nalias = tool\n"
    )
    found = load_agents([str(tmp_path / "aliased.py")])
    assert [agent.name for _, agent in found] == ["one"]


SLOW = textwrap.dedent(
    """
    import asyncio
    from soorma import Agent, AgentOptions

    agent = Agent(name="slow", options=AgentOptions(shutdown_timeout=30))

    @agent.on_event(topic="business-facts", event_type="job.created")
    async def handle(event, context):
        print("started", flush=True)
        await asyncio.sleep(600)
    """
)


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


# When the second Ctrl-C comes: once the agents' "waiting up to" line is out, or once
# the supervisor has passed the first one on (a KeyboardInterrupt raised there once
# escaped and left the agents running), at once or a moment later.
SECOND_CTRL_C = {
    "after-the-agents-line": ("waiting up to", 0.0),
    "after-the-supervisors-line": ("soorma run: stopping the agents", 0.0),
    "20ms-after-the-supervisors-line": ("soorma run: stopping the agents", 0.02),
}


@pytest.mark.parametrize("second", SECOND_CTRL_C.values(), ids=SECOND_CTRL_C.keys())
async def test_under_run_with_reload_ctrl_c_says_what_it_waits_for_and_again_stops_at_once(
    tmp_path: Path, second: tuple[str, float]
) -> None:
    (tmp_path / "slow.py").write_text(SLOW)
    async with serve(create_app(Settings(event_backend="memory"))) as events:
        env = subprocess_env(
            SOORMA_EVENT_SERVICE_URL=events.url,
            SOORMA_REGISTRY_URL="http://127.0.0.1:9",
            SOORMA_MEMORY_URL="http://127.0.0.1:9",
        )
        # The supervisor (reload on, as the READMEs run it) passes each Ctrl-C on.
        run = await Proc.start(SOORMA, "run", str(tmp_path / "slow.py"), env=env)
        children: list[int] = []
        try:
            await run.wait_for("soorma run: running", within=60)
            children = _children(run.proc.pid)
            settings = PlatformSettings(event_service_url=events.url)
            async with PlatformContext.from_env(settings=settings) as context:
                await context.bus.announce("job.created", {})
            await run.wait_for("started")
            run.proc.send_signal(signal.SIGINT)
            await run.wait_for(second[0])
            await asyncio.sleep(second[1])
            try:
                code = await run.stop(signal.SIGINT, within=20)
            except TimeoutError:
                raise AssertionError(f"still running:\n{run.output}") from None
            assert code == 0, run.output
        finally:
            await run.kill()
            for pid in children:  # the agents' process has its own session
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
    assert "waiting up to 30 s for 1 handler(s) in progress" in run.output
    assert "cancelled 1 handler(s) on a second Ctrl-C" in run.output
    assert "agent slow stopped" in run.output
    assert "Traceback" not in run.output
