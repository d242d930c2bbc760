"""Plans: one row per plan, the plan context being its full state.

``PlanSummary`` is a projection of the same row. Correlation ids live in a side table
keyed ``(tenant_id, correlation_id, plan_id)`` so by-correlation is an index seek.

(Over 400 lines: the plan store's prebuilt statements and the queries that use them are
kept together so each statement is built once and read beside its caller.)
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from functools import cached_property
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection

from memory_service.models import plan_correlations, plans, task_contexts, working_memory
from memory_service.sql.base import (
    SqlBase,
    stored_bookkeeping,
    utc,
    utcnow,
    versioned_update,
    versioned_write,
)
from memory_service.sql.driver import StatementRunner
from soorma_common.errors import Conflict, PlanNotFound
from soorma_common.memory import (
    FINISHED_PLAN_STATUSES,
    PlanContextRecord,
    PlanCreate,
    PlanStatus,
    PlanSummary,
)

_FIELDS = (
    "session_id",
    "parent_plan_id",
    "goal_event",
    "goal_data",
    "response_event",
    "current_state",
    "state_machine",
    "results",
    "state",
    "bookkeeping",
)
_SUMMARY_COLUMNS = (
    plans.c.plan_id,
    plans.c.goal_event,
    plans.c.status,
    plans.c.session_id,
    plans.c.parent_plan_id,
    plans.c.response_event,
    plans.c.version,
    plans.c.created_at,
    plans.c.updated_at,
)


def _plan_not_found(plan_id: str) -> PlanNotFound:
    return PlanNotFound(f"plan {plan_id!r} not found", details={"plan_id": plan_id})


def _key(tenant: str, plan_id: str) -> sa.ColumnElement[bool]:
    return sa.and_(plans.c.tenant_id == tenant, plans.c.plan_id == plan_id)


def _fields(record: PlanContextRecord) -> dict[str, Any]:
    values: dict[str, Any] = {name: getattr(record, name) for name in _FIELDS}
    values["status"] = record.status.value
    values["bookkeeping"] = stored_bookkeeping(record)
    return values


def summary_from_row(row: Any) -> PlanSummary:
    return PlanSummary(
        plan_id=row.plan_id,
        goal_event=row.goal_event,
        status=PlanStatus(row.status),
        session_id=row.session_id,
        parent_plan_id=row.parent_plan_id,
        response_event=row.response_event,
        version=row.version,
        created_at=utc(row.created_at),
        updated_at=utc(row.updated_at),
    )


def record_from_row(row: Mapping[str, Any]) -> PlanContextRecord:
    """The plan context of a full ``memory_plans`` row (columns by name)."""
    return PlanContextRecord(
        plan_id=row["plan_id"],
        session_id=row["session_id"],
        parent_plan_id=row["parent_plan_id"],
        goal_event=row["goal_event"],
        goal_data=row["goal_data"],
        response_event=row["response_event"],
        status=PlanStatus(row["status"]),
        current_state=row["current_state"],
        state_machine=row["state_machine"],
        results=row["results"],
        correlation_ids=row["correlation_ids"],
        state=row["state"],
        bookkeeping=row["bookkeeping"],
        version=row["version"],
        created_at=utc(row["created_at"]),
        updated_at=utc(row["updated_at"]),
    )


# Hot-path statements are built once with bind parameters: building a statement per call
# (and computing its cache key) cost more CPU than executing it.
_TENANT = sa.bindparam("key_tenant")
_PLAN_ID = sa.bindparam("key_plan_id")
_KEY = sa.and_(plans.c.tenant_id == _TENANT, plans.c.plan_id == _PLAN_ID)
GET_PLAN = sa.select(plans).where(_KEY)
# Bind parameter names differ from column names: SQLAlchemy reserves those for its own
# VALUES/SET parameters.
_WRITTEN = (*_FIELDS, "status", "correlation_ids")
_BIND = {name: sa.bindparam(f"new_{name}", type_=plans.c[name].type) for name in _WRITTEN}
_NOW = sa.bindparam("now", type_=plans.c.updated_at.type)
UPDATE_PLAN = (
    sa.update(plans)
    .where(_KEY, plans.c.version == sa.bindparam("expected_version"))
    .values(**_BIND, version=plans.c.version + 1, updated_at=_NOW)
    .returning(*plans.c)
)
UPDATE_PLAN_ANY_VERSION = (
    sa.update(plans)
    .where(_KEY)
    .values(**_BIND, version=plans.c.version + 1, updated_at=_NOW)
    .returning(*plans.c)
)
GET_VERSION = sa.select(plans.c.version).where(_KEY)
DROP_UNLISTED_CORRELATIONS = sa.delete(plan_correlations).where(
    plan_correlations.c.tenant_id == _TENANT,
    plan_correlations.c.plan_id == _PLAN_ID,
    plan_correlations.c.correlation_id.not_in(sa.bindparam("keep", expanding=True)),
)
# The same on PostgreSQL as one fixed statement (``<> ALL(array)``): an expanding IN list
# is new SQL for every list length, which the driver path does not compile.
DROP_UNLISTED_CORRELATIONS_PG = sa.delete(plan_correlations).where(
    plan_correlations.c.tenant_id == _TENANT,
    plan_correlations.c.plan_id == _PLAN_ID,
    plan_correlations.c.correlation_id
    != sa.all_(sa.bindparam("keep", type_=postgresql.ARRAY(sa.String()))),
)


def _by_correlation_statement() -> sa.Select[Any]:
    """One statement: the plan named ``:correlation_id``, else the one listing it.

    Every lookup is an equality on a primary key (plans by ``(tenant_id, plan_id)``, the
    side table by its ``(tenant_id, correlation_id)`` prefix), so it is an index seek
    even on a fresh database without planner statistics. Should two plans list the id,
    the most recently updated wins.
    """
    correlation_id = sa.bindparam("correlation_id")
    exact = plans.alias("exact")
    named = (
        sa.select(exact.c.plan_id)
        .where(exact.c.tenant_id == _TENANT, exact.c.plan_id == correlation_id)
        .scalar_subquery()
    )
    owner = plans.alias("owner")
    owner_updated = (
        sa.select(owner.c.updated_at)
        .where(
            owner.c.tenant_id == plan_correlations.c.tenant_id,
            owner.c.plan_id == plan_correlations.c.plan_id,
        )
        .scalar_subquery()
    )
    listing = (
        sa.select(plan_correlations.c.plan_id)
        .where(
            plan_correlations.c.tenant_id == _TENANT,
            plan_correlations.c.correlation_id == correlation_id,
        )
        .order_by(owner_updated.desc())
        .limit(1)
        .scalar_subquery()
    )
    return sa.select(plans).where(
        plans.c.tenant_id == _TENANT, plans.c.plan_id == sa.func.coalesce(named, listing)
    )


BY_CORRELATION = _by_correlation_statement()


def plan_data_deletes(owned: sa.ColumnElement[bool]) -> list[sa.Delete]:
    """Deletes for what belongs to the plans matching ``owned`` (besides the plan rows).

    ``owned`` is a condition on ``memory_plans`` correlated with the deleted table via
    ``tenant_id``/``plan_id``; correlation ids and sub-tasks go by ``ON DELETE CASCADE``.
    """
    out = []
    for table in (working_memory, task_contexts):
        belongs = sa.exists().where(
            plans.c.tenant_id == table.c.tenant_id, plans.c.plan_id == table.c.plan_id, owned
        )
        out.append(sa.delete(table).where(belongs))
    return out


async def _update_plan(
    tx: StatementRunner, params: dict[str, Any], version: int | None
) -> Mapping[str, Any] | None:
    """Write a plan row if its stored version is ``version`` (any, for ``None``)."""
    if version is None:
        return await tx.fetchrow(UPDATE_PLAN_ANY_VERSION, params)
    return await tx.fetchrow(UPDATE_PLAN, {**params, "expected_version": version})


async def _plan_version(tx: StatementRunner, params: dict[str, Any]) -> int | None:
    row = await tx.fetchrow(GET_VERSION, params)
    return None if row is None else int(row["version"])


async def _set_plan_columns(
    conn: AsyncConnection,
    key: sa.ColumnElement[bool],
    values: dict[str, Any],
    version: int | None,
) -> Any:
    """Set ``values`` on a plan row if its stored version is ``version`` (any: ``None``)."""
    where = key if version is None else sa.and_(key, plans.c.version == version)
    stmt = sa.update(plans).where(where).values(**values).returning(*plans.c)
    row = (await conn.execute(stmt)).first()
    return None if row is None else row._mapping


async def _stored_version(conn: AsyncConnection, key: sa.ColumnElement[bool]) -> int | None:
    version: int | None = (await conn.execute(sa.select(plans.c.version).where(key))).scalar()
    return version


class SqlPlans(SqlBase):
    """Plan and plan-context part of the SQL store.

    The hot paths are few statements: a plan context is one row (its correlation ids
    included), so reads and by-correlation are a single ``SELECT`` outside any
    transaction, and a write is the version-guarded ``UPDATE``/upsert ``... RETURNING``
    the stored row, plus two statements keeping the correlation side table in step.
    """

    @cached_property
    def _upsert_plan(self) -> Any:
        stmt = self.insert(plans).values(
            tenant_id=_TENANT,
            plan_id=_PLAN_ID,
            **_BIND,
            version=1,
            created_at=_NOW,
            updated_at=_NOW,
        )
        return stmt.on_conflict_do_update(
            index_elements=[plans.c.tenant_id, plans.c.plan_id],
            set_={
                **{name: stmt.excluded[name] for name in _WRITTEN},
                "version": plans.c.version + 1,
                "updated_at": stmt.excluded.updated_at,
            },
        ).returning(*plans.c)

    @cached_property
    def _insert_new_plan(self) -> Any:
        return (
            self.insert(plans)
            .values(
                tenant_id=_TENANT,
                plan_id=_PLAN_ID,
                **_BIND,
                version=1,
                created_at=_NOW,
                updated_at=_NOW,
            )
            .on_conflict_do_nothing(index_elements=[plans.c.tenant_id, plans.c.plan_id])
            .returning(*plans.c)
        )

    @cached_property
    def _add_correlations(self) -> Any:
        return self.insert(plan_correlations).on_conflict_do_nothing(
            index_elements=[
                plan_correlations.c.tenant_id,
                plan_correlations.c.correlation_id,
                plan_correlations.c.plan_id,
            ]
        )

    async def save_plan(
        self,
        tenant: str,
        record: PlanContextRecord,
        *,
        expected_version: int | None = None,
        must_exist: bool = False,
    ) -> PlanContextRecord:
        # Duplicates would collide in the side table's primary key; first position wins.
        correlation_ids = list(dict.fromkeys(record.correlation_ids))
        params = {f"new_{name}": getattr(record, name) for name in _FIELDS}
        params["new_bookkeeping"] = stored_bookkeeping(record)
        params.update(
            new_status=record.status.value,
            new_correlation_ids=correlation_ids,
            key_tenant=tenant,
            key_plan_id=record.plan_id,
            now=utcnow(),
        )
        async with self.writing() as tx:
            row = await versioned_write(
                expected_version=expected_version,
                must_exist=must_exist,
                upsert=lambda: tx.fetchrow(self._upsert_plan, params),
                create=lambda: tx.fetchrow(self._insert_new_plan, params),
                update=lambda version: _update_plan(tx, params, version),
                current_version=lambda: _plan_version(tx, params),
                not_found=lambda: _plan_not_found(record.plan_id),
            )
            await self._sync_correlations(tx, tenant, record.plan_id, correlation_ids)
            return record_from_row(row)

    async def _sync_correlations(
        self, tx: StatementRunner, tenant: str, plan_id: str, correlation_ids: list[str]
    ) -> None:
        """Make the side table hold exactly ``correlation_ids`` for the plan.

        Deletes the ids no longer listed and inserts the new ones; ids kept from the last
        write are left alone (the usual case: a transition rarely changes them). The side
        table's ``position`` is the order at first insert; readers take the order from
        the plan row's ``correlation_ids``.
        """
        drop = DROP_UNLISTED_CORRELATIONS_PG if self._pg else DROP_UNLISTED_CORRELATIONS
        await tx.execute(
            drop, {"key_tenant": tenant, "key_plan_id": plan_id, "keep": correlation_ids}
        )
        if correlation_ids:
            await tx.executemany(
                self._add_correlations,
                [
                    {
                        "tenant_id": tenant,
                        "plan_id": plan_id,
                        "correlation_id": cid,
                        "position": position,
                    }
                    for position, cid in enumerate(correlation_ids)
                ],
            )

    async def create_plan(self, tenant: str, plan: PlanCreate) -> PlanContextRecord:
        plan_id = plan.plan_id or str(uuid.uuid4())
        now = utcnow()
        async with self.engine.begin() as conn:
            stmt = (
                self.insert(plans)
                .values(
                    tenant_id=tenant,
                    plan_id=plan_id,
                    session_id=plan.session_id,
                    parent_plan_id=plan.parent_plan_id,
                    goal_event=plan.goal_event,
                    goal_data=plan.goal_data,
                    response_event=plan.response_event,
                    status=plan.status.value,
                    current_state=None,
                    state_machine={},
                    results={},
                    state={},
                    correlation_ids=[],
                    version=1,
                    created_at=now,
                    updated_at=now,
                )
                .on_conflict_do_nothing(index_elements=[plans.c.tenant_id, plans.c.plan_id])
                .returning(*plans.c)
            )
            row = (await conn.execute(stmt)).first()
            if row is None:
                raise Conflict(
                    f"plan {plan_id!r} already exists; omit plan_id to get a new one, or "
                    "update it with PUT /v1/memory/plans/{plan_id}",
                    details={"plan_id": plan_id},
                )
            return record_from_row(row._mapping)

    async def get_plan(self, tenant: str, plan_id: str) -> PlanContextRecord:
        row = await self.fetch_row(GET_PLAN, {"key_tenant": tenant, "key_plan_id": plan_id})
        if row is None:
            raise _plan_not_found(plan_id)
        return record_from_row(row)

    async def get_plan_by_correlation(self, tenant: str, correlation_id: str) -> PlanContextRecord:
        row = await self.fetch_row(
            BY_CORRELATION, {"key_tenant": tenant, "correlation_id": correlation_id}
        )
        if row is None:
            raise PlanNotFound(
                f"no plan has id or correlation id {correlation_id!r}",
                details={"correlation_id": correlation_id},
            )
        return record_from_row(row)

    async def update_plan_status(
        self,
        tenant: str,
        plan_id: str,
        *,
        status: PlanStatus | None,
        expected_version: int | None = None,
    ) -> PlanContextRecord:
        key = _key(tenant, plan_id)
        values: dict[str, Any] = {"version": plans.c.version + 1, "updated_at": utcnow()}
        if status is not None:
            values["status"] = status.value
        async with self.engine.begin() as conn:
            row = await versioned_update(
                lambda version: _set_plan_columns(conn, key, values, version),
                expected_version=expected_version,
                current_version=lambda: _stored_version(conn, key),
                not_found=lambda: _plan_not_found(plan_id),
            )
            return record_from_row(row)

    async def list_plans(
        self,
        tenant: str,
        *,
        statuses: list[PlanStatus] | None = None,
        session_id: str | None = None,
        parent_plan_id: str | None = None,
        limit: int = 100,
    ) -> list[PlanSummary]:
        query = sa.select(*_SUMMARY_COLUMNS).where(plans.c.tenant_id == tenant)
        if statuses:
            query = query.where(plans.c.status.in_([s.value for s in statuses]))
        if session_id is not None:
            query = query.where(plans.c.session_id == session_id)
        if parent_plan_id is not None:
            query = query.where(plans.c.parent_plan_id == parent_plan_id)
        query = query.order_by(plans.c.updated_at.desc(), plans.c.plan_id).limit(limit)
        async with self.reading() as conn:
            return [summary_from_row(row) for row in await conn.execute(query)]

    async def delete_plan(self, tenant: str, plan_id: str) -> None:
        async with self.engine.begin() as conn:
            # Same lock order as pruning (the plan's data, then the plan row) so the two
            # never deadlock on Postgres; a missing plan rolls the data deletes back.
            for table in (working_memory, task_contexts):
                await conn.execute(
                    sa.delete(table).where(table.c.tenant_id == tenant, table.c.plan_id == plan_id)
                )
            deleted = await conn.execute(sa.delete(plans).where(_key(tenant, plan_id)))
            if deleted.rowcount == 0:
                raise _plan_not_found(plan_id)

    async def prune_finished_plans(self, *, updated_before: datetime) -> int:
        old = sa.and_(
            plans.c.status.in_([s.value for s in FINISHED_PLAN_STATUSES]),
            plans.c.updated_at < updated_before,
        )
        async with self.engine.begin() as conn:
            for stmt in plan_data_deletes(old):
                await conn.execute(stmt)
            deleted = await conn.execute(sa.delete(plans).where(old))
            return int(deleted.rowcount)
