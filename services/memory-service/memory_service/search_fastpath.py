"""Pure-ASGI fast path for ``POST /v1/memory/semantic/search``.

A search's database work is one round trip on PostgreSQL (the generated search
function), so FastAPI's layers around it — routing, dependency solving, the body's
``Request`` object, re-validating the ten hits of the response model and walking them
with ``jsonable_encoder`` — cost more CPU than the query itself (benchmark B8). A
well-formed search is answered here instead, through
``LongTermMemory.search_semantic_json``: the route's ``search_semantic`` result as the
bytes its model's serializer writes (same identity resolution, scoping, RLS and
embedding; a pure vector search on PostgreSQL written straight from the search
function's rows, the rest through the model).

Like the plan-context fast path (``memory_service.fastpath``) it runs innermost in
servicekit's middleware stack. Anything it does not accept as well-formed (identity
problems, other content types, bodies without a length or over the body limit,
unparsable JSON, a body the ``SemanticSearch`` model refuses) goes to the FastAPI route
unchanged, the body replayed, so those answers (401/403/413/422) come from the route
itself. Errors of the search (422 for a vector of the wrong size, 503 without pgvector
or without the embedding provider) are rendered as the app's exception handlers would.
"""

from __future__ import annotations

import logging

from starlette.types import ASGIApp, Receive, Scope, Send

from memory_service import jsonbody
from memory_service.fastpath import is_json, replay, respond_error
from memory_service.longterm.service import LongTermMemory
from servicekit.asgi import RawHeaders, read_body
from servicekit.auth import resolve_identity
from servicekit.metrics import ROUTE_TEMPLATE
from servicekit.settings import ServiceSettings
from soorma_common.errors import SoormaError
from soorma_common.knowledge import SemanticSearch

log = logging.getLogger("memory_service.search_fastpath")

PATH = "/v1/memory/semantic/search"
_HEADERS = [(b"content-type", b"application/json")]


def _parse(body: bytes) -> SemanticSearch | None:
    """The search as the route would validate it (its body read as the route reads it);
    None hands it to FastAPI."""
    try:
        return SemanticSearch.model_validate(jsonbody.loads(body))
    except (ValueError, RecursionError):  # ValidationError and JSONDecodeError included
        return None


class SemanticSearchFastPath:
    """Answers well-formed semantic searches without FastAPI's layers; hands the rest to
    ``fallback`` (a :class:`servicekit.app.FastPath`)."""

    def __init__(self, *, settings: ServiceSettings, max_body_bytes: int) -> None:
        self.settings = settings
        self.max_body_bytes = max_body_bytes

    @staticmethod
    def handles(scope: Scope) -> bool:
        return scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == PATH

    async def __call__(
        self, scope: Scope, receive: Receive, send: Send, *, fallback: ASGIApp
    ) -> None:
        headers = RawHeaders(scope["headers"])
        length = headers.get("content-length")
        if not (
            is_json(headers.get("content-type"))
            and length is not None
            and length.isdigit()
            and int(length) <= self.max_body_bytes
        ):
            await fallback(scope, receive, send)
            return
        try:
            identity = resolve_identity(headers, self.settings)
        except SoormaError:
            await fallback(scope, receive, send)  # the route's dependency says why
            return
        body = await read_body(receive)
        search = _parse(body)
        if search is None:
            await fallback(scope, replay(body, receive), send)
            return
        scope[ROUTE_TEMPLATE] = PATH
        memory: LongTermMemory = scope["state"]["longterm"]
        try:
            out = await memory.search_semantic_json(identity.tenant_id, identity.user_id, search)
        except Exception as exc:
            await respond_error(exc, scope, receive, send, log)
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [*_HEADERS, (b"content-length", str(len(out)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": out})
