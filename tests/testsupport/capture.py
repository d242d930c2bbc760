"""Collect the events a test publishes or causes, from a broadcast subscription."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from soorma import Event, PlatformContext


@contextlib.asynccontextmanager
async def capture(
    context: PlatformContext, topics: list[str], event_types: list[str] | None = None
) -> AsyncIterator[list[Event]]:
    """Collect events from ``topics`` (broadcast) while the block runs."""
    seen: list[Event] = []
    async with context.bus.subscribe(topics, event_types=event_types) as sub:
        await sub.wait_ready()

        async def pump() -> None:
            async for event in sub:
                seen.append(event)

        task = asyncio.create_task(pump())
        try:
            yield seen
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
