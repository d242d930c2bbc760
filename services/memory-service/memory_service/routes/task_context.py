"""``/v1/memory/task-context``: worker task state, sub-tasks and atomic fan-in."""

from __future__ import annotations

from fastapi import APIRouter, Response
from pydantic import Field

from memory_service.routes.deps import (
    ConditionalWrite,
    IfMatch,
    RecordId,
    SizeChecked,
    Store,
    check_ids,
    check_storable,
    expected_version,
    with_etag,
    with_path_id,
)
from servicekit import CurrentIdentity
from servicekit.errors import error_responses
from soorma_common.errors import ValidationFailed
from soorma_common.memory import SubTaskResultRequest, TaskContextRecord

router = APIRouter(
    prefix="/v1/memory/task-context", tags=["task-context"], responses=error_responses(422)
)


class TaskContextWrite(TaskContextRecord, ConditionalWrite):
    """A task context to store, optionally conditional on ``expected_version``."""


class TaskContextReplace(TaskContextWrite):
    """Body of ``PUT``: ``task_id`` comes from the path (if given, it must match)."""

    task_id: str | None = Field(default=None, min_length=1, max_length=256)  # type: ignore[assignment]


def _validate(body: TaskContextWrite) -> None:
    check_storable(body)
    check_ids("correlation_id", [body.correlation_id])
    check_ids("plan_id", [body.plan_id])
    check_ids("sub_tasks", list(body.sub_tasks))
    check_ids("sub_tasks.parallel_group_id", [s.parallel_group_id for s in body.sub_tasks.values()])
    for key, sub in body.sub_tasks.items():
        if sub.sub_task_id != key:
            raise ValidationFailed(
                f"sub_tasks.{key}.sub_task_id is {sub.sub_task_id!r}; it must equal its key",
                details=[{"field": f"sub_tasks.{key}.sub_task_id", "message": "key mismatch"}],
            )


@router.post(
    "",
    responses=error_responses(404, 409, 413),
    response_model=TaskContextRecord,
    dependencies=[SizeChecked],
)
async def upsert_task_context(
    body: TaskContextWrite,
    identity: CurrentIdentity,
    store: Store,
    if_match: IfMatch,
    response: Response,
) -> TaskContextRecord:
    """Create or replace a task context; returns the stored record with its version."""
    _validate(body)
    wanted = expected_version(if_match, body.expected_version)
    return with_etag(
        response, await store.save_task(identity.tenant_id, body, expected_version=wanted)
    )


@router.get(
    "/by-subtask/{sub_task_id}",
    responses=error_responses(404),
    response_model=TaskContextRecord,
)
async def get_task_context_by_sub_task(
    sub_task_id: RecordId, identity: CurrentIdentity, store: Store, response: Response
) -> TaskContextRecord:
    """The task context that owns ``sub_task_id`` (fan-in: find the parent of a result)."""
    return with_etag(response, await store.get_task_by_sub_task(identity.tenant_id, sub_task_id))


@router.get("/{task_id}", responses=error_responses(404), response_model=TaskContextRecord)
async def get_task_context(
    task_id: RecordId, identity: CurrentIdentity, store: Store, response: Response
) -> TaskContextRecord:
    return with_etag(response, await store.get_task(identity.tenant_id, task_id))


@router.put(
    "/{task_id}",
    responses=error_responses(404, 409, 413),
    response_model=TaskContextRecord,
    dependencies=[SizeChecked],
)
async def replace_task_context(
    task_id: RecordId,
    body: TaskContextReplace,
    identity: CurrentIdentity,
    store: Store,
    if_match: IfMatch,
    response: Response,
) -> TaskContextRecord:
    """Replace an existing task context (404 if it does not exist)."""
    record = with_path_id(body, field="task_id", path_id=task_id)
    _validate(record)
    wanted = expected_version(if_match, body.expected_version)
    return with_etag(
        response,
        await store.save_task(identity.tenant_id, record, expected_version=wanted, must_exist=True),
    )


@router.delete("/{task_id}", responses=error_responses(404), status_code=204)
async def delete_task_context(
    task_id: RecordId, identity: CurrentIdentity, store: Store
) -> Response:
    """Delete a task context and its sub-tasks (a worker does this on ``complete()``)."""
    await store.delete_task(identity.tenant_id, task_id)
    return Response(status_code=204)


@router.post(
    "/{task_id}/sub-tasks/{sub_task_id}/result",
    responses=error_responses(404, 413),
    response_model=TaskContextRecord,
    dependencies=[SizeChecked],
)
async def record_sub_task_result(
    task_id: RecordId,
    sub_task_id: RecordId,
    body: SubTaskResultRequest,
    identity: CurrentIdentity,
    store: Store,
    response: Response,
) -> TaskContextRecord:
    """Record one sub-task's result atomically and return the whole updated context.

    Concurrent results for one task are serialized on the task's row, so none is lost,
    and each response shows every result recorded up to and including this one.
    """
    check_storable(body)
    return with_etag(
        response, await store.record_sub_task_result(identity.tenant_id, task_id, sub_task_id, body)
    )
