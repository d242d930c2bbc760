"""Helpers for the choreography tests: a scripted LLM, registry fixtures-as-functions and
the planner and worker agents the flows run."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from soorma import PlatformContext, PlatformSettings, Tool
from soorma.ai.choreography import ChoreographyPlanner
from soorma_common.registry import AgentCapability, AgentDefinition, EventDefinition

MODEL = "scripted/planner"

SEARCH_SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string", "minLength": 1}},
    "required": ["query"],
}


def load_litellm() -> Any:
    import litellm

    return litellm


class ScriptedLLM:
    """A litellm custom provider answering from a queue (``scripted/<anything>``).

    Each call pops the next answer (a string, or a dict dumped as JSON); an exception
    instance in the queue is raised instead. Calls are recorded with their messages.
    """

    def __init__(self) -> None:
        self.answers: list[Any] = []
        self.calls: list[dict[str, Any]] = []

    def say(self, *answers: Any) -> None:
        self.answers.extend(answers)

    @contextlib.contextmanager
    def installed(self) -> Iterator[ScriptedLLM]:
        litellm = load_litellm()
        scripted = self

        class Provider(litellm.CustomLLM):  # type: ignore[misc,name-defined]
            async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
                scripted.calls.append(
                    {
                        "model": kwargs.get("model"),
                        "messages": kwargs.get("messages"),
                        "optional_params": kwargs.get("optional_params"),
                    }
                )
                if not scripted.answers:
                    raise AssertionError("the scripted LLM ran out of answers")
                answer = scripted.answers.pop(0)
                if isinstance(answer, BaseException):
                    raise answer
                content = answer if isinstance(answer, str) else json.dumps(answer)
                return litellm.ModelResponse(
                    choices=[{"message": {"role": "assistant", "content": content}}],
                    usage={"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
                )

        previous = list(litellm.custom_provider_map or [])
        litellm.custom_provider_map = [
            *previous,
            {"provider": "scripted", "custom_handler": Provider()},
        ]
        try:
            yield self
        finally:
            litellm.custom_provider_map = previous


def publish(
    event_type: str, data: dict[str, Any], reasoning: str = "next step", **extra: Any
) -> dict[str, Any]:
    return {
        "next_action": {
            "action": "publish",
            "event_type": event_type,
            "data": data,
            "reasoning": reasoning,
            **extra,
        },
        "reasoning": reasoning,
    }


def complete(result: dict[str, Any]) -> dict[str, Any]:
    return {
        "next_action": {"action": "complete", "result": result, "reasoning": "done"},
        "reasoning": "done",
    }


def wait(expected_event: str, reason: str = "needs approval") -> dict[str, Any]:
    return {
        "next_action": {"action": "wait", "reason": reason, "expected_event": expected_event},
        "reasoning": reason,
    }


def delegate(target: str, goal_event: str, goal_data: dict[str, Any]) -> dict[str, Any]:
    return {
        "next_action": {
            "action": "delegate",
            "target_planner": target,
            "goal_event": goal_event,
            "goal_data": goal_data,
            "reasoning": "sub-goal",
        },
        "reasoning": "sub-goal",
    }


async def register_worker(
    context: PlatformContext,
    *,
    name: str,
    consumes: str,
    produces: str,
    schema: dict[str, Any] | None = None,
    agent_type: str = "worker",
    description: str = "",
) -> None:
    """Register an agent (registry record only) consuming ``consumes``."""
    await context.registry.register(
        AgentDefinition(
            agent_id=name,
            name=name,
            agent_type=agent_type,
            capabilities=[
                AgentCapability(
                    task_name=consumes,
                    description=description or f"handles {consumes}",
                    consumed_event=EventDefinition(
                        event_name=consumes,
                        description=description or consumes,
                        payload_schema=schema,
                    ),
                    produced_events=[EventDefinition(event_name=produces, topic="action-results")],
                )
            ],
        )
    )


async def register_event(
    context: PlatformContext, name: str, topic: str = "action-results"
) -> None:
    await context.registry.register_event(EventDefinition(event_name=name, topic=topic))


@dataclass
class Stack:
    event_url: str
    memory_url: str
    registry_url: str
    tenant: str = "choreo"

    def settings(self, tenant: str | None = None) -> PlatformSettings:
        return PlatformSettings(
            event_service_url=self.event_url,
            memory_url=self.memory_url,
            registry_url=self.registry_url,
            tenant_id=tenant or self.tenant,
        )


def make_planner(stack: Stack, name: str, goal: str) -> ChoreographyPlanner:
    context = PlatformContext.from_env(settings=stack.settings())
    planner = ChoreographyPlanner(name=name, reasoning_model=MODEL, context=context)

    @planner.on_goal(goal)
    async def on_goal(goal, context):
        plan = await planner.open_plan(goal, context)
        await planner.step(plan, context, trigger=f"new goal {goal.event_type}: {goal.data}")

    @planner.on_transition()
    async def on_transition(transition, context):
        event = transition.event
        await planner.step(transition.plan, context, trigger=f"{event.type}: {event.data}")

    return planner


def make_searcher(stack: Stack) -> Tool:
    tool = Tool(
        name="searcher",
        context=PlatformContext.from_env(settings=stack.settings()),
        capabilities=[
            AgentCapability(
                task_name="web.search",
                description="searches the web",
                consumed_event=EventDefinition(
                    event_name="web.search.requested", payload_schema=SEARCH_SCHEMA
                ),
                produced_events=[
                    EventDefinition(event_name="web.search.completed", topic="action-results")
                ],
            )
        ],
    )

    @tool.on_invoke("web.search.requested")
    async def search(request, context):
        return {"hits": [f"{request.data['query']} result"]}

    return tool


async def eventually_paused(context: PlatformContext):
    """The one paused plan, once the planner has paused it (polls the memory service)."""
    async with asyncio.timeout(30):
        while True:
            plans = await context.memory.list_plans(status="paused")
            if plans:
                return plans[0]
            await asyncio.sleep(0.05)
