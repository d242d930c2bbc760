"""Pure-ASGI fast path for the two publish routes.

Publishing is the bus's hot path. FastAPI's routing, request object and dependency
solving cost more CPU per request than validating and appending the event, so
``POST /v1/events/publish`` and ``/publish-batch`` are answered here, in front of the
router, by the same functions the FastAPI routes call (``publishing.publish_one`` and
``publish_many``). It is the innermost layer of servicekit's middleware stack
(``create_service_app(fast_path=...)``), so request ids, body-size limits, metrics and
anything else in that stack wrap it as they wrap FastAPI; errors are rendered exactly as
the app's exception handlers would (``tests/event_service/test_event_fast_path.py``
sends every request both ways). Anything else (other paths, other methods) goes to
FastAPI unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from starlette.types import ASGIApp, Receive, Scope, Send

from event_service.publishing import publish_many, publish_one
from event_service.state import EventState
from servicekit.app import BodyTooLarge
from servicekit.asgi import RawHeaders, read_body
from servicekit.auth import Identity, resolve_identity
from servicekit.errors import error_response, response_for
from servicekit.metrics import ROUTE_TEMPLATE
from servicekit.settings import ServiceSettings

log = logging.getLogger("event_service.fastpath")

Handler = Callable[[EventState, Identity, bytes], Awaitable[bytes]]

PUBLISH_PATHS: dict[str, Handler] = {
    "/v1/events/publish": publish_one,
    "/v1/events/publish-batch": publish_many,
}
_JSON_HEADERS = [(b"content-type", b"application/json")]


class PublishFastPath:
    """Answers the publish routes inside servicekit's middleware stack but without any of
    FastAPI's layers (a :class:`servicekit.app.FastPath`)."""

    def __init__(self, *, settings: ServiceSettings) -> None:
        self.settings = settings

    @staticmethod
    def handles(scope: Scope) -> bool:
        return (
            scope["type"] == "http" and scope["path"] in PUBLISH_PATHS and scope["method"] == "POST"
        )

    async def __call__(
        self, scope: Scope, receive: Receive, send: Send, *, fallback: ASGIApp
    ) -> None:
        handler = PUBLISH_PATHS[scope["path"]]
        scope[ROUTE_TEMPLATE] = scope["path"]  # the routes' templates are these paths
        state: EventState = scope["state"]["events"]
        try:
            identity = resolve_identity(RawHeaders(scope["headers"]), self.settings)
            answer = await handler(state, identity, await read_body(receive))
        except (RedisConnectionError, RedisTimeoutError) as exc:
            # As the app's handler: Redis unreachable is the caller's cue to retry.
            response = error_response(503, "service_unavailable", f"event log unavailable: {exc}")
        except BodyTooLarge:
            raise  # the body-size middleware answers 413
        except Exception as exc:
            response = response_for(exc)
            if response is None:
                log.exception("unhandled error on POST %s", scope["path"])
                response = error_response(500, "internal_error", "internal server error")
        else:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [*_JSON_HEADERS, (b"content-length", str(len(answer)).encode())],
                }
            )
            await send({"type": "http.response.body", "body": answer})
            return
        await response(scope, receive, send)
