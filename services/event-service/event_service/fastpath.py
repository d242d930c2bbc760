"""Pure-ASGI fast path for the two publish routes.

Publishing is the bus's hot path. FastAPI's routing, request object and dependency
solving cost more CPU per request than validating and appending the event, so
``POST /v1/events/publish`` and ``/publish-batch`` are answered here, ahead of the
router, by the same functions the FastAPI routes call (``publishing.publish_one`` and
``publish_many``). It runs inside the request-id and body-size middleware, so both
still apply; errors are rendered exactly as the app's exception handlers would.
Anything else (other paths, other methods) goes to FastAPI unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.types import ASGIApp, Receive, Scope, Send

from event_service.publishing import publish_many, publish_one
from event_service.state import EventState
from servicekit.auth import Identity, resolve_identity
from servicekit.errors import error_response, response_for
from servicekit.settings import ServiceSettings

log = logging.getLogger("event_service.fastpath")

Handler = Callable[[EventState, Identity, bytes], Awaitable[bytes]]

PUBLISH_PATHS: dict[str, Handler] = {
    "/v1/events/publish": publish_one,
    "/v1/events/publish-batch": publish_many,
}
_JSON_HEADERS = [(b"content-type", b"application/json")]


class _Headers:
    """Just enough of a header mapping for ``resolve_identity``: ``get`` by lowercase name."""

    __slots__ = ("_raw",)

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self._raw = raw

    def get(self, name: str, default: Any = None) -> Any:
        wanted = name.encode("latin-1")
        for key, value in self._raw:
            if key == wanted:  # ASGI servers lowercase header names
                return value.decode("latin-1")
        return default


async def _read_body(receive: Receive) -> bytes:
    message = await receive()
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        return body
    chunks = [body]
    while message.get("more_body", False):
        message = await receive()
        chunks.append(message.get("body", b""))
    return b"".join(chunks)


class PublishFastPath:
    """ASGI middleware answering the publish routes without FastAPI's router."""

    def __init__(self, app: ASGIApp, *, settings: ServiceSettings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        handler = PUBLISH_PATHS.get(scope["path"]) if scope["type"] == "http" else None
        if handler is None or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        state: EventState = scope["state"]["events"]
        try:
            identity = resolve_identity(_Headers(scope["headers"]), self.settings)
            answer = await handler(state, identity, await _read_body(receive))
        except (RedisConnectionError, RedisTimeoutError) as exc:
            # As the app's handler: Redis unreachable is the caller's cue to retry.
            response = error_response(503, "service_unavailable",
                                      f"event log unavailable: {exc}")
        except Exception as exc:
            response = response_for(exc)
            if response is None:
                raise  # unexpected: the app's outermost handler logs it and answers 500
        else:
            await send({"type": "http.response.start", "status": 200, "headers": [
                *_JSON_HEADERS, (b"content-length", str(len(answer)).encode())]})
            await send({"type": "http.response.body", "body": answer})
            return
        await response(scope, receive, send)
