"""Starts a ChoreographyPlanner in a fresh process (litellm not imported yet) while a
ticker runs on the loop; prints what the ticker saw and whether litellm was loaded when
start() returned. Used by test_choreography_models.py."""

from __future__ import annotations

import asyncio
import sys

from soorma import PlatformContext, PlatformSettings
from soorma.ai import ChoreographyPlanner, _llm


async def main(event_url: str) -> None:
    context = PlatformContext.from_env(
        settings=PlatformSettings(event_service_url=event_url, registry_url="http://127.0.0.1:9")
    )
    planner = ChoreographyPlanner(name="starter", reasoning_model="ollama/llama3", context=context)

    @planner.on_goal("start.goal")
    async def on_goal(goal, ctx):
        return None

    ticks_before_loaded = 0
    stop = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks_before_loaded
        while not stop.is_set():
            if _llm._litellm is None:
                ticks_before_loaded += 1
            await asyncio.sleep(0.01)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    print(f"litellm imported before start: {'litellm' in sys.modules}", flush=True)
    await planner.start()
    print(f"loaded when ready: {_llm._litellm is not None}", flush=True)
    stop.set()
    await task
    print(f"loop ticks while loading: {ticks_before_loaded}", flush=True)
    await planner.stop()
    await context.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
