"""The registry store on SQLAlchemy async: one code path for SQLite and PostgreSQL.

Event ownership rule:

- An agent owns the events its capabilities declare. When it registers, it takes over an
  event that is new, unowned, already its own, or owned by an agent that is not live; a
  live owner keeps its definition.
- When an owner is deregistered or expires (purge), each event it owns passes to another
  live agent that declares the same name (capability or plain ``events_*`` name), the most
  recently heartbeating one; with no such agent the event is deleted. The same happens to
  an owned event the agent stops declaring when it re-registers.
- Events registered through ``POST /v1/events`` without an owner are never removed
  automatically.

Concurrency: every transaction that can change ownership (register, deregister, purge,
event upsert) is serialized per tenant, so two of them never decide on stale reads (e.g.
hand an event to an agent that is being deleted at the same moment). On PostgreSQL that
is a transaction-scoped advisory lock per tenant; SQLite has a single writer, and each of
these transactions starts with a write so it holds that lock before it reads anything.

(Over 400 lines: agents, their capability index and event definitions change in the same
transactions under the lock described above, so their statements live together.)
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from registry_service import models as m
from registry_service.store import MatchMode
from registry_service.validation import check_agent, check_event
from soorma_common.errors import AgentNotFound, EventDefinitionNotFound
from soorma_common.registry import AgentDefinition, EventDefinition

Clock = Callable[[], float]

_EVENT_COLUMNS = ("topic", "description", "payload_schema", "response_schema", "owner_agent_id")


def _upsert(
    conn: AsyncConnection,
    table: sa.Table,
    values: dict[str, Any],
    keys: Sequence[str],
    update: Iterable[str],
) -> Any:
    # INSERT ... ON CONFLICT has the same shape on both engines, only the import differs.
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    stmt = insert(table).values(values)
    return stmt.on_conflict_do_update(
        index_elements=list(keys), set_={c: stmt.excluded[c] for c in update}
    )


async def _lock_tenant(conn: AsyncConnection, tenant_id: str) -> None:
    """Serialize this tenant's ownership-changing transactions (see module docstring)."""
    if conn.dialect.name == "postgresql":
        await conn.execute(
            sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
            {"key": f"soorma-registry:{tenant_id}"},
        )


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


def _normalized(agent: AgentDefinition) -> dict[str, Any]:
    """The definition as stored: capability events owned by the agent, names merged."""
    capabilities = [
        cap.model_copy(
            update={
                "consumed_event": cap.consumed_event.model_copy(
                    update={"owner_agent_id": agent.agent_id}
                ),
                "produced_events": [
                    e.model_copy(update={"owner_agent_id": agent.agent_id})
                    for e in cap.produced_events
                ],
            }
        )
        for cap in agent.capabilities
    ]
    # Plain names and capability events answer the same filters, so expose them together.
    consumed = _unique(
        [*agent.events_consumed, *(c.consumed_event.event_name for c in capabilities)]
    )
    produced = _unique(
        [*agent.events_produced, *(e.event_name for c in capabilities for e in c.produced_events)]
    )
    normal = agent.model_copy(
        update={
            "capabilities": capabilities,
            "events_consumed": consumed,
            "events_produced": produced,
        }
    )
    return normal.model_dump(mode="json", exclude={"tenant_id", "last_heartbeat"})


def _agent_from_row(row: Row[Any]) -> AgentDefinition:
    return AgentDefinition.model_validate(
        {
            **row.definition,
            "ttl_seconds": row.ttl_seconds,
            "tenant_id": row.tenant_id,
            "last_heartbeat": datetime.fromtimestamp(row.last_heartbeat, UTC),
        }
    )


def _event_from_row(row: Row[Any]) -> EventDefinition:
    return EventDefinition(
        event_name=row.event_name,
        topic=row.topic,
        description=row.description,
        payload_schema=row.payload_schema,
        response_schema=row.response_schema,
        owner_agent_id=row.owner_agent_id,
    )


