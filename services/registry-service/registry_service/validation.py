"""Checks a definition must pass before it is stored (fail at registration, not at use)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from soorma_common.errors import InvalidTopic, SchemaInvalid, ValidationFailed
from soorma_common.events import TOPIC_PATTERN, is_valid_topic
from soorma_common.registry import AgentDefinition, EventDefinition

SCHEMA_FIELDS = ("payload_schema", "response_schema")


def check_schema(event_name: str, field: str, schema: dict[str, Any] | None) -> None:
    """Reject ``schema`` unless it is a valid JSON Schema (draft 2020-12).

    Raises:
        SchemaInvalid: naming the event, the field and the schema error.
    """
    if schema is None:
        return
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        raise SchemaInvalid(
            f"event {event_name!r}: {field} is not a valid JSON Schema (draft 2020-12) "
            f"at {where}: {exc.message}",
            details={"event_name": event_name, "field": field, "schema_path": where,
                     "error": exc.message},
        ) from None


def check_event(event: EventDefinition) -> None:
    """Validate one event definition's topic and schemas."""
    if not is_valid_topic(event.topic):
        raise InvalidTopic(
            f"event {event.event_name!r}: topic {event.topic!r} must match "
            f"{TOPIC_PATTERN.pattern}",
            details={"event_name": event.event_name, "topic": event.topic},
        )
    for field in SCHEMA_FIELDS:
        check_schema(event.event_name, field, getattr(event, field))


def declared_events(agent: AgentDefinition) -> list[EventDefinition]:
    """Every event definition the agent's capabilities declare, once each, in order.

    Raises:
        ValidationFailed: when two capabilities declare one event name differently.
    """
    seen: dict[str, EventDefinition] = {}
    for cap in agent.capabilities:
        for event in (cap.consumed_event, *cap.produced_events):
            mine = event.model_copy(update={"owner_agent_id": agent.agent_id})
            other = seen.get(event.event_name)
            if other is None:
                seen[event.event_name] = mine
            elif other != mine:
                raise ValidationFailed(
                    f"agent {agent.agent_id!r} declares event {event.event_name!r} twice "
                    "with different definitions: declare it once, or identically",
                    details={"event_name": event.event_name},
                )
    return list(seen.values())


def check_agent(agent: AgentDefinition) -> list[EventDefinition]:
    """Validate an agent registration; return the events it declares (owned by it)."""
    names = [cap.task_name for cap in agent.capabilities]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValidationFailed(
            f"agent {agent.agent_id!r} lists capability {duplicates[0]!r} more than once",
            details={"task_names": duplicates},
        )
    _check_names("events_consumed", agent.events_consumed)
    _check_names("events_produced", agent.events_produced)
    declared = declared_events(agent)
    for event in declared:
        check_event(event)
    return declared


def _check_names(field: str, names: Iterable[str]) -> None:
    for name in names:
        if not name or len(name) > 256:
            raise ValidationFailed(
                f"{field}: event names must be 1-256 characters, got {name[:64]!r}",
                details={"field": field},
            )
