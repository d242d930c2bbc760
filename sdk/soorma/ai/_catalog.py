"""What a choreography planner may do: the live events, their schemas and responders.

Built fresh for every decision from the registry (through ``context.registry`` and
``context.toolkit``), so an agent that registers or expires changes the planner's options
at once, and every event the model names can be checked against it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from soorma_common.registry import EventDefinition


@dataclass(slots=True)
class EventCatalog:
    """Registered events and who answers them.

    Attributes:
        actionable: Events some live agent consumes, by name (what PUBLISH may use).
        registered: Every registered event definition, by name (WAIT may expect any).
        responses: For each actionable event, the events its consumers produce.
        consumers: For each actionable event, the names of the agents consuming it
            (DELEGATE targets are checked against these).
    """

    actionable: dict[str, EventDefinition] = field(default_factory=dict)
    registered: dict[str, EventDefinition] = field(default_factory=dict)
    responses: dict[str, list[str]] = field(default_factory=dict)
    consumers: dict[str, list[str]] = field(default_factory=dict)

    def get(self, event_name: str) -> EventDefinition | None:
        """The definition of ``event_name`` (actionable first), or ``None``."""
        return self.actionable.get(event_name) or self.registered.get(event_name)

    def names(self) -> list[str]:
        """The actionable event names, sorted."""
        return sorted(self.actionable)


async def load_catalog(context: Any) -> EventCatalog:
    """Read the live agents and registered events from the registry.

    Raises:
        PlannerError: the context has no registry client.
    """
    from soorma.ai._errors import PlannerError

    registry = getattr(context, "registry", None)
    if registry is None:
        raise PlannerError(
            "ChoreographyPlanner needs context.registry to discover events: build the "
            "context with PlatformContext.from_env() and set SOORMA_REGISTRY_URL"
        )
    catalog = EventCatalog()
    for agent in await registry.discover([], include_events=True):
        for cap in agent.capabilities:
            name = cap.consumed_event.event_name
            catalog.actionable.setdefault(name, cap.consumed_event)
            consumers = catalog.consumers.setdefault(name, [])
            if agent.name not in consumers:
                consumers.append(agent.name)
            answers = catalog.responses.setdefault(name, [])
            for produced in cap.produced_events:
                if produced.event_name not in answers:
                    answers.append(produced.event_name)
                catalog.registered.setdefault(produced.event_name, produced)
    toolkit = getattr(context, "toolkit", None)
    events = (
        await toolkit.discover_events() if toolkit is not None else await registry.list_events()
    )
    for definition in events:
        catalog.registered.setdefault(definition.event_name, definition)
    return catalog


def without_consumer(catalog: EventCatalog, consumer: str, event_names: list[str]) -> EventCatalog:
    """``catalog`` with ``consumer`` removed as a consumer of ``event_names``; an event
    left with no consumer is no longer actionable."""
    for name in event_names:
        if name not in catalog.consumers:
            continue
        others = [c for c in catalog.consumers[name] if c != consumer]
        if others:
            catalog.consumers[name] = others
        else:
            catalog.consumers.pop(name, None)
            catalog.actionable.pop(name, None)
            catalog.responses.pop(name, None)
    return catalog


__all__ = ["EventCatalog", "load_catalog", "without_consumer"]
