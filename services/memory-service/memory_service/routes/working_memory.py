"""``/v1/working-memory/{plan_id}``: plan-scoped key/value memory.

Large data belongs here, not in events: an event carries the key.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request, Response

from memory_service.routes.deps import RecordId, SizeChecked, Store, check_storable
from servicekit import CurrentIdentity
from servicekit.errors import error_responses
from servicekit.jsoncheck import NulFree
from soorma_common.base import BaseDTO
from soorma_common.errors import ValidationFailed
from soorma_common.memory import WorkingMemoryItem, WorkingMemoryWrite

router = APIRouter(
    prefix="/v1/working-memory", tags=["working-memory"], responses=error_responses(422)
)

MemoryKey = Annotated[str, Path(min_length=1, max_length=512), NulFree]

_LINE_BREAK = "keys must not contain line breaks (a key is read back through its URL path)"


async def _no_line_break_in_path(request: Request) -> None:
    # Starlette matches ``{key:path}`` with ``.*`` and ``$``: a trailing "\n" is dropped
    # (GET "k\n" would answer key "k") and an inner one makes the route unreachable.
    if "\n" in request.scope["path"]:
        raise ValidationFailed(_LINE_BREAK, details=[{"field": "key", "message": _LINE_BREAK}])


KeyPathChecked = Depends(_no_line_break_in_path)


class WorkingMemoryList(BaseDTO):
    items: list[WorkingMemoryItem]


class WorkingMemoryCleared(BaseDTO):
    deleted: int


@router.post(
    "/{plan_id}",
    responses=error_responses(413),
    response_model=WorkingMemoryItem,
    dependencies=[SizeChecked],
)
async def put_working_memory(
    plan_id: RecordId, body: WorkingMemoryWrite, identity: CurrentIdentity, store: Store
) -> WorkingMemoryItem:
    """Store ``value`` under ``key`` (replacing any previous value)."""
    check_storable(body)
    if "\n" in body.key:
        raise ValidationFailed(_LINE_BREAK, details=[{"field": "key", "message": _LINE_BREAK}])
    return await store.put_memory(identity.tenant_id, plan_id, body.key, body.value)


@router.get("/{plan_id}", response_model=WorkingMemoryList)
async def list_working_memory(
    plan_id: RecordId, identity: CurrentIdentity, store: Store
) -> WorkingMemoryList:
    """Every entry of the plan's working memory, by key (empty when there are none)."""
    return WorkingMemoryList(items=await store.list_memory(identity.tenant_id, plan_id))


@router.delete("/{plan_id}", response_model=WorkingMemoryCleared)
async def clear_working_memory(
    plan_id: RecordId, identity: CurrentIdentity, store: Store
) -> WorkingMemoryCleared:
    """Delete every entry of the plan's working memory; returns how many there were."""
    return WorkingMemoryCleared(deleted=await store.clear_memory(identity.tenant_id, plan_id))


@router.get(
    "/{plan_id}/{key:path}",
    dependencies=[KeyPathChecked],
    responses=error_responses(404),
    response_model=WorkingMemoryItem,
)
async def get_working_memory(
    plan_id: RecordId, key: MemoryKey, identity: CurrentIdentity, store: Store
) -> WorkingMemoryItem:
    return await store.get_memory(identity.tenant_id, plan_id, key)


@router.delete(
    "/{plan_id}/{key:path}",
    dependencies=[KeyPathChecked],
    responses=error_responses(404),
    status_code=204,
)
async def delete_working_memory(
    plan_id: RecordId, key: MemoryKey, identity: CurrentIdentity, store: Store
) -> Response:
    await store.delete_memory(identity.tenant_id, plan_id, key)
    return Response(status_code=204)
