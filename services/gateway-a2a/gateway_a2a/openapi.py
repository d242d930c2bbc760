"""``/openapi.json`` that describes the routes the gateway serves, as they answer.

FastAPI documents a2a-sdk's routes with a bare ``200 application/json`` and without their
path parameters, and leaves out plain Starlette routes (the legacy card and task, the
per-agent card, a2a-sdk's tenant-prefixed ``/{tenant}/...`` routes). :func:`install`
completes the generated document once: every served route and method, each path
parameter, the error statuses each route answers (from a2a-sdk's error table, with the
gateway's own statuses), and the media types of answers, errors and streams.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from a2a.utils.constants import A2A_JSON_MEDIA_TYPE
from fastapi import FastAPI
from starlette.routing import BaseRoute, Mount, Route

JSON = "application/json"
SSE = "text/event-stream"
# Media type of the error bodies of the 1.0 HTTP+JSON routes (the 0.3 ones answer JSON).
REST_ERROR_MEDIA_TYPE = A2A_JSON_MEDIA_TYPE
_PARAM = re.compile(r"{([^}:]+)(?::[^}]+)?}")
_PLATFORM = frozenset({"/health", "/ready"})
_JSONRPC = re.compile(r"^/(agents/{agent}/?)?$")
_STREAM = (":stream", ":subscribe")
_ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "status", "message"],
            "properties": {
                "code": {"type": "integer", "description": "the HTTP status"},
                "status": {"type": "string", "description": "google.rpc.Code name"},
                "message": {"type": "string"},
                "details": {"type": "array", "items": {"type": "object"}},
            },
        }
    },
}
_PLATFORM_ERRORS = frozenset({"401", "413"})
_PLATFORM_ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "details": {"type": "object"},
            },
        }
    },
}
_DESCRIPTIONS = {
    "200": "OK",
    "304": "Not modified (the card's ETag matches If-None-Match)",
    "400": "Invalid request: bad body, parameters or state",
    "401": "Missing or invalid credentials",
    "404": "Task, push config or agent not found (or another tenant's)",
    "409": "Task not cancelable (already finished)",
    "413": "Body too large",
    "415": "Unsupported media type (body or message part)",
    "503": "A platform service the gateway needs is unavailable",
}


def served(routes: Iterable[BaseRoute], prefix: str = "") -> Iterator[tuple[str, str]]:
    """``(path, method)`` of every documented route, mounts included (no HEAD)."""
    for route in routes:
        if isinstance(route, Mount):
            yield from served(route.routes, prefix + route.path)
        elif isinstance(route, Route) and route.include_in_schema and route.methods:
            for method in sorted(route.methods - {"HEAD"}):
                yield prefix + route.path, method


def _kind(path: str) -> str:
    if path in _PLATFORM:
        return "platform"
    if _JSONRPC.match(path):
        return "jsonrpc"
    if path == "/tasks/send":
        return "legacy"
    if "/.well-known/" in path or path == "/v1/card":
        return "card"
    if path.endswith(_STREAM):
        return "stream"
    return "rest"


def _responses(path: str, method: str) -> dict[str, Any]:
    kind = _kind(path)
    v03 = path.startswith("/v1/")
    http_json_1_0 = not v03 and kind in ("rest", "stream")
    answer = A2A_JSON_MEDIA_TYPE if http_json_1_0 else JSON
    error_type = REST_ERROR_MEDIA_TYPE if http_json_1_0 else JSON
    codes: list[str] = []
    if kind == "platform":
        return {}
    if kind == "card":
        codes = ["304"] if path.endswith("agent-card.json") else []
        if "{agent}" in path:
            codes.append("404")
    elif kind == "jsonrpc":
        codes = ["401", "413"]
    elif kind == "legacy":
        codes = ["400", "401", "404", "413"]
    else:
        codes = ["400", "401", "404", "503"]
        if method in ("POST",) and not path.endswith((":cancel", ":subscribe")):
            codes += ["413", "415"]
        if path.endswith(":cancel"):
            codes.append("409")
    ok: dict[str, Any] = {"description": _DESCRIPTIONS["200"]}
    ok["content"] = (
        {SSE: {"schema": {"type": "string", "description": "Server-sent events, one JSON each"}}}
        if kind == "stream"
        else {answer: {"schema": {"type": "object"}}}
    )
    out: dict[str, Any] = {"200": ok}
    for code in codes:
        entry: dict[str, Any] = {"description": _DESCRIPTIONS[code]}
        if code in _PLATFORM_ERRORS:
            # Answered by the platform's middleware, in its own error format.
            entry["content"] = {JSON: {"schema": _PLATFORM_ERROR_SCHEMA}}
        elif code != "304":
            entry["content"] = {error_type: {"schema": _ERROR_SCHEMA}}
        out[code] = entry
    return out


def complete(spec: dict[str, Any], routes: Iterable[BaseRoute]) -> dict[str, Any]:
    """Add what FastAPI leaves out of ``spec`` for ``routes`` (see the module docstring)."""
    paths: dict[str, Any] = spec.setdefault("paths", {})
    for path, method in served(routes):
        doc_path = _PARAM.sub(lambda m: "{" + m.group(1) + "}", path)
        operation = paths.setdefault(doc_path, {}).setdefault(
            method.lower(), {"summary": f"{method} {doc_path}", "responses": {}}
        )
        names = _PARAM.findall(path)
        parameters = [
            p
            for p in operation.get("parameters", [])
            if p.get("in") != "path" or p.get("name") in names
        ]
        declared = {p["name"] for p in parameters if p.get("in") == "path"}
        parameters += [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
            for name in names
            if name not in declared
        ]
        if parameters:
            operation["parameters"] = parameters
        responses = _responses(path, method)
        if responses:
            operation["responses"] = responses
    return spec


def install(app: FastAPI) -> None:
    """Serve the completed document from ``app.openapi()`` (built once, on first use)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = complete(generate(), app.routes)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
