"""One ordered middleware stack wraps every request, a service's fast path included."""

from __future__ import annotations

import httpx
import pytest
from asgi_lifespan import LifespanManager
from fastapi import APIRouter
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Receive, Scope, Send

from servicekit import ServiceSettings, create_service_app
from servicekit.app import PLATFORM_MIDDLEWARES, ServiceApp
from servicekit.asgi import read_body

pytestmark = pytest.mark.asyncio

router = APIRouter()


@router.post("/fast")
@router.post("/slow")
async def routed() -> dict[str, str]:
    return {"answered_by": "fastapi"}


class _Recorder:
    """Middleware noting, per request, that it saw it (under its name)."""

    def __init__(self, app: ASGIApp, *, name: str, seen: list[str]) -> None:
        self.app = app
        self.name = name
        self.seen = seen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.seen.append(f"{self.name} {scope['path']}")
        await self.app(scope, receive, send)


class _EchoFastPath:
    """Answers ``POST /fast`` with its body's length; hands ``POST /fast?fallback`` over."""

    def handles(self, scope: Scope) -> bool:
        return scope["type"] == "http" and scope["path"] == "/fast"

    async def __call__(
        self, scope: Scope, receive: Receive, send: Send, *, fallback: ASGIApp
    ) -> None:
        if scope["query_string"] == b"fallback":
            await fallback(scope, receive, send)
            return
        body = str(len(await read_body(receive))).encode()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})


def _app(seen: list[str], **settings: object) -> ServiceApp:
    return create_service_app(
        name="stack-svc",
        settings=ServiceSettings(**settings),  # type: ignore[arg-type]
        routers=[router],
        fast_path=_EchoFastPath(),
        middlewares=[Middleware(_Recorder, name="own", seen=seen)],
    )


async def test_fast_path_requests_go_through_the_whole_stack_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[str] = []
    # A platform-wide hook (where tracing or metrics register) wraps every service's stack.
    monkeypatch.setattr(
        "servicekit.app.PLATFORM_MIDDLEWARES",
        [*PLATFORM_MIDDLEWARES, lambda name, _: Middleware(_Recorder, name=name, seen=seen)],
    )
    app = _app(seen, max_payload_bytes=10)
    app.add_middleware(_Recorder, name="later", seen=seen)
    async with (
        LifespanManager(app) as manager,
        httpx.AsyncClient(transport=httpx.ASGITransport(manager.app), base_url="http://t") as c,
    ):
        r = await c.post("/fast", content=b"abc", headers={"X-Request-ID": "rid-1"})
        assert (r.status_code, r.text, r.headers["x-request-id"]) == (200, "3", "rid-1")
        r = await c.post("/fast?fallback")
        assert r.json() == {"answered_by": "fastapi"}
        assert r.headers["x-request-id"]
        r = await c.post("/slow")
        assert r.json() == {"answered_by": "fastapi"}
        # Over the body limit (10 * 4 bytes): the 413 comes from the stack, not the fast path.
        r = await c.post("/fast", content=b"x" * 41)
        assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"
        assert r.headers["x-request-id"]
    order = ["stack-svc", "later", "own"]
    expected = [f"{n} {p}" for p in ("/fast", "/fast", "/slow", "/fast") for n in order]
    assert seen == expected


async def test_middleware_a_fast_path_would_skip_fails_start_up() -> None:
    app = _app([])
    # Starlette's own list sits inside FastAPI, behind the fast path: refused at start-up.
    app.user_middleware.append(Middleware(_Recorder, name="inside", seen=[]))
    with pytest.raises(RuntimeError, match="would be skipped by the fast path"):
        async with LifespanManager(app):
            pass


async def test_middleware_cannot_be_added_once_started() -> None:
    app = _app([])
    async with LifespanManager(app):
        with pytest.raises(RuntimeError, match="after an application has started"):
            app.add_middleware(_Recorder, name="late", seen=[])
