"""Claims on requests: who runs a request now, so two deliveries of it do not both run.

Keyed like recorded answers, ``(tenant_id, request_id)``. A claim has an owner (a token
of one delivery in one process) and a lease; the owner renews it while it runs the
request and it is deleted when the answer is recorded or the owner gives it back. A
claim whose lease ran out (its holder was killed) may be taken by anyone.

Leases are timed on the store's clock (the system clock unless a test gives a manual
one): the times are computed here and written as values, so the database's own clock
plays no part.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from memory_service.sql.answers import answer_claims, recorded_answers
from memory_service.sql.base import SqlBase, utc
from soorma_common.clock import SYSTEM_CLOCK, Clock


class SqlClaims(SqlBase):
    """Claims on requests, on the memory store's engine, with leases on ``clock``."""

    def __init__(self, *, engine: AsyncEngine, clock: Clock = SYSTEM_CLOCK) -> None:
        super().__init__(engine=engine)
        self.clock = clock

    async def claim(
        self, tenant: str, request_id: str, owner: str, *, lease: timedelta
    ) -> dict[str, Any]:
        """Claim ``request_id`` for ``owner`` (or renew its own claim) unless it is
        answered or another owner's claim is live; what the caller must do.

        The claim is written first, then the answer is read in the same transaction: the
        write locks the claim row (PostgreSQL) or the database (SQLite), and recording
        an answer deletes the claim row in its own transaction, so a claim granted here
        either sees that answer or was written before the answer's transaction reached
        the claim row (and is then deleted by it).
        """
        now = self.clock.now()
        table = answer_claims
        stmt = self.insert(table).values(
            tenant_id=tenant,
            request_id=request_id,
            owner=owner,
            claimed_at=now,
            expires_at=now + lease,
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[table.c.tenant_id, table.c.request_id],
            set_={"owner": owner, "claimed_at": now, "expires_at": stmt.excluded.expires_at},
            where=sa.or_(table.c.expires_at <= now, table.c.owner == owner),
        )
        this = sa.and_(table.c.tenant_id == tenant, table.c.request_id == request_id)
        answers = recorded_answers
        async with self.engine.begin() as conn:
            await conn.execute(stmt)
            answer = (
                await conn.execute(
                    sa.select(answers.c.answer).where(
                        answers.c.tenant_id == tenant,
                        answers.c.request_id == request_id,
                        answers.c.expires_at > self.clock.now(),
                    )
                )
            ).first()
            if answer is not None:
                await conn.execute(sa.delete(table).where(this))
                return {"request_id": request_id, "status": "answered", "answer": answer.answer}
            row = (await conn.execute(sa.select(table).where(this))).first()
        assert row is not None  # written or kept above, in this transaction
        return {
            "request_id": request_id,
            "status": "granted" if row.owner == owner else "held",
            "owner": row.owner,
            "expires_at": utc(row.expires_at),
        }

    async def release(self, tenant: str, request_id: str, owner: str) -> bool:
        """Give back ``owner``'s claim on ``request_id``; whether it held one."""
        table = answer_claims
        async with self.engine.begin() as conn:
            result = await conn.execute(
                sa.delete(table).where(
                    table.c.tenant_id == tenant,
                    table.c.request_id == request_id,
                    table.c.owner == owner,
                )
            )
        return bool(result.rowcount)


__all__ = ["SqlClaims"]
