"""a2a-sdk's 0.3 HTTP+JSON routes (``/v1/...``), with streams that start only when valid.

a2a-sdk's 0.3 adapter opens the SSE response before the request handler has run, so an
error raised before the first event (a bad body, a skill mismatch, an unknown task)
surfaces inside the response body after the ``200`` and its headers: the server drops
the connection mid-chunk. Its 1.0 dispatcher avoids this by pulling the first event
before answering; :class:`Rest03Adapter` does the same for the 0.3 routes, so a refused
stream is a plain JSON error with its status code, and an error after the first event is
one SSE ``error`` event carrying the same error body, and the stream then ends cleanly.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, AsyncIterator, Callable
from typing import Any

from a2a.compat.v0_3.rest_adapter import REST03Adapter
from a2a.server.context import ServerCallContext
from a2a.server.routes.common import ServerCallContextBuilder, create_event_source_response
from a2a.utils import json_utils
from a2a.utils.error_handlers import build_rest_error_payload, rest_stream_error_handler
from a2a.utils.errors import A2AError, InvalidRequestError
from sse_starlette.sse import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.routing import Route

from gateway_a2a.handler import GatewayRequestHandler

logger = logging.getLogger(__name__)


class Rest03Adapter(REST03Adapter):
    """See the module docstring."""

    @rest_stream_error_handler
    async def _handle_streaming_request(
        self,
        method: Callable[[Request, ServerCallContext], AsyncIterable[Any]],
        request: Request,
    ) -> EventSourceResponse:
        try:
            await request.body()
        except (ValueError, RuntimeError, OSError) as exc:
            raise InvalidRequestError(message=f"the request body could not be read: {exc}") from exc
        call_context = self._context_builder.build(request)
        stream = aiter(method(request, call_context))
        try:
            first = await anext(stream)
        except StopAsyncIteration:
            return create_event_source_response(iter([]))

        async def events() -> AsyncIterator[ServerSentEvent]:
            yield ServerSentEvent(data=json_utils.dumps(first))
            try:
                async for item in stream:
                    yield ServerSentEvent(data=json_utils.dumps(item))
            except Exception as exc:
                if isinstance(exc, A2AError):
                    logger.warning("0.3 stream ended by an error: %s", exc.message)
                else:
                    logger.exception("0.3 stream failed")
                error = json_utils.dumps(build_rest_error_payload(exc))
                yield ServerSentEvent(data=error, event="error")

        return create_event_source_response(
            events(), shutdown_grace_period=self._shutdown_grace_period
        )


def rest03_routes(
    handler: GatewayRequestHandler, context_builder: ServerCallContextBuilder
) -> list[Route]:
    """The 0.3 HTTP+JSON routes under ``/v1``."""
    adapter = Rest03Adapter(http_handler=handler, context_builder=context_builder)
    return [
        Route(path, endpoint=endpoint, methods=[method])
        for (path, method), endpoint in adapter.routes().items()
    ]
