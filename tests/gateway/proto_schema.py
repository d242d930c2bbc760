"""A strict JSON Schema for an A2A 1.0 message, derived from a2a-sdk's normative proto.

The spec names ``a2a.proto`` the normative definition and its JSON Schema a generated
artifact; this derives one offline from the same descriptors: proto3 JSON field names,
``additionalProperties: false``, fields marked ``REQUIRED`` required, maps, repeated
fields, enums by name, at most one member of each ``oneof``.
"""

from __future__ import annotations

from typing import Any

from google.api import field_behavior_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor

_SCALARS = {
    FieldDescriptor.TYPE_STRING: {"type": "string"},
    FieldDescriptor.TYPE_BOOL: {"type": "boolean"},
    FieldDescriptor.TYPE_BYTES: {"type": "string", "contentEncoding": "base64"},
    FieldDescriptor.TYPE_DOUBLE: {"type": "number"},
    FieldDescriptor.TYPE_FLOAT: {"type": "number"},
    FieldDescriptor.TYPE_INT32: {"type": "integer"},
    FieldDescriptor.TYPE_UINT32: {"type": "integer", "minimum": 0},
    FieldDescriptor.TYPE_SINT32: {"type": "integer"},
    FieldDescriptor.TYPE_INT64: {"type": ["integer", "string"]},
    FieldDescriptor.TYPE_UINT64: {"type": ["integer", "string"]},
}
_WELL_KNOWN = {
    "google.protobuf.Struct": {"type": "object"},
    "google.protobuf.Value": {},
    "google.protobuf.ListValue": {"type": "array"},
    "google.protobuf.Timestamp": {"type": "string", "format": "date-time"},
}


def _required(field: FieldDescriptor) -> bool:
    behaviors = field.GetOptions().Extensions[field_behavior_pb2.field_behavior]
    return field_behavior_pb2.REQUIRED in behaviors


def _field(field: FieldDescriptor, defs: dict[str, Any]) -> dict[str, Any]:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        value = field.message_type.fields_by_name["value"]
        return {"type": "object", "additionalProperties": _single(value, defs)}
    single = _single(field, defs)
    if field.is_repeated:
        return {"type": "array", "items": single}
    return single


def _single(field: FieldDescriptor, defs: dict[str, Any]) -> dict[str, Any]:
    if field.type == FieldDescriptor.TYPE_ENUM:
        return {"enum": [v.name for v in field.enum_type.values]}
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return message_schema(field.message_type, defs)
    return dict(_SCALARS[field.type])


def message_schema(descriptor: Descriptor, defs: dict[str, Any]) -> dict[str, Any]:
    """A ``$ref`` to ``descriptor``'s schema in ``defs`` (added on first use)."""
    if descriptor.full_name in _WELL_KNOWN:
        return dict(_WELL_KNOWN[descriptor.full_name])
    ref = {"$ref": f"#/$defs/{descriptor.full_name}"}
    if descriptor.full_name in defs:
        return ref
    defs[descriptor.full_name] = {}
    schema: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {f.json_name: _field(f, defs) for f in descriptor.fields},
    }
    required = [f.json_name for f in descriptor.fields if _required(f)]
    if required:
        schema["required"] = required
    pairs = [
        {"required": [a.json_name, b.json_name]}
        for oneof in descriptor.oneofs
        if not oneof.name.startswith("_")  # proto3 ``optional`` (a one-field oneof)
        for i, a in enumerate(oneof.fields)
        for b in oneof.fields[i + 1 :]
    ]
    if pairs:
        schema["not"] = {"anyOf": pairs}
    defs[descriptor.full_name] = schema
    return ref


def strict_schema(descriptor: Descriptor) -> dict[str, Any]:
    """The standalone JSON Schema (2020-12) of ``descriptor``."""
    defs: dict[str, Any] = {}
    root = message_schema(descriptor, defs)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **root, "$defs": defs}
