"""Working memory: plan-scoped key/value entries with JSON values."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from memory_service.models import working_memory
from memory_service.sql.base import SqlBase, utc, utcnow
from soorma_common.errors import MemoryKeyNotFound
from soorma_common.memory import WorkingMemoryItem


def _key_not_found(plan_id: str, key: str) -> MemoryKeyNotFound:
    return MemoryKeyNotFound(
        f"working memory of plan {plan_id!r} has no key {key!r}",
        details={"plan_id": plan_id, "key": key},
    )


def _item(row: Any) -> WorkingMemoryItem:
    return WorkingMemoryItem(
        plan_id=row.plan_id, key=row.key, value=row.value, updated_at=utc(row.updated_at)
    )


def _where(tenant: str, plan_id: str) -> sa.ColumnElement[bool]:
    return sa.and_(working_memory.c.tenant_id == tenant, working_memory.c.plan_id == plan_id)


class SqlWorkingMemory(SqlBase):
    """Working-memory part of the SQL store."""

    async def put_memory(
        self, tenant: str, plan_id: str, key: str, value: Any
    ) -> WorkingMemoryItem:
        now = utcnow()
        stmt = self.insert(working_memory).values(
            tenant_id=tenant,
            plan_id=plan_id,
            key=key,
            value=value,
            created_at=now,
            updated_at=now,
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[
                working_memory.c.tenant_id,
                working_memory.c.plan_id,
                working_memory.c.key,
            ],
            set_={"value": stmt.excluded.value, "updated_at": now},
        )
        async with self.engine.begin() as conn:
            await conn.execute(stmt)
        return WorkingMemoryItem(plan_id=plan_id, key=key, value=value, updated_at=now)

    async def get_memory(self, tenant: str, plan_id: str, key: str) -> WorkingMemoryItem:
        async with self.reading() as conn:
            row = (
                await conn.execute(
                    sa.select(working_memory).where(
                        _where(tenant, plan_id), working_memory.c.key == key
                    )
                )
            ).first()
        if row is None:
            raise _key_not_found(plan_id, key)
        return _item(row)

    async def list_memory(self, tenant: str, plan_id: str) -> list[WorkingMemoryItem]:
        async with self.reading() as conn:
            rows = await conn.execute(
                sa.select(working_memory)
                .where(_where(tenant, plan_id))
                .order_by(working_memory.c.key)
            )
            return [_item(row) for row in rows]

    async def delete_memory(self, tenant: str, plan_id: str, key: str) -> None:
        async with self.engine.begin() as conn:
            deleted = await conn.execute(
                sa.delete(working_memory).where(
                    _where(tenant, plan_id), working_memory.c.key == key
                )
            )
            if deleted.rowcount == 0:
                raise _key_not_found(plan_id, key)

    async def clear_memory(self, tenant: str, plan_id: str) -> int:
        async with self.engine.begin() as conn:
            deleted = await conn.execute(sa.delete(working_memory).where(_where(tenant, plan_id)))
            return int(deleted.rowcount)
