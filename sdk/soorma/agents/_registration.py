"""Keeping an agent announced in the registry while it runs.

The registry only serves discovery: an agent keeps handling events without it. So a
registration that fails on an outage is retried by the heartbeat loop, while a schema
error in the agent's own events fails the start (a bug to fix, not an outage to wait out).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from soorma_common.errors import AgentNotFound, SoormaError, ValidationFailed

if TYPE_CHECKING:
    from soorma.registry import RegistryClient
    from soorma_common.registry import AgentDefinition, EventDefinition

logger = logging.getLogger("soorma.agent")

DefinitionBuilder = Callable[[], "tuple[AgentDefinition, list[EventDefinition]]"]


class RegistryPresence:
    """Registers an agent, heartbeats every third of its TTL and deregisters at stop.

    Args:
        name: Agent name (for log lines).
        agent_id: Registry id the heartbeats and the deregistration use.
        ttl_seconds: Registry lease of the entry.
        definition: Builds the agent's record and its standalone events.
    """

    def __init__(
        self, *, name: str, agent_id: str, ttl_seconds: int, definition: DefinitionBuilder
    ) -> None:
        self.name = name
        self.agent_id = agent_id
        self.ttl_seconds = ttl_seconds
        self._definition = definition
        self.registered = False
        self.task: asyncio.Task[None] | None = None
        self._registry: RegistryClient | None = None

    async def start(self, registry: RegistryClient | None) -> None:
        """Register and start heartbeating (no-op without a registry).

        Raises:
            ValidationFailed: the agent's own events or capabilities are invalid.
        """
        if registry is None:
            return
        self._registry = registry.without_retries()
        self._definition()  # malformed capabilities/events fail the start here
        self.registered = await self._register_once()
        self.task = asyncio.create_task(self._heartbeat_loop(), name=f"agent {self.name} heartbeat")

    async def stop(self) -> None:
        """Stop heartbeating and deregister (errors are ignored: the TTL expires it)."""
        task, self.task = self.task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        registry, self._registry = self._registry, None
        if registry is None or not self.registered:
            return
        self.registered = False
        with contextlib.suppress(SoormaError):
            await registry.deregister(self.agent_id)

    async def _register_once(self) -> bool:
        assert self._registry is not None
        definition, standalone = self._definition()
        try:
            for event in standalone:
                await self._registry.register_event(event)
            await self._registry.register(definition)
        except ValidationFailed:
            raise  # an invalid schema or topic in the agent's own events: a bug to fix
        except SoormaError as exc:
            logger.warning("agent %s: registration failed (%s); will retry", self.name, exc)
            return False
        return True

    async def _heartbeat_loop(self) -> None:
        assert self._registry is not None
        interval = max(self.ttl_seconds / 3, 0.05)
        while True:
            await asyncio.sleep(interval)
            try:
                if not self.registered:
                    self.registered = await self._register_once()
                    continue
                try:
                    await self._registry.heartbeat(self.agent_id)
                except AgentNotFound:
                    # Expired (e.g. paused past the TTL) or purged: announce again.
                    self.registered = await self._register_once()
            except SoormaError as exc:
                logger.warning("agent %s: heartbeat failed: %s", self.name, exc)
