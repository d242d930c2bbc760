"""EventToolkit: what an LLM (or a developer) needs to know about the events it may use.

``context.toolkit`` lists registered events and the events live agents consume, formats
them compactly for a prompt, and checks a proposed payload against the event's registered
JSON Schema before anything is published (a mismatch fails before it reaches anyone).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from soorma._payload import check_payload, payload_errors
from soorma.registry import RegistryClient
from soorma_common.errors import EventDefinitionNotFound
from soorma_common.registry import EventDefinition

# Schemas in a prompt are trimmed to this many characters each: a huge schema must not
# crowd out the rest of the context window.
DEFAULT_MAX_SCHEMA_CHARS = 2000


class EventToolkit:
    """Event discovery and payload validation on top of a :class:`RegistryClient`.

    Args:
        registry: The registry client (usually ``context.registry``).
    """

    def __init__(self, *, registry: RegistryClient) -> None:
        self.registry = registry

    async def discover_events(self, topic: str | None = None) -> list[EventDefinition]:
        """Registered event definitions, optionally only those on ``topic``."""
        return await self.registry.list_events(topic=topic)

    async def discover_actionable_events(self) -> list[EventDefinition]:
        """Events that some live agent consumes: the requests that will get an answer.

        Each event appears once (the first live agent's definition), sorted by name.
        """
        agents = await self.registry.discover([], include_events=True)
        found: dict[str, EventDefinition] = {}
        for agent in agents:
            for cap in agent.capabilities:
                found.setdefault(cap.consumed_event.event_name, cap.consumed_event)
        return [found[name] for name in sorted(found)]

    async def get_event_info(self, event_name: str) -> EventDefinition | None:
        """The definition of ``event_name``, or ``None`` when it is not registered."""
        try:
            return await self.registry.get_event(event_name)
        except EventDefinitionNotFound:
            return None

    @staticmethod
    def format_for_llm(
        events: Iterable[EventDefinition],
        *,
        max_schema_chars: int = DEFAULT_MAX_SCHEMA_CHARS,
    ) -> str:
        """A compact text listing for a prompt: one block per event.

        Each block has the name, topic, description and the payload (and response)
        schema as compact JSON.
        """
        blocks: list[str] = []
        for event in events:
            lines = [f"- {event.event_name} (topic: {event.topic})"]
            if event.description:
                lines.append(f"  description: {event.description}")
            for label, schema in (
                ("payload schema", event.payload_schema),
                ("response schema", event.response_schema),
            ):
                if schema:
                    text = json.dumps(schema, separators=(",", ":"), sort_keys=True)
                    if len(text) > max_schema_chars:
                        text = text[:max_schema_chars] + "...(truncated)"
                    lines.append(f"  {label}: {text}")
            blocks.append("\n".join(lines))
        return "\n".join(blocks) if blocks else "(no events)"

    async def validate_payload(
        self, event_name: str, data: Any, *, raise_on_error: bool = False
    ) -> list[dict[str, str]]:
        """Check ``data`` against ``event_name``'s registered payload schema.

        Args:
            event_name: A registered event. An unregistered one is an error
                (``field`` ``"event_name"``): nothing can be checked against it.
            data: The proposed payload.
            raise_on_error: Raise instead of returning the errors.

        Returns:
            ``[]`` when valid, else ``[{"field": "items.0.qty", "error": "..."}]``.

        Raises:
            PayloadInvalid: with ``raise_on_error``, naming the first failing field.
            EventDefinitionNotFound: with ``raise_on_error`` and an unknown event.
        """
        definition = await self.get_event_info(event_name)
        if definition is None:
            if raise_on_error:
                raise EventDefinitionNotFound(
                    f"event {event_name!r} is not registered; register it (or an agent "
                    "consuming it) before validating payloads",
                    details={"event_name": event_name},
                )
            return [{"field": "event_name", "error": f"event {event_name!r} is not registered"}]
        if raise_on_error:
            check_payload(event_name, definition.payload_schema, data)
            return []
        return payload_errors(definition.payload_schema, data)


__all__ = ["DEFAULT_MAX_SCHEMA_CHARS", "EventToolkit"]
