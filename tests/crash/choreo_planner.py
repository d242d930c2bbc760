"""A ChoreographyPlanner written as docs/choreography.md shows, run as its own process.

The model is a litellm custom provider (``scripted/...``) that decides from the plan in
the prompt: search first, then summarize, then complete. Every call prints
``llm-call <n>``. ``CRASH_HOLD=after_goal`` stops the goal handler (print, then sleep)
after its step, ``after_answer`` stops the transition handler after the step taken on
``search.done``, so the test can SIGKILL the process before the event's ack.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import litellm

from soorma import AgentOptions
from soorma.ai import ChoreographyPlanner

HOLD = os.environ.get("CRASH_HOLD", "")
calls = 0


def decide(prompt: str) -> str:
    if "SUMMARY-MARKER" in prompt:
        action = {"action": "complete", "result": {"summary": "owls hoot"}, "reasoning": "done"}
    elif "SEARCH-MARKER" in prompt:
        action = {
            "action": "publish",
            "event_type": "summarize.requested",
            "data": {"text": "owls"},
            "response_event": "summarize.done",
            "reasoning": "summarize what was found",
        }
    else:
        action = {
            "action": "publish",
            "event_type": "search.requested",
            "data": {"query": "owls"},
            "response_event": "search.done",
            "reasoning": "search first",
        }
    import json

    return json.dumps({"next_action": action, "reasoning": action["reasoning"]})


class Scripted(litellm.CustomLLM):  # type: ignore[misc,name-defined]
    async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
        global calls
        calls += 1
        prompt = kwargs["messages"][-1]["content"]
        print(f"llm-call {calls}", flush=True)
        return litellm.ModelResponse(
            choices=[{"message": {"role": "assistant", "content": decide(prompt)}}],
            usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        )


litellm.custom_provider_map = [{"provider": "scripted", "custom_handler": Scripted()}]

planner = ChoreographyPlanner(
    name="advisor",
    reasoning_model="scripted/planner",
    transition_topics=["action-results"],
    options=AgentOptions(
        visibility_timeout=float(os.environ.get("CRASH_VISIBILITY", "2")), ack_window=0.9
    ),
)


@planner.on_goal("research.goal")
async def on_goal(goal, context):
    plan = await planner.open_plan(goal, context)
    await planner.step(plan, context, trigger=f"new goal: {goal.data}")
    print(f"stepped goal {goal.goal_id}", flush=True)
    if HOLD == "after_goal":
        await asyncio.sleep(600)


@planner.on_transition()
async def on_transition(transition, context):
    await planner.step(
        transition.plan, context, trigger=f"{transition.event.type}: {transition.event.data}"
    )
    print(f"stepped {transition.event.type} {transition.event.id}", flush=True)
    if HOLD == "after_answer" and transition.event.type == "search.done":
        await asyncio.sleep(600)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("LiteLLM").setLevel(logging.WARNING)
    planner.run()
