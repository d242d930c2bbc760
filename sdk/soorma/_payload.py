"""Checking payloads against an event's registered JSON Schema (draft 2020-12).

Shared by :class:`~soorma.ai.toolkit.EventToolkit` and the bus's validation on publish
(``action-requests`` events only). ``jsonschema`` is imported on first use: agents that never
validate do not pay for it.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from soorma_common.errors import PayloadInvalid

MAX_REPORTED_ERRORS = 10


def _field_path(error: Any) -> str:
    parts = [str(p) for p in error.absolute_path]
    if error.validator == "required" and isinstance(error.instance, dict):
        # "'query' is a required property": name the missing field itself.
        missing = [f for f in error.validator_value if f not in error.instance]
        if missing:
            parts.append(str(missing[0]))
    return ".".join(parts) or "$"


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(json.loads(schema_json))


def payload_errors(schema: dict[str, Any] | None, data: Any) -> list[dict[str, str]]:
    """Every way ``data`` breaks ``schema``, as ``{"field", "error"}`` dicts (field first).

    A missing schema accepts anything.
    """
    if not schema:
        return []
    validator = _validator(json.dumps(schema, sort_keys=True))
    errors = sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
    return [
        {"field": _field_path(error), "error": error.message}
        for error in errors[:MAX_REPORTED_ERRORS]
    ]


def check_payload(event_name: str, schema: dict[str, Any] | None, data: Any) -> None:
    """Raise :class:`PayloadInvalid` naming the first failing field.

    Raises:
        PayloadInvalid: ``details`` = ``{"event_name", "field", "errors": [...]}``.
    """
    errors = payload_errors(schema, data)
    if errors:
        first = errors[0]
        raise PayloadInvalid(
            f"payload of {event_name!r} does not match its registered schema: "
            f"field {first['field']!r}: {first['error']}",
            details={"event_name": event_name, "field": first["field"], "errors": errors},
        )


__all__ = ["check_payload", "payload_errors"]
