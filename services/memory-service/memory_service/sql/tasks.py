"""Task contexts and their sub-tasks (a side table, so by-subtask is an index seek)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_service.models import sub_tasks, task_contexts
from memory_service.sql.base import (
    SqlBase,
    stored_bookkeeping,
    utc,
    utcnow,
    versioned_write,
)
from soorma_common.errors import TaskNotFound
from soorma_common.memory import (
    SubTaskRecord,
    SubTaskResultRequest,
    SubTaskStatus,
    TaskContextRecord,
)

_FIELDS = (
    "plan_id",
    "event_type",
    "correlation_id",
    "response_event",
    "response_topic",
    "data",
    "state",
    "bookkeeping",
)


def _task_not_found(task_id: str) -> TaskNotFound:
    return TaskNotFound(f"task context {task_id!r} not found", details={"task_id": task_id})


def _key(tenant: str, task_id: str) -> sa.ColumnElement[bool]:
    return sa.and_(task_contexts.c.tenant_id == tenant, task_contexts.c.task_id == task_id)


def _update_task(
    key: sa.ColumnElement[bool], values: dict[str, Any], version: int | None
) -> sa.Update:
    """Set ``values`` on a task row if its stored version is ``version`` (any: ``None``)."""
    where = key if version is None else sa.and_(key, task_contexts.c.version == version)
    return sa.update(task_contexts).where(where).values(**values)


async def _written(conn: AsyncConnection, stmt: Any) -> int | None:
    """Run an INSERT/UPDATE of one task row: its new version, ``None`` if it wrote none."""
    version: int | None = (await conn.execute(stmt.returning(task_contexts.c.version))).scalar()
    return version


async def _stored_version(conn: AsyncConnection, key: sa.ColumnElement[bool]) -> int | None:
    version: int | None = (
        await conn.execute(sa.select(task_contexts.c.version).where(key))
    ).scalar()
    return version


class SqlTaskContexts(SqlBase):
    """Task-context part of the SQL store."""

    async def save_task(
        self,
        tenant: str,
        record: TaskContextRecord,
        *,
        expected_version: int | None = None,
        must_exist: bool = False,
    ) -> TaskContextRecord:
        now = utcnow()
        fields: dict[str, Any] = {name: getattr(record, name) for name in _FIELDS}
        fields["bookkeeping"] = stored_bookkeeping(record)
        key = _key(tenant, record.task_id)
        created = {"tenant_id": tenant, "task_id": record.task_id, "version": 1}
        created |= {"created_at": now, "updated_at": now, **fields}
        updated = {**fields, "version": task_contexts.c.version + 1, "updated_at": now}
        unique = [task_contexts.c.tenant_id, task_contexts.c.task_id]
        upsert = self.insert(task_contexts).values(**created)
        upsert = upsert.on_conflict_do_update(index_elements=unique, set_=updated)
        create = self.insert(task_contexts).values(**created)
        create = create.on_conflict_do_nothing(index_elements=unique)
        async with self.engine.begin() as conn:
            await versioned_write(
                expected_version=expected_version,
                must_exist=must_exist,
                upsert=lambda: _written(conn, upsert),
                create=lambda: _written(conn, create),
                update=lambda version: _written(conn, _update_task(key, updated, version)),
                current_version=lambda: _stored_version(conn, key),
                not_found=lambda: _task_not_found(record.task_id),
            )
            await self._replace_sub_tasks(conn, tenant, record)
            return await self._read_task(conn, tenant, record.task_id)

    async def _replace_sub_tasks(
        self, conn: AsyncConnection, tenant: str, record: TaskContextRecord
    ) -> None:
        # A finished sub-task never goes back to pending through a whole-record write:
        # a worker saving its (older) in-memory copy must not erase a fan-in result
        # that the result endpoint recorded meanwhile.
        finished = {
            row.sub_task_id: row
            for row in await conn.execute(
                sa.select(sub_tasks).where(
                    sub_tasks.c.tenant_id == tenant,
                    sub_tasks.c.task_id == record.task_id,
                    sub_tasks.c.status != SubTaskStatus.PENDING.value,
                )
            )
        }
        await conn.execute(
            sa.delete(sub_tasks).where(
                sub_tasks.c.tenant_id == tenant, sub_tasks.c.task_id == record.task_id
            )
        )
        rows = []
        for position, (sub_task_id, sub) in enumerate(record.sub_tasks.items()):
            status, result, error = sub.status.value, sub.result, sub.error
            kept = finished.get(sub_task_id)
            if kept is not None and sub.status == SubTaskStatus.PENDING:
                status, result, error = kept.status, kept.result, kept.error
            rows.append(
                {
                    "tenant_id": tenant,
                    "task_id": record.task_id,
                    "sub_task_id": sub_task_id,
                    "position": position,
                    "event_type": sub.event_type,
                    "response_event": sub.response_event,
                    "status": status,
                    "parallel_group_id": sub.parallel_group_id,
                    "result": result,
                    "error": error,
                }
            )
        if rows:
            await conn.execute(sa.insert(sub_tasks), rows)

    async def _read_task(
        self, conn: AsyncConnection, tenant: str, task_id: str
    ) -> TaskContextRecord:
        row = (await conn.execute(sa.select(task_contexts).where(_key(tenant, task_id)))).first()
        if row is None:
            raise _task_not_found(task_id)
        subs = await conn.execute(
            sa.select(sub_tasks)
            .where(sub_tasks.c.tenant_id == tenant, sub_tasks.c.task_id == task_id)
            .order_by(sub_tasks.c.position)
        )
        return TaskContextRecord(
            task_id=row.task_id,
            plan_id=row.plan_id,
            event_type=row.event_type,
            correlation_id=row.correlation_id,
            response_event=row.response_event,
            response_topic=row.response_topic,
            data=row.data,
            state=row.state,
            bookkeeping=row.bookkeeping,
            version=row.version,
            created_at=utc(row.created_at),
            updated_at=utc(row.updated_at),
            sub_tasks={
                s.sub_task_id: SubTaskRecord(
                    sub_task_id=s.sub_task_id,
                    event_type=s.event_type,
                    response_event=s.response_event,
                    status=SubTaskStatus(s.status),
                    parallel_group_id=s.parallel_group_id,
                    result=s.result,
                    error=s.error,
                )
                for s in subs
            },
        )

    async def get_task(self, tenant: str, task_id: str) -> TaskContextRecord:
        async with self.reading() as conn:
            return await self._read_task(conn, tenant, task_id)

    async def get_task_by_sub_task(self, tenant: str, sub_task_id: str) -> TaskContextRecord:
        async with self.reading() as conn:
            task_id = (
                await conn.execute(
                    sa.select(sub_tasks.c.task_id)
                    .where(sub_tasks.c.tenant_id == tenant, sub_tasks.c.sub_task_id == sub_task_id)
                    .limit(1)
                )
            ).scalar()
            if task_id is None:
                raise TaskNotFound(
                    f"no task context owns sub-task {sub_task_id!r}",
                    details={"sub_task_id": sub_task_id},
                )
            return await self._read_task(conn, tenant, task_id)

    async def record_sub_task_result(
        self, tenant: str, task_id: str, sub_task_id: str, result: SubTaskResultRequest
    ) -> TaskContextRecord:
        async with self.engine.begin() as conn:
            # Bumping the parent's version first locks the task row (Postgres) / takes the
            # write lock (SQLite): concurrent results for one task queue here, and each
            # returns a context that includes every result committed before it.
            bumped = await conn.execute(
                sa.update(task_contexts)
                .where(_key(tenant, task_id))
                .values(version=task_contexts.c.version + 1, updated_at=utcnow())
                .returning(task_contexts.c.version)
            )
            if bumped.first() is None:
                raise _task_not_found(task_id)
            updated = await conn.execute(
                sa.update(sub_tasks)
                .where(
                    sub_tasks.c.tenant_id == tenant,
                    sub_tasks.c.task_id == task_id,
                    sub_tasks.c.sub_task_id == sub_task_id,
                )
                .values(status=result.status.value, result=result.result, error=result.error)
            )
            if updated.rowcount == 0:
                raise TaskNotFound(
                    f"task context {task_id!r} has no sub-task {sub_task_id!r}; save the "
                    "sub-task in the task context before delegating it",
                    details={"task_id": task_id, "sub_task_id": sub_task_id},
                )
            return await self._read_task(conn, tenant, task_id)

    async def delete_task(self, tenant: str, task_id: str) -> None:
        async with self.engine.begin() as conn:
            deleted = await conn.execute(sa.delete(task_contexts).where(_key(tenant, task_id)))
            if deleted.rowcount == 0:
                raise _task_not_found(task_id)
