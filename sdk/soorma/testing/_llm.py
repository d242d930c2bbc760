"""ScriptedLLM: a model for ChoreographyPlanner tests that answers from a script.

The planner is not bypassed: each decision still goes through ``litellm.acompletion``
(to a litellm *custom provider* registered here, so no network and no key), then through
the planner's parsing, its validation against the live registry, its repair prompts and
its audit trail. Only the model's text is scripted.
"""

from __future__ import annotations

import inspect
import itertools
import json
import os
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from soorma._propagation import current_event
from soorma_common.events import EventEnvelope
from soorma_common.memory import PlanContextRecord

PROVIDER = "soorma-scripted"

_PLAN_ID = re.compile(r'"plan_id":\s*"([^"]+)"')
_TRIGGER = re.compile(r"^Trigger: (.*?)(?:\n\n|\Z)", re.DOTALL)
_ids = itertools.count(1)
# model suffix -> the script answering it (one provider serves every ScriptedLLM).
_scripts: dict[str, ScriptedLLM] = {}


@dataclass(slots=True)
class LLMCall:
    """One model call the planner made, as a script callable sees it.

    Attributes:
        index: 0 for the first call to this model, 1 for the next...
        model: The model id the planner asked for.
        messages: The chat messages (system prompt, trigger, plan, events, rules...).
        trigger: What prompted the decision (``"new goal: {...}"``).
        plan_id: The plan the decision is for (``None`` without a plan).
        plan: The plan as stored in the memory service when the call was made.
        event: The event the planner was handling (``None`` outside a handler).
        repair: True when this is a re-prompt after an invalid answer.
    """

    index: int
    model: str
    messages: list[dict[str, Any]]
    trigger: str = ""
    plan_id: str | None = None
    plan: PlanContextRecord | None = None
    event: EventEnvelope | None = None
    repair: bool = False
    answer: str | None = field(default=None, repr=False)

    @property
    def results(self) -> dict[str, Any]:
        """The plan's results so far (``{}`` without a plan)."""
        return dict(self.plan.results) if self.plan is not None else {}

    @property
    def goal_data(self) -> dict[str, Any]:
        """The plan's goal data (``{}`` without a plan)."""
        return dict(self.plan.goal_data) if self.plan is not None else {}


# What a script step may be: a decision (PlannerDecision, an action, or their dict form),
# raw model text (str, e.g. to test the planner's repair of invalid JSON), an exception
# instance (raised as the provider's error), or a callable deciding when it is reached.
Answer = BaseModel | Mapping[str, Any] | str | BaseException
ScriptFunction = Callable[["LLMCall"], Answer | Awaitable[Answer]]
ScriptItem = Answer | ScriptFunction
Script = Sequence[ScriptItem] | ScriptFunction
PlanLoader = Callable[[str], Awaitable[PlanContextRecord | None]]


class ScriptExhausted(AssertionError):
    """The planner asked the scripted model more often than the script has answers."""


