"""Barriers for tests that assert something did *not* happen: instead of sleeping for a
while, wait until the agents have handled everything there is (:func:`settled`) and a
capture has seen everything published so far (:func:`caught_up`)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from soorma import Event, PlatformContext


async def settled(
    context: PlatformContext, *, in_flight: Mapping[str, int] | None = None, within: float = 20.0
) -> None:
    """Wait until every consumer group of ``context``'s tenant has taken and acknowledged
    every event on its topics: each agent handled all there is, so what they publish in
    answer has been published too (an agent publishes before it acknowledges).

    ``in_flight`` names the deliveries known to stay unacknowledged (a handler the test
    keeps blocked): group -> how many. Seen twice in a row, 10 ms apart, so an answer
    published between the service's reads of two topics cannot slip through.
    """
    allowed = dict(in_flight or {})
    quiet = 0
    async with asyncio.timeout(within):
        while quiet < 2:
            pending: dict[str, int] = {}
            lag = 0
            for group in (await context.bus.consumer_groups()).groups:
                lag += group.lag
                pending[group.group] = pending.get(group.group, 0) + group.pending
            done = not lag and all(n <= allowed.get(g, 0) for g, n in pending.items())
            quiet = quiet + 1 if done else 0
            await asyncio.sleep(0.01)


MARKER = "test.marker"


async def caught_up(context: PlatformContext, seen: list[Event], topic: str) -> None:
    """Publish a marker on ``topic`` and wait until ``seen`` (a capture of ``topic`` that
    takes ``MARKER`` events) has it: the capture has everything published before."""
    marker = await context.bus.publish(topic, MARKER, {})
    async with asyncio.timeout(20):
        while not any(e.id == marker for e in seen):  # noqa: ASYNC110
            await asyncio.sleep(0.01)
