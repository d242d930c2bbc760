"""Helpers for the crash tests: agent processes, and a recorder of requests on the bus."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from sdk_helpers import Proc, subprocess_env

from soorma import PlatformContext

HERE = Path(__file__).resolve().parent


async def start_agent(script: str, services: dict[str, str], ready: str, **env: str) -> Proc:
    """Run ``script`` (in this folder) as a process; wait for its ``ready`` line."""
    proc = await Proc.start(
        sys.executable, str(HERE / script), env=subprocess_env(**services, **env)
    )
    await proc.wait_for(ready, within=90)
    return proc


class WarmAgent:
    """An agent process started ahead (warm_start.py): imports done, its script not yet
    run. :meth:`go` runs it with more environment and waits for its ``ready`` line."""

    def __init__(self, proc: Proc) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, script: str, services: dict[str, str]) -> WarmAgent:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(HERE / "warm_start.py"),
            str(HERE / script),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=subprocess_env(**services),
        )
        return cls(Proc(process))

    async def go(self, ready: str, **env: str) -> Proc:
        await self.proc.wait_for("warm", within=90)
        stdin = self.proc.proc.stdin
        assert stdin is not None
        stdin.write(json.dumps(env).encode() + b"\n")
        await stdin.drain()
        await self.proc.wait_for(ready, within=90)
        return self.proc


async def sigkill(proc: Proc) -> None:
    """SIGKILL: no graceful shutdown, no pending ack flushed."""
    proc.proc.kill()
    await proc.wait()


async def until(predicate, within: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    """Wait until ``predicate()`` holds (polls a condition with no event to await)."""
    async with asyncio.timeout(within):
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.05)


async def register_tool(context: PlatformContext, name: str, consumes: str, produces: str) -> None:
    """A registry record of a live agent consuming ``consumes`` (what PUBLISH may use)."""
    from soorma_common.registry import AgentCapability, AgentDefinition, EventDefinition

    await context.registry.register(
        AgentDefinition(
            agent_id=name,
            name=name,
            agent_type="tool",
            capabilities=[
                AgentCapability(
                    task_name=consumes,
                    description=f"handles {consumes}",
                    consumed_event=EventDefinition(event_name=consumes, description=consumes),
                    produced_events=[EventDefinition(event_name=produces, topic="action-results")],
                )
            ],
        )
    )


def llm_calls(*procs: Proc | None) -> int:
    """How many model calls the planner processes made (their ``llm-call`` lines)."""
    return sum(
        1
        for proc in procs
        if proc is not None
        for line in proc.lines
        if line.startswith("llm-call ")
    )
