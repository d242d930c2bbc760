"""One set of services per test module, each test a tenant of its own on them.

A module whose folder's ``conftest.py`` offers ``tenant_stack`` (the module's services
with a fresh tenant per test) imports :func:`stack` and :func:`context` to override the
folder's per-test ``stack`` and ``context``, and runs its tests in the module's event
loop::

    from testsupport.tenant_services import context, stack  # noqa: F401 - fixtures

    pytestmark = pytest.mark.asyncio(loop_scope="module")

:func:`running` starts agents for the length of a block and stops them (and closes
their contexts) after it, last started first stopped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol, TypeVar

import pytest_asyncio

from soorma import PlatformContext, PlatformSettings
from soorma.agents.base import Agent


class TenantStack(Protocol):
    """The services of a module, as one tenant sees them."""

    def settings(self) -> PlatformSettings: ...


S = TypeVar("S", bound=TenantStack)


@pytest_asyncio.fixture(loop_scope="module")
async def stack(tenant_stack: S) -> S:
    """The module's services, as this test's own tenant."""
    return tenant_stack


@pytest_asyncio.fixture(loop_scope="module")
async def context(stack: TenantStack) -> AsyncIterator[PlatformContext]:
    """A platform context of this test's tenant, closed after the test."""
    async with PlatformContext.from_env(settings=stack.settings()) as ctx:
        yield ctx


@asynccontextmanager
async def running(*agents: Agent) -> AsyncIterator[None]:
    """``agents`` started in order for the block, stopped in reverse after it."""
    started: list[Agent] = []
    try:
        for agent in agents:
            await agent.start()
            started.append(agent)
        yield
    finally:
        for agent in reversed(started):
            await agent.stop()
            await agent.context.close()
