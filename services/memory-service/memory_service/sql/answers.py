"""Recorded answers: what an agent answered a request with, kept for a retention window.

Keyed ``(tenant_id, request_id)``. The first answer recorded for a request wins until it
expires, so a request delivered again (at-least-once bus, a planner re-sending it after
a crash) is answered with the same answer instead of being run again.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from memory_service.models import ID, TENANT, TS, JSONDocument, metadata
from memory_service.sql.base import SqlBase, utc
from soorma_common.clock import SYSTEM_CLOCK, Clock

# Expired rows are deleted by the write path every this many writes (per process).
PRUNE_EVERY = 200

recorded_answers = sa.Table(
    "memory_recorded_answers",
    metadata,
    sa.Column("tenant_id", TENANT, primary_key=True),
    sa.Column("request_id", ID, primary_key=True),
    sa.Column("answer", JSONDocument(), nullable=False),
    sa.Column("recorded_at", TS, nullable=False),
    sa.Column("expires_at", TS, nullable=False),
    sa.Index("ix_memory_recorded_answers_expiry", "expires_at"),
)

# Who runs a request now (``memory_service.sql.claims``); recording its answer ends it.
answer_claims = sa.Table(
    "memory_answer_claims",
    metadata,
    sa.Column("tenant_id", TENANT, primary_key=True),
    sa.Column("request_id", ID, primary_key=True),
    sa.Column("owner", sa.String(128), nullable=False),
    sa.Column("claimed_at", TS, nullable=False),
    sa.Column("expires_at", TS, nullable=False),
    sa.Index("ix_memory_answer_claims_expiry", "expires_at"),
)


class SqlAnswers(SqlBase):
    """Recorded answers on the memory store's engine; retention is timed on ``clock``
    (that of the claims, which read answers too)."""

    def __init__(self, *, engine: AsyncEngine, clock: Clock = SYSTEM_CLOCK) -> None:
        super().__init__(engine=engine)
        self.clock = clock
        self._writes = 0

    async def record(
        self, tenant: str, request_id: str, answer: Any, *, retention: timedelta
    ) -> dict[str, Any]:
        """Keep ``answer`` unless an unexpired one is recorded; the one that is kept.

        Any claim on the request ends with it (the request is answered)."""
        now = self.clock.now()
        table = recorded_answers
        stmt = self.insert(table).values(
            tenant_id=tenant,
            request_id=request_id,
            answer=answer,
            recorded_at=now,
            expires_at=now + retention,
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[table.c.tenant_id, table.c.request_id],
            set_={
                "answer": stmt.excluded.answer,
                "recorded_at": now,
                "expires_at": stmt.excluded.expires_at,
            },
            where=table.c.expires_at <= now,
        )
        claims = answer_claims
        async with self.engine.begin() as conn:
            await conn.execute(stmt)
            await conn.execute(
                sa.delete(claims).where(
                    claims.c.tenant_id == tenant, claims.c.request_id == request_id
                )
            )
            row = (
                await conn.execute(
                    sa.select(table).where(
                        table.c.tenant_id == tenant, table.c.request_id == request_id
                    )
                )
            ).first()
        self._writes += 1
        if self._writes % PRUNE_EVERY == 0:
            await self.prune(now)
        assert row is not None  # written above in the same transaction
        return _record(row)

    async def get(self, tenant: str, request_id: str) -> dict[str, Any] | None:
        """The unexpired answer recorded for ``request_id``, or ``None``."""
        table = recorded_answers
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(table).where(
                        table.c.tenant_id == tenant,
                        table.c.request_id == request_id,
                        table.c.expires_at > self.clock.now(),
                    )
                )
            ).first()
        return None if row is None else _record(row)

    async def prune(self, now: datetime | None = None) -> int:
        """Delete every expired answer and claim (all tenants); how many answers."""
        now = now or self.clock.now()
        async with self.engine.begin() as conn:
            expired = recorded_answers.c.expires_at <= now
            result = await conn.execute(sa.delete(recorded_answers).where(expired))
            await conn.execute(sa.delete(answer_claims).where(answer_claims.c.expires_at <= now))
        return int(result.rowcount or 0)


def _record(row: Any) -> dict[str, Any]:
    return {
        "request_id": row.request_id,
        "answer": row.answer,
        "recorded_at": utc(row.recorded_at),
        "expires_at": utc(row.expires_at),
    }


__all__ = ["PRUNE_EVERY", "SqlAnswers", "answer_claims", "recorded_answers"]
