"""The A2A 1.0 HTTP+JSON binding's media types, where a2a-sdk 1.3 differs.

- A request body must be JSON: a ``POST`` whose ``Content-Type`` names another media type
  (``text/plain``, a form) is ``415`` with an A2A error body
  (``CONTENT_TYPE_NOT_SUPPORTED``), before a2a-sdk parses it. Without a ``Content-Type``
  the body is read as JSON.
- Error bodies carry the binding's media type, ``application/a2a+json``, as its answers do
  (a2a-sdk labels its errors ``application/json``).

Only the 1.0 HTTP+JSON routes: JSON-RPC, the 0.3 ``/v1`` routes, the legacy task and the
cards keep their own media types.
"""

from __future__ import annotations

from a2a.utils.constants import A2A_JSON_MEDIA_TYPE
from a2a.utils.error_handlers import build_rest_error_payload
from a2a.utils.errors import ContentTypeNotSupportedError
from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway_a2a.body import UNGUARDED, is_jsonrpc

JSON_TYPES = frozenset({"application/json", A2A_JSON_MEDIA_TYPE})
_NOT_REST_PREFIXES = ("/v1/", "/health", "/ready", "/metrics", "/openapi.json", "/docs", "/redoc")


def is_rest_v1_0(path: str) -> bool:
    """Whether ``path`` is one of the 1.0 HTTP+JSON routes."""
    return not (
        is_jsonrpc(path)
        or path in UNGUARDED
        or path.startswith(_NOT_REST_PREFIXES)
        or "/.well-known/" in path
    )


class RestMediaTypes:
    """See the module docstring."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_rest_v1_0(str(scope.get("path", ""))):
            await self.app(scope, receive, send)
            return
        if scope.get("method") == "POST":
            content_type = Headers(scope=scope).get("content-type")
            media_type = (content_type or "").split(";", 1)[0].strip().lower()
            if content_type is not None and media_type not in JSON_TYPES:
                error = ContentTypeNotSupportedError(
                    message=f"request body of type {media_type or '(empty)'!r} is not "
                    f"supported: send application/json or {A2A_JSON_MEDIA_TYPE}",
                    data={"content_type": media_type},
                )
                payload = build_rest_error_payload(error)
                response = JSONResponse(
                    payload, status_code=payload["error"]["code"], media_type=A2A_JSON_MEDIA_TYPE
                )
                await response(scope, receive, send)
                return

        async def relabel(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] >= 400:
                headers = MutableHeaders(scope=message)
                if headers.get("content-type", "").startswith("application/json"):
                    headers["content-type"] = A2A_JSON_MEDIA_TYPE
            await send(message)

        await self.app(scope, receive, relabel)
