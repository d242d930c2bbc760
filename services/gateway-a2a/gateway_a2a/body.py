"""Bodies that are not UTF-8 answer a2a-sdk's parse error, not its ``500 unknown exception``.

a2a-sdk's HTTP+JSON routes hand the raw body to protobuf's JSON parser, which raises a
``UnicodeDecodeError`` (not its ``ParseError``) on bytes that are not UTF-8; a2a-sdk
answers that with a bare 500. This innermost middleware reads an HTTP+JSON POST body
(already capped by servicekit's size limit) and, when it is not UTF-8, answers as a2a-sdk
answers any other unparsable body: ``400 INVALID_ARGUMENT`` (``build_rest_error_payload``).
Other bodies are replayed unchanged.

On the JSON-RPC endpoints a2a-sdk reads the body with ``json.loads``, which picks the
encoding from the first bytes (UTF-8, or UTF-16/32 when they hold zero bytes) and answers
a body it cannot decode with ``-32603`` (internal error). The guard answers those with
JSON-RPC's parse error, ``-32700``, as a2a-sdk answers any other unparsable body.
"""

from __future__ import annotations

import json

from a2a.utils.error_handlers import build_rest_error_payload
from google.protobuf.json_format import ParseError
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# JSON-RPC endpoints (not guarded): the root and the per-agent ones (``/agents/{agent}``
# with or without the trailing slash); everything else with a body is HTTP+JSON.
AGENTS = "/agents/"
# The seed's legacy endpoint answers in the platform's own error format.
UNGUARDED = frozenset({"/tasks/send"})


def is_jsonrpc(path: str) -> bool:
    if path == "/":
        return True
    if not path.startswith(AGENTS):
        return False
    rest = path[len(AGENTS) :].rstrip("/")
    return bool(rest) and "/" not in rest


class Utf8BodyGuard:
    """See the module docstring."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope.get("method") != "POST"
            or scope.get("path") in UNGUARDED
        ):
            await self.app(scope, receive, send)
            return
        jsonrpc = is_jsonrpc(str(scope.get("path", "")))
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay([message], receive), send)
                return
            chunks.append(message.get("body", b""))
            more = bool(message.get("more_body", False))
        body = b"".join(chunks)
        try:
            body.decode(json.detect_encoding(body) if jsonrpc else "utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            response = (
                JSONResponse(
                    {
                        "jsonrpc": "2.0",
                        "id": None,
                        "error": {"code": -32700, "message": f"the body is not JSON text: {exc}"},
                    }
                )
                if jsonrpc
                else JSONResponse(
                    build_rest_error_payload(ParseError(f"the body is not UTF-8 JSON: {exc}")),
                    status_code=400,
                )
            )
            await response(scope, receive, send)
            return
        await self.app(
            scope,
            _replay([{"type": "http.request", "body": body, "more_body": False}], receive),
            send,
        )


def _replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
