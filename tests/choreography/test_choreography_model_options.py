"""The model options a ChoreographyPlanner passes to litellm are a known list.

A misspelt or unknown option fails where it is given, naming it (and the closest
accepted name), instead of travelling to the provider with every decision.
"""

from __future__ import annotations

import re

import pytest
from choreo_helpers import MODEL, ScriptedLLM, publish, register_worker

from soorma import PlatformContext
from soorma.ai import ChoreographyPlanner, ModelOptions
from soorma.ai._model_options import MODEL_OPTIONS, check_model_options


def test_a_misspelt_model_option_is_refused_when_the_planner_is_built() -> None:
    with pytest.raises(TypeError, match="unknown argument or model option 'max_token'") as caught:
        ChoreographyPlanner(name="p", reasoning_model=MODEL, max_token=100)
    assert "did you mean 'max_tokens'?" in str(caught.value)
    assert "ChoreographyPlanner(name='p')" in str(caught.value)


def test_a_misspelt_planner_argument_is_named_with_the_closest_argument() -> None:
    with pytest.raises(TypeError, match="did you mean 'goal_description'"):
        ChoreographyPlanner(name="p", reasoning_model=MODEL, goal_descripton="x")


@pytest.mark.parametrize(
    ("option", "hint"),
    [
        ("model", "use ChoreographyPlanner(reasoning_model=...)"),
        ("base_url", "use ChoreographyPlanner(api_base=...)"),
        ("messages", "set by the planner itself"),
        ("response_format", "set by the planner itself"),
        ("stream", "set by the planner itself"),
    ],
)
def test_options_the_planner_sets_itself_are_refused(option: str, hint: str) -> None:
    with pytest.raises(TypeError, match=f"'{option}' is set by the planner itself") as caught:
        ChoreographyPlanner(name="p", reasoning_model=MODEL, **{option: "x"})
    assert hint in str(caught.value)


def test_one_call_cannot_override_what_the_planner_sets() -> None:
    with pytest.raises(TypeError, match=re.escape("use ChoreographyPlanner(temperature=...)")):
        check_model_options({"temperature": 0.9}, "llm_options")
    with pytest.raises(TypeError, match=re.escape("use ChoreographyPlanner(api_key=...)")):
        check_model_options({"api_key": "sk-x"}, "llm_options")


def test_the_accepted_options_are_the_typed_list_and_planner_arguments_still_pass() -> None:
    assert set(ModelOptions.__annotations__) == MODEL_OPTIONS
    planner = ChoreographyPlanner(
        name="p",
        reasoning_model=MODEL,
        max_tokens=300,
        top_p=0.5,
        extra_body={"safe_mode": True},
        goal_description="answers questions",
    )
    assert planner.llm_kwargs == {
        "max_tokens": 300,
        "top_p": 0.5,
        "extra_body": {"safe_mode": True},
    }


@pytest.mark.asyncio
async def test_accepted_options_reach_the_model_and_a_bad_one_per_call_is_refused_first(
    context: PlatformContext, llm: ScriptedLLM
) -> None:
    await register_worker(context, name="w", consumes="a.requested", produces="a.done")
    planner = ChoreographyPlanner(name="p", reasoning_model=MODEL, max_tokens=123)
    with pytest.raises(TypeError, match="llm_options: unknown model option 'sed'"):
        await planner.reason_next_action("go", context, llm_options={"sed": 7})
    assert llm.calls == []  # refused before the model was asked
    llm.say(publish("a.requested", {}))
    decision = await planner.reason_next_action("go", context, llm_options={"seed": 7})
    assert decision.next_action.event_type == "a.requested"
    params = llm.calls[-1]["optional_params"]
    assert params["max_tokens"] == 123 and params["seed"] == 7