class SqlRegistryStore:
    """:class:`~registry_service.store.RegistryStore` on an async SQLAlchemy engine.

    The schema must already be migrated (``servicekit.db.migrate``); the store does not
    create tables. ``clock`` returns epoch seconds and decides liveness.
    """

    def __init__(self, *, engine: AsyncEngine, clock: Clock = time.time) -> None:
        self._engine = engine
        self._clock = clock

    # -- agents ---------------------------------------------------------------------------

    async def upsert_agent(
        self, tenant_id: str, agent: AgentDefinition
    ) -> tuple[AgentDefinition, bool]:
        declared = check_agent(agent)
        definition = _normalized(agent)
        now = self._clock()
        nonce = uuid.uuid4().hex
        async with self._engine.begin() as conn:
            await _lock_tenant(conn, tenant_id)
            # The upsert is the transaction's first write, so on SQLite it also takes the
            # writer lock before anything below reads.
            upsert = _upsert(
                conn,
                m.agents,
                {
                    "tenant_id": tenant_id,
                    "agent_id": agent.agent_id,
                    "name": agent.name,
                    "definition": definition,
                    "ttl_seconds": agent.ttl_seconds,
                    "registration_id": nonce,
                    "registered_at": now,
                    "last_heartbeat": now,
                    "expires_at": now + agent.ttl_seconds,
                },
                ("tenant_id", "agent_id"),
                ("name", "definition", "ttl_seconds", "last_heartbeat", "expires_at"),
            )
            created = (
                await conn.execute(upsert.returning(m.agents.c.registration_id))
            ).scalar_one() == nonce
            previously_declared = set(
                (
                    await conn.execute(
                        sa.select(m.agent_events.c.event_name).where(
                            m.agent_events.c.tenant_id == tenant_id,
                            m.agent_events.c.agent_id == agent.agent_id,
                        )
                    )
                ).scalars()
            )
            await self._replace_index(conn, tenant_id, agent.agent_id, definition)
            await self._claim_events(conn, tenant_id, agent.agent_id, declared, now)
            now_declared = set(definition["events_consumed"]) | set(definition["events_produced"])
            dropped = previously_declared - now_declared
            if dropped:
                await self._release_events(
                    conn, tenant_id, [agent.agent_id], now, only_names=dropped
                )
            row = await self._agent_row(conn, tenant_id, agent.agent_id)
        assert row is not None
        return _agent_from_row(row), created

    async def _replace_index(
        self, conn: AsyncConnection, tenant_id: str, agent_id: str, definition: dict[str, Any]
    ) -> None:
        for table in (m.agent_capabilities, m.agent_events):
            await conn.execute(
                sa.delete(table).where(table.c.tenant_id == tenant_id, table.c.agent_id == agent_id)
            )
        task_names = _unique(cap["task_name"] for cap in definition["capabilities"])
        if task_names:
            await conn.execute(
                sa.insert(m.agent_capabilities),
                [
                    {"tenant_id": tenant_id, "agent_id": agent_id, "task_name": t}
                    for t in task_names
                ],
            )
        rows = [
            {"tenant_id": tenant_id, "agent_id": agent_id, "direction": direction, "event_name": n}
            for direction, names in (
                (m.CONSUMED, definition["events_consumed"]),
                (m.PRODUCED, definition["events_produced"]),
            )
            for n in names
        ]
        if rows:
            await conn.execute(sa.insert(m.agent_events), rows)

    async def _live_agent_ids(
        self, conn: AsyncConnection, tenant_id: str, agent_ids: Iterable[str], now: float
    ) -> set[str]:
        ids = [a for a in set(agent_ids) if a]
        if not ids:
            return set()
        result = await conn.execute(
            sa.select(m.agents.c.agent_id).where(
                m.agents.c.tenant_id == tenant_id,
                m.agents.c.agent_id.in_(ids),
                m.agents.c.expires_at > now,
            )
        )
        return set(result.scalars())

    async def _claim_events(
        self,
        conn: AsyncConnection,
        tenant_id: str,
        agent_id: str,
        declared: list[EventDefinition],
        now: float,
    ) -> None:
        if not declared:
            return
        owners = dict(
            (
                await conn.execute(
                    sa.select(m.events.c.event_name, m.events.c.owner_agent_id).where(
                        m.events.c.tenant_id == tenant_id,
                        m.events.c.event_name.in_([e.event_name for e in declared]),
                    )
                )
            ).all()
        )
        live = await self._live_agent_ids(
            conn, tenant_id, (o for o in owners.values() if o and o != agent_id), now
        )
        # One lock order (by name) for every writer, so concurrent registrations that
        # declare overlapping events cannot deadlock on PostgreSQL.
        for event in sorted(declared, key=lambda e: e.event_name):
            owner = owners.get(event.event_name)
            if owner and owner != agent_id and owner in live:
                continue  # a live owner keeps its definition
            await self._write_event(conn, tenant_id, event, now)

    async def _release_events(
        self,
        conn: AsyncConnection,
        tenant_id: str,
        agent_ids: Sequence[str],
        now: float,
        *,
        only_names: Iterable[str] | None = None,
    ) -> None:
        """Hand the events these agents own to another live declarer, or delete them."""
        query = sa.select(m.events.c.event_name).where(
            m.events.c.tenant_id == tenant_id, m.events.c.owner_agent_id.in_(list(agent_ids))
        )
        if only_names is not None:
            query = query.where(m.events.c.event_name.in_(list(only_names)))
        owned = sorted((await conn.execute(query)).scalars())
        if not owned:
            return
        candidates = await conn.execute(
            sa.select(m.agent_events.c.event_name, m.agents.c.agent_id)
            .join(
                m.agents,
                sa.and_(
                    m.agents.c.tenant_id == m.agent_events.c.tenant_id,
                    m.agents.c.agent_id == m.agent_events.c.agent_id,
                ),
            )
            .where(
                m.agent_events.c.tenant_id == tenant_id,
                m.agent_events.c.event_name.in_(owned),
                m.agents.c.agent_id.not_in(list(agent_ids)),
                m.agents.c.expires_at > now,
            )
            .order_by(m.agents.c.last_heartbeat.desc(), m.agents.c.agent_id)
        )
        successor: dict[str, str] = {}
        for event_name, candidate in candidates.all():
            successor.setdefault(event_name, candidate)
        for event_name in owned:
            where = sa.and_(m.events.c.tenant_id == tenant_id, m.events.c.event_name == event_name)
            if event_name in successor:
                await conn.execute(
                    sa.update(m.events)
                    .where(where)
                    .values(owner_agent_id=successor[event_name], updated_at=now)
                )
            else:
                await conn.execute(sa.delete(m.events).where(where))

    async def _agent_row(
        self, conn: AsyncConnection, tenant_id: str, agent_id: str
    ) -> Row[Any] | None:
        return (
            await conn.execute(
                sa.select(m.agents).where(
                    m.agents.c.tenant_id == tenant_id, m.agents.c.agent_id == agent_id
                )
            )
        ).first()

    async def get_agent(
        self, tenant_id: str, agent_id: str, *, include_expired: bool = False
    ) -> AgentDefinition:
        async with self._engine.connect() as conn:
            row = await self._agent_row(conn, tenant_id, agent_id)
        if row is None or (not include_expired and row.expires_at <= self._clock()):
            raise _agent_not_found(agent_id)
        return _agent_from_row(row)

    def _agents_query(self, tenant_id: str, include_expired: bool) -> sa.Select[Any]:
        query = sa.select(m.agents).where(m.agents.c.tenant_id == tenant_id)
        if not include_expired:
            query = query.where(m.agents.c.expires_at > self._clock())
        return query.order_by(m.agents.c.name, m.agents.c.agent_id)

    async def list_agents(
        self,
        tenant_id: str,
        *,
        name: str | None = None,
        consumed_event: str | None = None,
        produced_event: str | None = None,
        capability: str | None = None,
        include_expired: bool = False,
    ) -> list[AgentDefinition]:
        query = self._agents_query(tenant_id, include_expired)
        if name is not None:
            query = query.where(m.agents.c.name == name)
        if consumed_event is not None:
            query = query.where(_declares_event(m.CONSUMED, consumed_event))
        if produced_event is not None:
            query = query.where(_declares_event(m.PRODUCED, produced_event))
        if capability is not None:
            query = query.where(_has_capability(capability))
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_agent_from_row(r) for r in rows]

    async def discover(
        self, tenant_id: str, requirements: Sequence[str], *, match: MatchMode = "any"
    ) -> list[AgentDefinition]:
        query = self._agents_query(tenant_id, include_expired=False)
        conditions = [
            sa.or_(_has_capability(r), _declares_event(m.CONSUMED, r)) for r in requirements
        ]
        if conditions:
            query = query.where(sa.and_(*conditions) if match == "all" else sa.or_(*conditions))
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_agent_from_row(r) for r in rows]

    async def heartbeat(self, tenant_id: str, agent_id: str) -> AgentDefinition:
        now = self._clock()
        async with self._engine.begin() as conn:
            # Only a live agent can be extended: once expired, the SDK must re-register,
            # which re-announces its capabilities and events.
            row = (
                await conn.execute(
                    sa.update(m.agents)
                    .where(
                        m.agents.c.tenant_id == tenant_id,
                        m.agents.c.agent_id == agent_id,
                        m.agents.c.expires_at > now,
                    )
                    .values(last_heartbeat=now, expires_at=now + m.agents.c.ttl_seconds)
                    .returning(*m.agents.c)
                )
            ).first()
        if row is None:
            raise AgentNotFound(
                f"agent {agent_id!r} is not registered or has expired: register it again",
                details={"agent_id": agent_id},
            )
        return _agent_from_row(row)

    async def delete_agent(self, tenant_id: str, agent_id: str) -> None:
        now = self._clock()
        async with self._engine.begin() as conn:
            await _lock_tenant(conn, tenant_id)
            deleted = await conn.execute(
                sa.delete(m.agents).where(
                    m.agents.c.tenant_id == tenant_id, m.agents.c.agent_id == agent_id
                )
            )
            if deleted.rowcount == 0:
                raise _agent_not_found(agent_id)
            await self._release_events(conn, tenant_id, [agent_id], now)

    async def purge_expired(self) -> int:
        async with self._engine.connect() as conn:
            tenants = list(
                (
                    await conn.execute(
                        sa.select(m.agents.c.tenant_id)
                        .where(m.agents.c.expires_at <= self._clock())
                        .distinct()
                    )
                ).scalars()
            )
        purged = 0
        # One short transaction per tenant: each takes only its own tenant's lock.
        for tenant_id in tenants:
            now = self._clock()
            async with self._engine.begin() as conn:
                await _lock_tenant(conn, tenant_id)
                # DELETE ... RETURNING re-checks expiry under the lock: an agent that
                # re-registered in the meantime is not swept.
                gone = list(
                    (
                        await conn.execute(
                            sa.delete(m.agents)
                            .where(m.agents.c.tenant_id == tenant_id, m.agents.c.expires_at <= now)
                            .returning(m.agents.c.agent_id)
                        )
                    ).scalars()
                )
                if gone:
                    await self._release_events(conn, tenant_id, gone, now)
            purged += len(gone)
        return purged

    # -- events ---------------------------------------------------------------------------

    async def _write_event(
        self, conn: AsyncConnection, tenant_id: str, event: EventDefinition, now: float
    ) -> None:
        values = {
            "tenant_id": tenant_id,
            "event_name": event.event_name,
            "topic": event.topic,
            "description": event.description,
            "payload_schema": event.payload_schema,
            "response_schema": event.response_schema,
            "owner_agent_id": event.owner_agent_id,
            "created_at": now,
            "updated_at": now,
        }
        await conn.execute(
            _upsert(
                conn, m.events, values, ("tenant_id", "event_name"), (*_EVENT_COLUMNS, "updated_at")
            )
        )

    async def upsert_event(self, tenant_id: str, event: EventDefinition) -> EventDefinition:
        check_event(event)
        async with self._engine.begin() as conn:
            await _lock_tenant(conn, tenant_id)
            await self._write_event(conn, tenant_id, event, self._clock())
        return event

    async def get_event(self, tenant_id: str, event_name: str) -> EventDefinition:
        async with self._engine.connect() as conn:
            row = (
                await conn.execute(
                    sa.select(m.events).where(
                        m.events.c.tenant_id == tenant_id, m.events.c.event_name == event_name
                    )
                )
            ).first()
        if row is None:
            raise EventDefinitionNotFound(
                f"event {event_name!r} is not registered", details={"event_name": event_name}
            )
        return _event_from_row(row)

    async def list_events(
        self,
        tenant_id: str,
        *,
        topic: str | None = None,
        event_name: str | None = None,
        owner: str | None = None,
    ) -> list[EventDefinition]:
        query = sa.select(m.events).where(m.events.c.tenant_id == tenant_id)
        if topic is not None:
            query = query.where(m.events.c.topic == topic)
        if event_name is not None:
            query = query.where(m.events.c.event_name == event_name)
        if owner is not None:
            query = query.where(m.events.c.owner_agent_id == owner)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query.order_by(m.events.c.event_name))).all()
        return [_event_from_row(r) for r in rows]

    # -- lifecycle ------------------------------------------------------------------------

    async def ping(self) -> None:
        async with self._engine.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))

    async def close(self) -> None:
        await self._engine.dispose()


def _agent_not_found(agent_id: str) -> AgentNotFound:
    return AgentNotFound(f"agent {agent_id!r} not found", details={"agent_id": agent_id})


def _has_capability(task_name: str) -> sa.ColumnElement[bool]:
    cap = m.agent_capabilities.c
    return sa.exists().where(
        cap.tenant_id == m.agents.c.tenant_id,
        cap.agent_id == m.agents.c.agent_id,
        cap.task_name == task_name,
    )


def _declares_event(direction: str, event_name: str) -> sa.ColumnElement[bool]:
    ev = m.agent_events.c
    return sa.exists().where(
        ev.tenant_id == m.agents.c.tenant_id,
        ev.agent_id == m.agents.c.agent_id,
        ev.direction == direction,
        ev.event_name == event_name,
    )
