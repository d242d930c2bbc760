"""Helpers for the crash tests: agent processes, and a recorder of requests on the bus."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path

from sdk_helpers import Proc, subprocess_env

from soorma import PlatformContext
from testsupport import forkserver

HERE = Path(__file__).resolve().parent


async def start_agent(
    script: str,
    services: dict[str, str],
    ready: str,
    *,
    preload: Sequence[str] = forkserver.PRELOAD,
    **env: str,
) -> Proc:
    """Run ``script`` (in this folder) as a process; wait for its ``ready`` line.

    The process is forked from a server with ``preload`` imported (PRELOAD_AI: litellm,
    four seconds of CPU per start otherwise); it is killed like any other."""
    proc = await Proc.start(
        sys.executable,
        str(HERE / script),
        env=subprocess_env(**services, **env),
        preload=preload,
    )
    await proc.wait_for(ready, within=90)
    return proc


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
