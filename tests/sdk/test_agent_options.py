"""AgentOptions: one checked value for how an agent consumes, shared by every agent type."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from soorma import Agent, AgentOptions, Planner, Tool, Worker
from soorma.ai import ChoreographyPlanner

# What an agent is, given to its constructor; everything else is an option.
IDENTITY = {
    "name",
    "description",
    "version",
    "capabilities",
    "events_consumed",
    "events_produced",
    "agent_id",
    "context",
    "options",
}


def test_the_agent_constructor_takes_what_the_agent_is_and_one_options_value() -> None:
    parameters = set(inspect.signature(Agent.__init__).parameters) - {"self"}
    assert parameters == IDENTITY


@pytest.mark.parametrize("cls", [Tool, Worker, Planner, ChoreographyPlanner])
def test_agent_types_do_not_list_the_consumption_options_again(cls: type[Agent]) -> None:
    knobs = {field.name for field in dataclasses.fields(AgentOptions)}
    assert not knobs & set(inspect.signature(cls.__init__).parameters)


def test_an_agent_applies_its_options() -> None:
    options = AgentOptions(
        group="billing",
        max_concurrency=4,
        visibility_timeout=2.5,
        max_deliveries=3,
        start_from="earliest",
        shutdown_timeout=1.0,
        ack_window=0.0,
        ack_batch_size=10,
        registry_ttl=30,
    )
    worker = Worker(name="invoicer", options=options)
    assert worker.options is options
    assert worker.group == "billing"
    assert worker.prefetch == 8  # twice max_concurrency
    assert (worker.max_concurrency, worker.visibility_timeout) == (4, 2.5)
    assert (worker.max_deliveries, worker.start_from) == (3, "earliest")
    assert (worker.shutdown_timeout, worker.ack_window, worker.ack_batch_size) == (1.0, 0.0, 10)
    definition, _ = worker.agent_definition()
    assert definition.ttl_seconds == 30
    assert definition.metadata["consumer_group"] == "billing"


def test_defaults_without_options() -> None:
    agent = Agent(name="watcher")
    assert agent.options == AgentOptions()
    assert agent.group == "watcher"
    assert agent.prefetch == 32
    assert AgentOptions(max_concurrency=800).effective_prefetch == 1000  # capped


def test_options_are_frozen_and_shared_safely() -> None:
    options = AgentOptions(max_concurrency=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.max_concurrency = 3  # type: ignore[misc]
    one, two = Agent(name="one", options=options), Agent(name="two", options=options)
    assert (one.group, two.group) == ("one", "two")


def test_options_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        AgentOptions("billing")  # type: ignore[misc]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"max_concurrency": 0}, "max_concurrency must be at least 1, got 0"),
        ({"max_concurrency": 2.5}, "max_concurrency must be an integer"),
        ({"max_concurrency": True}, "max_concurrency must be an integer"),
        ({"prefetch": 0}, "prefetch must be between 1 and 1000"),
        ({"prefetch": 1001}, "prefetch must be between 1 and 1000"),
        ({"visibility_timeout": 0.05}, "visibility_timeout must be between 0.1 and 86400"),
        ({"visibility_timeout": "10"}, "visibility_timeout must be a number of seconds"),
        ({"visibility_timeout": float("nan")}, "visibility_timeout must be a number"),
        ({"max_deliveries": 0}, "max_deliveries must be between 1 and 1000"),
        ({"start_from": "latest"}, "start_from must be 'earliest' or None"),
        ({"dedupe_capacity": 0}, "dedupe_capacity must be at least 1"),
        ({"shutdown_timeout": -1}, "shutdown_timeout must be at least 0 seconds"),
        ({"ack_window": -0.1}, "ack_window must be at least 0 seconds"),
        ({"ack_batch_size": 0}, "ack_batch_size must be between 1 and 1000"),
        ({"ack_batch_size": 1001}, "ack_batch_size must be between 1 and 1000"),
        ({"registry_ttl": 0}, "registry_ttl must be at least 1"),
        ({"group": ""}, "group must be a non-empty string"),
        ({"consumer_id": "-dash-first"}, "is not a valid consumer id"),
    ],
)
def test_invalid_options_fail_when_built_naming_the_field(
    values: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        AgentOptions(**values)  # type: ignore[arg-type]


def test_valid_bounds_are_accepted() -> None:
    AgentOptions(
        prefetch=1000,
        visibility_timeout=None,
        max_deliveries=None,
        ack_window=0,
        shutdown_timeout=0,
        ack_batch_size=1000,
        consumer_id="pod-7",
    )


def test_an_agent_refuses_options_of_another_type() -> None:
    with pytest.raises(TypeError, match=r"options must be a soorma\.AgentOptions"):
        Agent(name="a", options={"max_concurrency": 2})  # type: ignore[arg-type]


def test_a_choreography_planner_hands_its_options_to_the_agent() -> None:
    options = AgentOptions(max_concurrency=3)
    planner = ChoreographyPlanner(name="chooser", options=options, mock_response="{}")
    assert planner.options is options
    assert "options" not in planner.llm_kwargs


def test_an_agents_options_are_read_only_once_it_is_built() -> None:
    agent = Agent(name="a")
    with pytest.raises(AttributeError):
        agent.options = AgentOptions(max_concurrency=2)  # type: ignore[misc]
    with pytest.raises(AttributeError):
        agent.max_concurrency = 2  # type: ignore[misc]


def test_the_arguments_agent_types_pass_on_match_the_agent_constructor() -> None:
    from soorma.agents.base import AgentArguments

    assert set(AgentArguments.__annotations__) == IDENTITY
