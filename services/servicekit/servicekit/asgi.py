"""Small pieces for pure-ASGI fast paths (answering hot routes in front of FastAPI's
routing, innermost in servicekit's middleware stack)."""

from __future__ import annotations

from typing import Any

from starlette.types import Receive


class RawHeaders:
    """Just enough of a header mapping for ``resolve_identity``: ``get`` by lowercase name.

    Reads the ASGI scope's raw header list as it is, without building Starlette's
    ``Headers`` (a hot path looks up two or three names).
    """

    __slots__ = ("_raw",)

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self._raw = raw

    def get(self, name: str, default: Any = None) -> Any:
        wanted = name.encode("latin-1")
        for key, value in self._raw:
            if key == wanted:  # ASGI servers lowercase header names
                return value.decode("latin-1")
        return default


async def read_body(receive: Receive) -> bytes:
    """The whole request body (every ``http.request`` message joined)."""
    message = await receive()
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False):
        return body
    chunks = [body]
    while message.get("more_body", False):
        message = await receive()
        chunks.append(message.get("body", b""))
    return b"".join(chunks)


__all__ = ["RawHeaders", "read_body"]
