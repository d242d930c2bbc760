"""Helpers for the planner tests: a platform handle, scripted responders, event capture."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from soorma import Agent, Event, PlatformContext, PlatformSettings


@dataclass
class Platform:
    events: str
    memory: str
    registry: str
    tenant_id: str | None = None
    _contexts: list[PlatformContext] = field(default_factory=list)
    _agents: list[Agent] = field(default_factory=list)

    @property
    def settings(self) -> PlatformSettings:
        settings = PlatformSettings(
            event_service_url=self.events, memory_url=self.memory, registry_url=self.registry
        )
        if self.tenant_id is not None:
            settings = dataclasses.replace(settings, tenant_id=self.tenant_id)
        return settings

    def context(self) -> PlatformContext:
        ctx = PlatformContext.from_env(settings=self.settings)
        ctx.bus.max_backoff = 0.3
        self._contexts.append(ctx)
        return ctx

    def env(self) -> dict[str, str]:
        env = {
            "SOORMA_EVENT_SERVICE_URL": self.events,
            "SOORMA_MEMORY_URL": self.memory,
            "SOORMA_REGISTRY_URL": self.registry,
        }
        if self.tenant_id is not None:
            env["SOORMA_TENANT_ID"] = self.tenant_id
        return env

    async def start(self, agent: Agent) -> Agent:
        await agent.start()
        self._agents.append(agent)
        return agent

    async def close(self) -> None:
        for agent in reversed(self._agents):
            with contextlib.suppress(Exception):
                await agent.stop()
        for ctx in self._contexts:
            await ctx.close()


def responder(platform: Platform, name: str, event_type: str, answer: Any) -> Agent:
    """An agent answering ``event_type`` requests: ``answer(event)`` -> (type, data)."""
    agent = Agent(name=name, context=platform.context())

    @agent.on_event(topic="action-requests", event_type=event_type)
    async def handle(event: Event, context: PlatformContext) -> None:
        result = answer(event)
        if asyncio.iscoroutine(result):
            result = await result
        reply_type, data = result
        await context.bus.respond(
            reply_type, data, correlation_id=event.correlation_id, topic=event.response_topic
        )

    return agent


async def wait_for(predicate: Any, within: float = 20.0) -> None:
    """Wait until ``predicate()`` holds (polling a condition with no event to await)."""
    async with asyncio.timeout(within):
        while not predicate():  # noqa: ASYNC110
            await asyncio.sleep(0.02)
