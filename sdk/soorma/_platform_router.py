"""One address for the whole platform: ``soorma dev`` serves every service behind one port.

A request for ``/<prefix>/rest`` reaches the service mounted at ``/<prefix>`` as
``/rest`` (``root_path`` says where it is mounted), with that service's lifespan state,
so it behaves as when served on its own port. ``GET /.well-known/soorma.json`` (the
discovery document) lists each service's base URL at this address.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from soorma.settings import DISCOVERY_PATH

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Mounted:
    """A service served under ``prefix`` with the state its own server's lifespan made."""

    name: str
    prefix: str
    app: ASGIApp
    state: Mapping[str, Any]


class PlatformRouter:
    """ASGI app routing ``/<prefix>/...`` to each mounted service (see the module doc)."""

    def __init__(self, mounts: list[Mounted]) -> None:
        self.mounts = sorted(mounts, key=lambda m: len(m.prefix), reverse=True)

    def discovery(self, base_url: str) -> dict[str, Any]:
        """The discovery document for a platform reached at ``base_url``."""
        base = base_url.rstrip("/")
        return {
            "platform": "soorma",
            "services": {m.name: f"{base}{m.prefix}" for m in self.mounts},
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return  # lifespan: each service's own server ran its lifespan
        path: str = scope["path"]
        if path == DISCOVERY_PATH:
            await self._json(send, 200, self.discovery(_base_url(scope)))
            return
        for mount in self.mounts:
            if path == mount.prefix or path.startswith(mount.prefix + "/"):
                rest = path[len(mount.prefix) :] or "/"
                child = dict(scope)
                child["path"] = rest
                child["raw_path"] = rest.encode()
                child["root_path"] = scope.get("root_path", "") + mount.prefix
                child["state"] = dict(mount.state)
                await mount.app(child, receive, send)
                return
        known = ", ".join(f"{m.prefix}/ ({m.name})" for m in reversed(self.mounts))
        await self._json(
            send,
            404,
            {
                "error": {
                    "code": "not_found",
                    "message": f"no service at {path}: this address serves {known} and "
                    f"{DISCOVERY_PATH}",
                    "details": {"path": path},
                }
            },
        )

    @staticmethod
    async def _json(send: Send, status: int, body: Mapping[str, Any]) -> None:
        payload = json.dumps(body).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


def _base_url(scope: Scope) -> str:
    headers = dict(scope.get("headers") or [])
    host = headers.get(b"host", b"").decode("latin-1")
    if not host:
        server = scope.get("server") or ("127.0.0.1", 80)
        host = f"{server[0]}:{server[1]}"
    return f"{scope.get('scheme', 'http')}://{host}{scope.get('root_path', '')}"


__all__ = ["DISCOVERY_PATH", "Mounted", "PlatformRouter"]
