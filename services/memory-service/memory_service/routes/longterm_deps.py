"""What the long-term memory routes share: the injected service, ids and query filters."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Query, Request

from memory_service.longterm.service import LongTermMemory
from servicekit.jsoncheck import NulFree
from soorma_common.knowledge import MAX_EXTERNAL_ID_CHARS, MAX_ID_CHARS, MAX_SOURCE_CHARS


async def get_longterm(request: Request) -> LongTermMemory:
    """The long-term memory the lifespan opened (request state, never a module global)."""
    return request.state.longterm  # type: ignore[no-any-return]


LongTerm = Annotated[LongTermMemory, Depends(get_longterm)]
MemoryId = Annotated[str, Path(min_length=1, max_length=MAX_ID_CHARS), NulFree]
ExternalIdPath = Annotated[str, Path(min_length=1, max_length=MAX_EXTERNAL_ID_CHARS), NulFree]
OptionalId = Annotated[str | None, Query(min_length=1, max_length=MAX_ID_CHARS), NulFree]
OptionalExternalId = Annotated[
    str | None, Query(min_length=1, max_length=MAX_EXTERNAL_ID_CHARS), NulFree
]
OptionalSource = Annotated[str | None, Query(min_length=1, max_length=MAX_SOURCE_CHARS), NulFree]
