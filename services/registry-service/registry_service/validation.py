"""Checks a definition must pass before it is stored (fail at registration, not at use)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NoReturn

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from servicekit.jsoncheck import check_json
from soorma_common.errors import InvalidTopic, SchemaInvalid, ValidationFailed
from soorma_common.events import TOPIC_PATTERN, is_valid_topic
from soorma_common.jsonvalue import json_problem
from soorma_common.registry import AgentDefinition, EventDefinition

SCHEMA_FIELDS = ("payload_schema", "response_schema")
# jsonschema checks a schema recursively (several Python frames per level): bound the
# nesting well below the recursion limit. Real payload schemas are a few levels deep.
MAX_SCHEMA_DEPTH = 64
# ``ttl_seconds`` is a 32-bit column on Postgres (and 68 years is long enough).
MAX_TTL_SECONDS = 2**31 - 1


def check_schema(event_name: str, field: str, schema: dict[str, Any] | None) -> None:
    """Reject ``schema`` unless it is a valid JSON Schema (draft 2020-12).

    Raises:
        SchemaInvalid: naming the event, the field and the schema error.
    """
    if schema is None:
        return
    # Schemas are JSON columns: NUL inside them is storable, unlike in text columns.
    problem = json_problem(schema, max_depth=MAX_SCHEMA_DEPTH)
    if problem is not None:
        where, what = problem
        _schema_invalid(event_name, field, where.replace(".", "/") or "(root)", what)
    try:
        Draft202012Validator.check_schema(schema)
    except RecursionError:
        _schema_invalid(event_name, field, "(root)", "nests too deeply to check")
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        raise SchemaInvalid(
            f"event {event_name!r}: {field} is not a valid JSON Schema (draft 2020-12) "
            f"at {where}: {exc.message}",
            details={
                "event_name": event_name,
                "field": field,
                "schema_path": where,
                "error": exc.message,
            },
        ) from None


def _schema_invalid(event_name: str, field: str, where: str, error: str) -> NoReturn:
    raise SchemaInvalid(
        f"event {event_name!r}: {field} is not a valid JSON Schema (draft 2020-12) "
        f"at {where}: {error}",
        details={"event_name": event_name, "field": field, "schema_path": where, "error": error},
    )


def check_event(event: EventDefinition) -> None:
    """Validate one event definition's topic, schemas and strings."""
    if not is_valid_topic(event.topic):
        raise InvalidTopic(
            f"event {event.event_name!r}: topic {event.topic!r} must match {TOPIC_PATTERN.pattern}",
            details={"event_name": event.event_name, "topic": event.topic},
        )
    for field in SCHEMA_FIELDS:
        check_schema(event.event_name, field, getattr(event, field))
    # NUL cannot be stored in Postgres text columns: refused in every other string too.
    check_json(event.model_dump(exclude=set(SCHEMA_FIELDS)), field="", allow_nul=False)


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
    if agent.ttl_seconds > MAX_TTL_SECONDS:
        raise ValidationFailed(
            f"ttl_seconds must be 1-{MAX_TTL_SECONDS}, got {str(agent.ttl_seconds)[:24]}",
            details=[{"field": "ttl_seconds", "message": "out of range"}],
        )
    # Schemas are checked per event below (schema_invalid); the rest of the definition
    # (names, metadata) must be storable: no NUL, 64-bit integers, finite numbers.
    # Nesting counts from each field's value: the platform's one limit (MAX_JSON_DEPTH).
    for name, value in agent.model_dump(
        exclude={"capabilities", "tenant_id", "last_heartbeat"}
    ).items():
        check_json(value, field=name, allow_nul=False)
    for i, cap in enumerate(agent.capabilities):
        check_json(
            cap.model_dump(include={"task_name", "description"}),
            field=f"capabilities.{i}",
            allow_nul=False,
        )
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
