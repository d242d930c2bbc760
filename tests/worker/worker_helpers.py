"""Helpers shared by the worker tests (a module with a unique name)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from soorma import Event, PlatformContext, Tool


async def next_event(sub, *, within: float = 20.0, where=None) -> Event:
    """The next event of ``sub`` (matching ``where``), failing after ``within`` seconds."""
    async with asyncio.timeout(within):
        async for event in sub:
            if where is None or where(event):
                return event
    raise AssertionError("stream closed")


async def collect(sub, count: int, *, within: float = 30.0) -> list[Event]:
    """The next ``count`` events of ``sub``."""
    out: list[Event] = []
    async with asyncio.timeout(within):
        async for event in sub:
            out.append(event)
            if len(out) == count:
                return out
    raise AssertionError(f"stream closed after {len(out)} of {count} events")


def echo_tool(context: PlatformContext, event_types: Sequence[str], name: str = "echo") -> Tool:
    """A tool answering each request with ``{"echo": <its data>, "type": <its type>}``."""
    tool = Tool(name=name, context=context)

    for event_type in event_types:

        @tool.on_invoke(event_type)
        async def echo(request, ctx):
            return {"echo": request.data, "type": request.event_type}

    return tool
