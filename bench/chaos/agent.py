"""One agent replica of the chaos run (``bench/chaos.py``), as a process of its own.

    python bench/chaos/agent.py sm-planner | sm-workers | ch-planner | ch-tools

The agents are the examples' own definitions, imported from ``examples/04`` (research
state machine: its planner and its three answering agents) and ``examples/05`` (the
ChoreographyPlanner and its three tools). Workers and tools are re-registered around a
counter: every execution of a handler body adds 1 to ``CHAOS_KEY:exec`` (field
``<agent>|<request id>``, with the process id appended to ``CHAOS_KEY:pids:<field>``)
and to ``CHAOS_KEY:plan`` (field ``<plan id>|<agent>``), and files the request under its
plan in ``CHAOS_KEY:req`` (the distinct requests: the effects a body keyed by its
request id has) in the run's Redis (``CHAOS_REDIS_URL``), *before* the example's code
runs - so a repeated execution is seen even when the process dies right after it.

Prints ``ready`` once every agent of the process has its event stream open.
Configuration comes from the environment: ``SOORMA_*`` URLs and ``SOORMA_CONSUMER_ID``
(the replica's stable identity), ``CHAOS_LLM_BASE`` (the scripted model's endpoint).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SM_DIR = ROOT / "examples" / "04-planner-state-machine"
CH_DIR = ROOT / "examples" / "05-choreography"
LLM_MODEL = "openai/chaos-scripted"


def counted(
    agent: str, func: Callable[..., Awaitable[Any]], redis: Any, key: str
) -> Callable[..., Awaitable[Any]]:
    """``func`` (an example handler) preceded by one execution count in Redis."""

    @functools.wraps(func)
    async def handler(*args: Any) -> Any:
        event = args[0]
        event_id = getattr(event, "request_id", None) or event.id
        async with redis.pipeline(transaction=True) as pipe:
            pipe.hincrby(f"{key}:exec", f"{agent}|{event_id}", 1)
            pipe.rpush(f"{key}:pids:{agent}|{event_id}", os.getpid())
            pipe.hincrby(f"{key}:plan", f"{event.plan_id}|{agent}", 1)
            pipe.hset(f"{key}:req", f"{agent}|{event_id}", str(event.plan_id))
            await pipe.execute()
        return await func(*args)

    return handler


def sm_workers(redis: Any, key: str) -> list[Any]:
    """examples/04's searcher, analyzer and user stand-in, their work counted.

    The example answers each request once (``run_once``: the outcome is recorded before
    it is sent); the count wraps the work itself, so a request that runs again shows.
    """
    sys.path.insert(0, str(SM_DIR))
    import workers as ex  # examples/04/workers.py

    from soorma import Agent

    agents = []
    for original, event_type, work in ex.WORK.values():
        agent = Agent(name=original.name, description=original.description)
        ex.answering(agent, event_type, counted(original.name, work, redis, key))
        agents.append(agent)
    return agents


def ch_tools(redis: Any, key: str) -> list[Any]:
    """examples/05's fetch, analyze and report tools, counted."""
    sys.path.insert(0, str(CH_DIR))
    import workers as ex  # examples/05/workers.py

    from soorma import Tool

    tools = []
    for original, event_type, func in (
        (ex.fetcher, "doc.fetch.requested", ex.fetch),
        (ex.analyzer, "doc.analyze.requested", ex.analyze),
        (ex.reporter, "doc.report.requested", ex.report),
    ):
        tool = Tool(
            name=original.name, description=original.description, capabilities=original.capabilities
        )
        wrapped = counted(original.name, func, redis, key)

        async def invoke(request: Any, context: Any, _wrapped: Any = wrapped) -> Any:
            return await _wrapped(request, context)

        tool.on_invoke(event_type)(invoke)
        tools.append(tool)
    return tools


def sm_planner() -> list[Any]:
    sys.path.insert(0, str(SM_DIR))
    import planner as ex  # examples/04/planner.py

    return [ex.planner]


def ch_planner() -> list[Any]:
    sys.path.insert(0, str(CH_DIR))
    import planner as ex  # examples/05/planner.py

    return [ex.build_planner(LLM_MODEL, offline=False, api_base=os.environ["CHAOS_LLM_BASE"])]


async def main(kind: str) -> None:
    import redis.asyncio as aioredis

    redis = aioredis.from_url(os.environ["CHAOS_REDIS_URL"])
    key = os.environ["CHAOS_KEY"]
    agents = {
        "sm-planner": sm_planner,
        "ch-planner": ch_planner,
        "sm-workers": lambda: sm_workers(redis, key),
        "ch-tools": lambda: ch_tools(redis, key),
    }[kind]()
    await asyncio.gather(*(agent.start() for agent in agents))
    print("ready", flush=True)
    await asyncio.Event().wait()  # until SIGKILL (or SIGTERM at the end of the run)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    asyncio.run(main(sys.argv[1]))