class ScriptedLLM:
    """A scripted model: use :attr:`model` as the planner's ``reasoning_model``.

    Build it with :meth:`soorma.testing.PlatformHarness.scripted_llm` (or
    :meth:`~soorma.testing.PlatformHarness.script`, which also points a planner at it).

    Args:
        script: The answers in order, or a callable ``(LLMCall) -> answer`` (sync or
            async) deciding from the plan. An answer is a ``PlannerDecision`` (model or
            dict), a bare action (``{"action": "publish", ...}``), raw text, or an
            exception to raise.
        load_plan: Reads a plan from the memory service (fills :attr:`LLMCall.plan`).
    """

    def __init__(self, script: Script, *, load_plan: PlanLoader | None = None) -> None:
        if not callable(script) and (
            isinstance(script, str | bytes) or not isinstance(script, Sequence)
        ):
            raise TypeError(
                "script must be a list of decisions or a callable (LLMCall) -> decision"
            )
        self.name = f"run{next(_ids)}"
        self.model = f"{PROVIDER}/{self.name}"
        self.calls: list[LLMCall] = []
        self._script = script
        self._queue: list[ScriptItem] = [] if callable(script) else list(script)
        self._load_plan = load_plan

    @property
    def remaining(self) -> int:
        """Scripted answers not used yet (0 for a callable script)."""
        return len(self._queue)

    def install(self) -> None:
        """Register with litellm (imports litellm: seconds, once per process)."""
        _install_provider()
        _scripts[self.name] = self

    def uninstall(self) -> None:
        """Stop answering (further calls fail as an unknown scripted model)."""
        _scripts.pop(self.name, None)

    async def answer(self, model: str, messages: list[dict[str, Any]]) -> str:
        """The scripted text for one call (used by the litellm provider)."""
        user = next((m.get("content", "") for m in messages if m.get("role") == "user"), "")
        trigger = _TRIGGER.search(user)
        plan_id = _PLAN_ID.search(user)
        call = LLMCall(
            index=len(self.calls),
            model=model,
            messages=[dict(m) for m in messages],
            trigger=trigger.group(1).strip() if trigger else "",
            plan_id=plan_id.group(1) if plan_id else None,
            event=current_event(),
            repair=any(m.get("role") == "assistant" for m in messages),
        )
        if call.plan_id and self._load_plan is not None:
            call.plan = await self._load_plan(call.plan_id)
        self.calls.append(call)
        item: Any
        if callable(self._script):
            item = self._script(call)
            if inspect.isawaitable(item):
                item = await item
        elif self._queue:
            item = self._queue.pop(0)
        else:
            raise ScriptExhausted(
                f"the scripted LLM has no answer left: the script had "
                f"{len(self.calls) - 1}, the planner asked again (trigger: {call.trigger!r})"
            )
        while callable(item) and not isinstance(item, BaseModel | BaseException | type):
            item = item(call)  # a step of a list decided when it is reached
            if inspect.isawaitable(item):
                item = await item
        if isinstance(item, BaseException):
            raise item
        call.answer = as_model_text(item)
        return call.answer


def as_model_text(item: Any) -> str:
    """The model text for a script item (a decision, an action, a dict or raw text)."""
    if isinstance(item, str):
        return item
    if isinstance(item, BaseModel):
        item = item.model_dump(mode="json")
    if isinstance(item, Mapping):
        decision = dict(item)
        if "next_action" not in decision and "action" in decision:
            # A bare action: wrap it the way a model would answer.
            decision = {"next_action": decision}
        action = decision.get("next_action")
        if isinstance(action, Mapping):
            # Scripts may leave out the reasoning the schema asks for: it is not what
            # a planner test is about.
            reasoning = str(decision.get("reasoning") or action.get("reasoning") or "scripted")
            decision["next_action"] = {"reasoning": reasoning, **action}
            decision.setdefault("reasoning", reasoning)
        return json.dumps(decision, default=str)
    raise TypeError(
        f"a scripted answer must be a decision (dict or model), text or an exception, "
        f"not {type(item).__name__}"
    )


_provider: Any = None


def _install_provider() -> None:
    """Make sure litellm routes ``soorma-scripted/...`` to the scripts (idempotent)."""
    global _provider
    # Without this litellm downloads its model price list when imported.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from soorma.ai._llm import load_litellm

    litellm = load_litellm()
    if _provider is None:
        _provider = _make_provider(litellm)
    entries = list(litellm.custom_provider_map or [])
    # Checked on every install: other code may have replaced the map meanwhile.
    if not any(isinstance(e, dict) and e.get("custom_handler") is _provider for e in entries):
        entries = [
            e for e in entries if not (isinstance(e, dict) and e.get("provider") == PROVIDER)
        ]
        litellm.custom_provider_map = [
            *entries,
            {"provider": PROVIDER, "custom_handler": _provider},
        ]


def _make_provider(litellm: Any) -> Any:
    class ScriptedProvider(litellm.CustomLLM):  # type: ignore[misc]
        """Routes ``soorma-scripted/<name>`` calls to the ScriptedLLM of that name."""

        async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            model = str(kwargs.get("model") or "")
            name = model.rsplit("/", 1)[-1]
            scripted = _scripts.get(name)
            if scripted is None:
                raise RuntimeError(f"no scripted LLM {model!r} is active (its harness has ended?)")
            content = await scripted.answer(model, list(kwargs.get("messages") or []))
            return litellm.ModelResponse(
                model=model,
                choices=[{"message": {"role": "assistant", "content": content}}],
                usage={"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            )

    return ScriptedProvider()


__all__ = [
    "PROVIDER",
    "LLMCall",
    "Script",
    "ScriptExhausted",
    "ScriptFunction",
    "ScriptItem",
    "ScriptedLLM",
    "as_model_text",
]
