"""Translation between A2A messages/parts and event payloads (ARCHITECTURE §4).

Request side: a message becomes the skill's request payload (its data parts, or its text
for a skill whose schema takes text), validated against the skill's schema, plus the
whole A2A message under :data:`MESSAGE_KEY`. Result side: an agent's answer becomes the
task's final state and artifacts (text, data and file parts), or a direct message.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import Any

from a2a.helpers.proto_helpers import new_data_part, new_raw_part, new_text_part, new_url_part
from a2a.types.a2a_pb2 import Artifact, Message, Part, Role, TaskState
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict
from jsonschema import Draft202012Validator

# The key of a request payload holding the A2A message the request came from.
MESSAGE_KEY = "a2a_message"
_REQUIRED = re.compile(r"^'(?P<name>.+)' is a required property$")


def narrow(value: Any) -> Any:
    """JSON from a protobuf ``Value``: whole-number floats back to ints."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: narrow(v) for k, v in value.items()}
    if isinstance(value, list):
        return [narrow(v) for v in value]
    return value


def _file(part: Part) -> dict[str, Any]:
    out: dict[str, Any] = {"name": part.filename or None, "media_type": part.media_type or None}
    if part.HasField("url"):
        out["url"] = part.url
    else:
        out["bytes"] = base64.b64encode(part.raw).decode("ascii")
    return out


def message_record(message: Message) -> dict[str, Any]:
    """The A2A message as published under :data:`MESSAGE_KEY`."""
    texts = [p.text for p in message.parts if p.HasField("text")]
    return {
        "message_id": message.message_id,
        "context_id": message.context_id,
        "task_id": message.task_id,
        "text": "\n".join(texts) if texts else None,
        "data": [narrow(MessageToDict(p.data)) for p in message.parts if p.HasField("data")],
        "files": [_file(p) for p in message.parts if p.HasField("url") or p.HasField("raw")],
        "metadata": narrow(MessageToDict(message.metadata)) if message.metadata else {},
    }


def _text_field(schema: Mapping[str, Any] | None) -> str | None:
    """The property a plain-text message fills, if the schema takes text."""
    if not schema:
        return "text"
    props = schema.get("properties") or {}
    required = schema.get("required") or []
    if not props and not required and schema.get("additionalProperties") is not False:
        return "text"  # an open object takes {"text": ...}
    if isinstance(props.get("text"), Mapping) and props["text"].get("type") in (None, "string"):
        return "text"
    strings = [
        n
        for n in required
        if isinstance(props.get(n), Mapping) and props[n].get("type") == "string"
    ]
    if len(required) == 1 and strings:
        return str(strings[0])
    return None


def request_payload(
    message: Message, skill: str, schema: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The skill's request payload for ``message``, validated against ``schema``.

    Raises:
        InvalidParamsError: the message does not fit the schema (names the field).
    """
    record = message_record(message)
    objects = [d for d in record["data"] if isinstance(d, dict)]
    payload: dict[str, Any] = {}
    for item in objects:
        payload.update(item)
    if not objects and record["text"] is not None:
        field = _text_field(schema)
        if field is None:
            required = list((schema or {}).get("required") or [])
            raise InvalidParamsError(
                message=(
                    f"skill {skill!r} takes structured input: send a data part with "
                    f"the fields of its inputSchema (required: {required})"
                ),
                data={"field": "message.parts", "skill": skill},
            )
        payload[field] = record["text"]
    if schema:
        validate(payload, schema, skill)
    payload[MESSAGE_KEY] = record
    return payload


def validate(payload: Mapping[str, Any], schema: Mapping[str, Any], skill: str) -> None:
    """Validate against the skill's schema; the first error names its field."""
    errors = sorted(
        Draft202012Validator(schema).iter_errors(dict(payload)),
        key=lambda e: (len(e.absolute_path), str(e.absolute_path)),
    )
    if not errors:
        return
    error = errors[0]
    path = ".".join(str(p) for p in error.absolute_path)
    missing = _REQUIRED.match(error.message) if error.validator == "required" else None
    if missing:
        path = f"{path}.{missing['name']}" if path else missing["name"]
    raise InvalidParamsError(
        message=f"invalid input for skill {skill!r}: field {path or '(root)'!r}: {error.message}",
        data={"field": path, "skill": skill},
    )


# -- results ------------------------------------------------------------------------------


def result_state(data: Mapping[str, Any]) -> TaskState:
    """The task state an answer payload ends the task in."""
    status = str(data.get("status") or "").lower()
    if status == "rejected":
        return TaskState.TASK_STATE_REJECTED
    if data.get("success") is False or status == "failed":
        return TaskState.TASK_STATE_FAILED
    return TaskState.TASK_STATE_COMPLETED


def error_text(data: Mapping[str, Any]) -> str:
    """The human-readable reason of a failed or rejected answer."""
    for key in ("error", "reason", "message"):
        if data.get(key):
            return str(data[key])
    return str(data.get("status") or "failed")


def to_part(spec: Any) -> Part:
    """One part from its JSON form: ``{"text"}``, ``{"data"}``, ``{"url"}`` or ``{"bytes"}``.

    Files carry ``media_type`` (or ``mimeType``) and ``filename`` (or ``name``); ``bytes``
    is base64. Anything else is a data part.
    """
    if isinstance(spec, str):
        return new_text_part(spec)
    if not isinstance(spec, Mapping):
        return new_data_part(spec)
    media = spec.get("media_type") or spec.get("mimeType")
    name = spec.get("filename") or spec.get("name")
    if isinstance(spec.get("text"), str):
        return new_text_part(spec["text"], media)
    if "data" in spec:
        return new_data_part(spec["data"], media)
    url = spec.get("url") or spec.get("uri")
    if isinstance(url, str):
        return new_url_part(url, media, name)
    raw = spec.get("bytes") or spec.get("raw")
    if isinstance(raw, str):
        try:
            return new_raw_part(base64.b64decode(raw, validate=True), media, name)
        except binascii.Error:
            return new_text_part(raw, media)
    return new_data_part(dict(spec))


def result_artifacts(result: Any) -> list[Artifact]:
    """Artifacts from an answer's ``result``.

    ``{"artifacts": [{"name", "description", "parts": [...]}, ...]}`` gives several
    artifacts of any part type; a string gives one text artifact; ``None`` none; any other
    value one data artifact.
    """
    if result is None:
        return []
    if isinstance(result, Mapping) and isinstance(result.get("artifacts"), list):
        out = []
        for index, spec in enumerate(result["artifacts"]):
            spec = spec if isinstance(spec, Mapping) else {"parts": [spec]}
            parts = spec.get("parts")
            out.append(
                Artifact(
                    artifact_id=str(spec.get("id") or f"artifact-{index}"),
                    name=str(spec.get("name") or f"result-{index}"),
                    description=str(spec.get("description") or ""),
                    parts=[to_part(p) for p in (parts if isinstance(parts, list) else [parts])],
                )
            )
        return out
    part = new_text_part(result) if isinstance(result, str) else new_data_part(result)
    return [Artifact(artifact_id="result", name="result", parts=[part])]


def agent_message(text: str, task_id: str, context_id: str, message_id: str) -> Message:
    """An agent message (status messages: progress, questions, errors)."""
    return Message(
        message_id=message_id,
        task_id=task_id,
        context_id=context_id,
        role=Role.ROLE_AGENT,
        parts=[new_text_part(text)],
    )
