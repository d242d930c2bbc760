"""Sessions: conversations that group plans. Counts and activity come from the plans."""

from __future__ import annotations

import uuid
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_service.models import plans, sessions
from memory_service.sql.base import SqlBase, utc, utcnow
from memory_service.sql.plans import plan_data_deletes
from soorma_common.errors import Conflict, SessionNotFound
from soorma_common.memory import SessionCreate, SessionSummary


def _session_not_found(session_id: str) -> SessionNotFound:
    return SessionNotFound(f"session {session_id!r} not found", details={"session_id": session_id})


def _summaries(tenant: str) -> sa.Select[Any]:
    activity = (
        sa.select(
            plans.c.session_id,
            sa.func.count().label("plan_count"),
            sa.func.max(plans.c.updated_at).label("last_plan_activity"),
        )
        .where(plans.c.tenant_id == tenant, plans.c.session_id.is_not(None))
        .group_by(plans.c.session_id)
        .subquery()
    )
    return (
        sa.select(sessions, activity.c.plan_count, activity.c.last_plan_activity)
        .select_from(sessions.outerjoin(activity, activity.c.session_id == sessions.c.session_id))
        .where(sessions.c.tenant_id == tenant)
    )


def _summary(row: Any) -> SessionSummary:
    last = utc(row.updated_at)
    if row.last_plan_activity is not None:
        last = max(last, utc(row.last_plan_activity))
    return SessionSummary(
        session_id=row.session_id,
        name=row.name,
        metadata=row.metadata,
        plan_count=row.plan_count or 0,
        created_at=utc(row.created_at),
        last_activity=last,
    )


class SqlSessions(SqlBase):
    """Session part of the SQL store."""

    async def _read_session(
        self, conn: AsyncConnection, tenant: str, session_id: str
    ) -> SessionSummary:
        row = (
            await conn.execute(_summaries(tenant).where(sessions.c.session_id == session_id))
        ).first()
        if row is None:
            raise _session_not_found(session_id)
        return _summary(row)

    async def create_session(self, tenant: str, session: SessionCreate) -> SessionSummary:
        session_id = session.session_id or str(uuid.uuid4())
        now = utcnow()
        async with self.engine.begin() as conn:
            stmt = (
                self.insert(sessions)
                .values(
                    tenant_id=tenant,
                    session_id=session_id,
                    name=session.name,
                    metadata=session.metadata,
                    created_at=now,
                    updated_at=now,
                )
                .on_conflict_do_nothing(
                    index_elements=[sessions.c.tenant_id, sessions.c.session_id]
                )
                .returning(sessions.c.session_id)
            )
            if (await conn.execute(stmt)).first() is None:
                raise Conflict(
                    f"session {session_id!r} already exists; omit session_id to get a new one",
                    details={"session_id": session_id},
                )
            return await self._read_session(conn, tenant, session_id)

    async def get_session(self, tenant: str, session_id: str) -> SessionSummary:
        async with self.reading() as conn:
            return await self._read_session(conn, tenant, session_id)

    async def list_sessions(self, tenant: str, *, limit: int = 100) -> list[SessionSummary]:
        query = (
            _summaries(tenant)
            .order_by(sessions.c.created_at.desc(), sessions.c.session_id)
            .limit(limit)
        )
        async with self.reading() as conn:
            return [_summary(row) for row in await conn.execute(query)]

    async def delete_session(self, tenant: str, session_id: str) -> None:
        """Delete the session and every plan in it (with the plans' data)."""
        async with self.engine.begin() as conn:
            deleted = await conn.execute(
                sa.delete(sessions).where(
                    sessions.c.tenant_id == tenant, sessions.c.session_id == session_id
                )
            )
            if deleted.rowcount == 0:
                raise _session_not_found(session_id)
            in_session = sa.and_(plans.c.tenant_id == tenant, plans.c.session_id == session_id)
            for stmt in plan_data_deletes(in_session):
                await conn.execute(stmt)
            await conn.execute(sa.delete(plans).where(in_session))
