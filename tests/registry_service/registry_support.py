"""Test helpers for the registry-service tests: a controllable clock, condition polling."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest


class FakeClock:
    """Epoch seconds that only move when a test says so."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


WAIT_SECONDS = 15.0


async def wait_until(condition: Callable[[], Awaitable[bool]], what: str) -> None:
    """Poll ``condition`` until true; fail (not hang) if it never becomes true."""
    deadline = asyncio.get_running_loop().time() + WAIT_SECONDS
    while not await condition():
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out waiting until {what}")
        await asyncio.sleep(0.05)
