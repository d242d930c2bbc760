"""Agent checks run two ways: in process on a manual clock, and in real time against the
event service on Redis (which keeps its own time for leases and claims).

A check takes a :class:`Timing` for how its time passes and how its agent starts and
stops: :func:`harness_timing` on a ``PlatformHarness``, :data:`REAL_TIME` on a served
event service such as :func:`redis_event_service`'s. A module using the fixture binds
it by name (``redis_event_service = agent_timing.redis_event_service``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import pytest_asyncio

from event_service import create_app
from soorma import Agent
from soorma.testing import PlatformHarness
from testsupport.server import LiveServer, serve
from testsupport.services import redis_event_settings


@dataclass(frozen=True)
class Timing:
    """How a check lets ``seconds`` pass, and starts and stops its agent."""

    passes: Callable[[float], Awaitable[None]]
    start: Callable[[Agent], Awaitable[object]]
    stop: Callable[[Agent], Awaitable[object]]


REAL_TIME = Timing(passes=asyncio.sleep, start=Agent.start, stop=Agent.stop)


def harness_timing(platform: PlatformHarness) -> Timing:
    """The harness's manual clock, and its agent start and stop (which run on it)."""
    return Timing(passes=platform.advance, start=platform.start, stop=platform.stop)


@pytest_asyncio.fixture
async def redis_event_service(redis_url: str, redis_prefix: str) -> AsyncIterator[LiveServer]:
    """The event service on Redis (this test's key space) under uvicorn: expired and
    nacked deliveries claimed every 0.05 s, events up to 4 KiB."""
    settings = redis_event_settings(
        redis_url, redis_prefix, claim_interval_seconds=0.05, max_payload_bytes=4096
    )
    async with serve(create_app(settings)) as server:
        yield server
