"""Issue 9 item 6: per-model settings for fallback models, a planner never offered its own
goal, and litellm loaded at start (off the event loop) before the planner reports ready."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from choreo_helpers import Stack, complete, load_litellm, publish, register_worker

from event_service import create_app as create_event_app
from soorma import PlatformContext
from soorma.ai import ChoreographyPlanner, DecisionInvalid, LLMNotConfigured
from soorma.ai._models import model_settings
from soorma_common.events import EventEnvelope
from testsupport.server import serve
from testsupport.services import event_settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sdk"))
from sdk_helpers import Proc, subprocess_env


class Endpoints:
    """A litellm custom provider recording the endpoint and key each call was sent with;
    ``down`` lists model names whose endpoint fails."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.answers: list[Any] = []
        self.down: set[str] = set()


@pytest.fixture
def endpoints() -> Iterator[Endpoints]:
    litellm = load_litellm()
    recorded = Endpoints()

    class Provider(litellm.CustomLLM):  # type: ignore[misc,name-defined]
        async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            model = kwargs.get("model")
            recorded.calls.append(
                {
                    "model": model,
                    "api_base": kwargs.get("api_base"),
                    "api_key": kwargs.get("api_key"),
                    "messages": kwargs.get("messages"),
                }
            )
            if model in recorded.down:
                raise ConnectionError(f"{model} endpoint is down")
            content = json.dumps(recorded.answers.pop(0))
            return litellm.ModelResponse(
                choices=[{"message": {"role": "assistant", "content": content}}]
            )

    previous = list(litellm.custom_provider_map or [])
    litellm.custom_provider_map = [*previous, {"provider": "ep", "custom_handler": Provider()}]
    try:
        yield recorded
    finally:
        litellm.custom_provider_map = previous


def goal_event() -> EventEnvelope:
    return EventEnvelope(
        source="client",
        type="research.goal",
        topic="action-requests",
        data={"topic": "owls"},
        correlation_id="g-1",
        response_event="research.done",
    )


@pytest.mark.asyncio
async def test_a_local_model_falls_back_to_a_hosted_one_with_its_own_endpoint_and_key(
    context: PlatformContext,
    endpoints: Endpoints,
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setenv("HOSTED_KEY", "sk-hosted")
    planner = ChoreographyPlanner(
        name="p",
        reasoning_model="ep/local",
        api_base="http://127.0.0.1:11434",
        repair_retries=0,
        fallback_models=[
            {
                "model_name": "hosted",
                "litellm_params": {
                    "model": "ep/hosted",
                    "api_base": "https://llm.example/v1",
                    "api_key": "os.environ/HOSTED_KEY",
                },
            }
        ],
    )
    await register_worker(
        context, name="searcher", consumes="web.search.requested", produces="web.search.completed"
    )
    plan = await planner.open_plan(goal_event(), context)
    endpoints.down.add("local")
    endpoints.answers.append(complete({"ok": True}))

    decision = await planner.reason_next_action("go", context, plan=plan)

    assert decision.next_action.result == {"ok": True}
    assert [(c["model"], c["api_base"], c["api_key"]) for c in endpoints.calls] == [
        ("local", "http://127.0.0.1:11434", None),
        ("hosted", "https://llm.example/v1", "sk-hosted"),
    ]
    assert planner.fallback_models == ("ep/hosted",)
    # The key never reaches the audit trail.
    assert "sk-hosted" not in json.dumps(planner.audit_log[-1], default=str)


def test_model_settings_shapes_and_their_errors(monkeypatch: pytest.MonkeyPatch):
    plain = model_settings("gpt-4o", api_base="http://proxy", api_key="k")
    assert (plain.model, plain.api_base, plain.key()) == ("gpt-4o", "http://proxy", "k")
    monkeypatch.setenv("GROQ_KEY", "g")
    flat = model_settings(
        {"model": "groq/llama", "api_key_env": "GROQ_KEY", "top_p": 0.5}, api_base="http://ignored"
    )
    assert (flat.api_base, flat.key(), flat.options) == (None, "g", {"top_p": 0.5})
    with pytest.raises(ValueError, match="need 'model'"):
        model_settings({"api_base": "http://x"})
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("MISSING_KEY", raising=False)
    planner = ChoreographyPlanner(
        name="p",
        reasoning_model="gpt-4o",
        fallback_models=[{"model": "openai/gpt-4o-mini", "api_key_env": "MISSING_KEY"}],
    )
    with pytest.raises(LLMNotConfigured, match="OPENAI_API_KEY"):
        planner.check_llm_configured()
    monkeypatch.setenv("MISSING_KEY", "now-set")
    planner.check_llm_configured()  # the fallback has its key now


@pytest.mark.asyncio
async def test_the_planners_own_goal_is_not_offered_to_the_model(
    stack: Stack,
    context: PlatformContext,
    endpoints: Endpoints,
):
    planner = ChoreographyPlanner(
        name="researcher",
        reasoning_model="ep/m",
        repair_retries=0,
        context=PlatformContext.from_env(settings=stack.settings()),
    )

    @planner.on_goal("research.goal")
    async def on_goal(goal, ctx):
        return None

    await register_worker(
        context, name="searcher", consumes="web.search.requested", produces="web.search.completed"
    )
    await planner.start()  # registers research.goal as its capability
    try:
        plan = await planner.open_plan(goal_event(), context)
        endpoints.answers.append(publish("research.goal", {"topic": "owls again"}))
        with pytest.raises(DecisionInvalid, match=r"research\.goal"):
            await planner.reason_next_action("go", context, plan=plan)
    finally:
        await planner.stop()
        await planner.context.close()
    listing = endpoints.calls[0]["messages"][-1]["content"].split("Available events:")[1]
    assert "web.search.requested" in listing
    assert "research.goal" not in listing.split("Decide the single next action")[0]


@pytest.mark.asyncio
async def test_litellm_is_loaded_at_start_off_the_loop_before_ready():
    script = Path(__file__).with_name("startup_planner.py")
    async with serve(create_event_app(event_settings())) as events:
        # A new interpreter: what is imported at start is the point of this test.
        proc = await Proc.start(
            sys.executable, str(script), events.url, env=subprocess_env(), fresh=True
        )
        try:
            code = await proc.wait(90)
        finally:
            await proc.kill()
    assert code == 0, proc.output
    assert "litellm imported before start: False" in proc.lines, proc.output
    assert "loaded when ready: True" in proc.lines, proc.output
    ticks = next(line for line in proc.lines if line.startswith("loop ticks while loading"))
    assert int(ticks.split(": ")[1]) > 0, proc.output  # the loop ran during the import
