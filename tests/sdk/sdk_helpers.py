"""Helpers shared by the SDK tests (a module with a unique name, importable from tests)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from soorma import PlatformContext, PlatformSettings


def make_context(url: str) -> PlatformContext:
    """A context for the event service at ``url`` that reconnects quickly."""
    context = PlatformContext.from_env(settings=PlatformSettings(event_service_url=url))
    # Reconnect quickly in tests that restart the service.
    context.bus.max_backoff = 0.3
    return context


async def eventually(predicate: Callable[[], bool], within: float = 15.0) -> None:
    """Wait until ``predicate()`` holds, failing after ``within`` seconds.

    Polls: the conditions waited on (a reconnect, a stop in progress) are internal
    states with no event to await.
    """
    async with asyncio.timeout(within):
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.01)
