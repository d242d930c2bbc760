"""The gateway's database: a2a-sdk's stores on one engine, plus the task routes."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from a2a.server.cluster import DatabaseTaskEventStream
from a2a.server.context import ServerCallContext
from a2a.server.tasks import DatabasePushNotificationConfigStore
from sqlalchemy.ext.asyncio import AsyncEngine

from gateway_a2a.models import message_ids, routes
from gateway_a2a.request_state import request_state
from gateway_a2a.settings import Settings
from gateway_a2a.taskstore import GatewayTaskStore
from servicekit.db import database_url, is_sqlite, make_engine, migrate

MIGRATIONS = Path(__file__).parent / "migrations"
VERSION_TABLE = "gateway_alembic_version"
# A pooled connection unused for longer is pinged before use (a busy one is not).
IDLE_PING_SECONDS = 5.0


def tenant_of(context: ServerCallContext) -> str:
    """Owner of every stored task and push config: the authenticated caller's tenant.

    The gateway's auth middleware always sets it; a context without it owns nothing.
    """
    tenant = request_state(context).tenant_id
    if not tenant:
        raise PermissionError("no authenticated tenant on this call")
    return tenant


def tenant_context(tenant_id: str, user_id: str = "gateway") -> ServerCallContext:
    """A call context acting as ``tenant_id`` (the gateway's own writes for a task)."""
    context = ServerCallContext()
    state = request_state(context)
    state.tenant_id, state.user_id = tenant_id, user_id
    return context


@dataclass(slots=True)
class Route:
    """Where a task's events go and what it waits for."""

    task_id: str
    tenant_id: str
    user_id: str
    context_id: str
    skill: str
    request_event: str
    replica: str
    awaiting_event: str | None = None
    awaiting_topic: str | None = None
    awaiting_correlation: str | None = None
    finished: bool = False
    taken_over_at: datetime | None = None


class RouteStore:
    """CRUD on ``gateway_task_routes``."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def insert(self, route: Route) -> None:
        values = {**route_values(route), "updated_at": datetime.now(UTC)}
        async with self.engine.begin() as conn:
            await conn.execute(sa.insert(routes).values(**values))

    async def update(self, task_id: str, **values: Any) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(
                sa.update(routes)
                .where(routes.c.task_id == task_id)
                .values(updated_at=datetime.now(UTC), **values)
            )

    async def get(self, task_id: str) -> Route | None:
        async with self.engine.connect() as conn:
            row = (
                (await conn.execute(sa.select(routes).where(routes.c.task_id == task_id)))
                .mappings()
                .first()
            )
        return row_route(row) if row else None

    async def by_awaiting(self, correlation_id: str) -> Route | None:
        async with self.engine.connect() as conn:
            row = (
                (
                    await conn.execute(
                        sa.select(routes).where(routes.c.awaiting_correlation == correlation_id)
                    )
                )
                .mappings()
                .first()
            )
        return row_route(row) if row else None


class MessageIdStore:
    """Which task a client's message (its id within its context) started.

    A client that retries a send it got no answer for sends the same ``messageId``; the
    gateway answers with the task the first send started instead of starting another.
    Shared through the database, so a retry through another replica is recognised too.
    """

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def claim(self, tenant_id: str, context_id: str, message_id: str, task_id: str) -> str:
        """Record ``task_id`` for the message; the task id it has (an earlier one if seen)."""
        key = {"tenant_id": tenant_id, "context_id": context_id, "message_id": message_id}
        try:
            async with self.engine.begin() as conn:
                await conn.execute(
                    sa.insert(message_ids).values(
                        **key, task_id=task_id, created_at=datetime.now(UTC)
                    )
                )
            return task_id
        except sa.exc.IntegrityError:
            pass
        async with self.engine.connect() as conn:
            found = (
                await conn.execute(
                    sa.select(message_ids.c.task_id).where(
                        *(message_ids.c[name] == value for name, value in key.items())
                    )
                )
            ).scalar_one_or_none()
        return str(found) if found is not None else task_id

    async def release(self, tenant_id: str, context_id: str, message_id: str, task_id: str) -> None:
        """Forget the message (its send failed before it started a task)."""
        async with self.engine.begin() as conn:
            await conn.execute(
                sa.delete(message_ids).where(
                    message_ids.c.tenant_id == tenant_id,
                    message_ids.c.context_id == context_id,
                    message_ids.c.message_id == message_id,
                    message_ids.c.task_id == task_id,
                )
            )


def route_values(route: Route) -> dict[str, Any]:
    return {name: getattr(route, name) for name in Route.__slots__}


def row_route(row: Any) -> Route:
    return Route(**{name: row[name] for name in Route.__slots__})


@dataclass(slots=True)
class Stores:
    """Everything the gateway keeps in SQL, on one engine."""

    engine: AsyncEngine
    tasks: GatewayTaskStore
    events: DatabaseTaskEventStream
    push_configs: DatabasePushNotificationConfigStore
    routes: RouteStore
    message_ids: MessageIdStore

    async def ping(self) -> None:
        async with self.engine.connect() as conn:
            await conn.execute(sa.text("SELECT 1"))

    async def close(self) -> None:
        await self.tasks.flush()
        await self.engine.dispose()


def ping_idle_connections(engine: AsyncEngine) -> None:
    """Ping a pooled connection before use when it was idle for ``IDLE_PING_SECONDS``.

    A failed ping discards the connection and the pool opens another (SQLAlchemy's
    pessimistic disconnect handling, for idle connections only).
    """

    @sa.event.listens_for(engine.sync_engine, "checkin")
    def _checked_in(_dbapi: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @sa.event.listens_for(engine.sync_engine, "checkout")
    def _checked_out(dbapi: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get("idle_since")
        if since is not None and time.monotonic() - since > IDLE_PING_SECONDS:
            try:
                dbapi.ping()
            except Exception as exc:
                raise sa.exc.DisconnectionError(str(exc)) from exc


async def migrate_stores(stores: Stores) -> None:
    """Bring the schema to the latest migration (at start-up; safe to race)."""
    await migrate(stores.engine, MIGRATIONS, version_table=VERSION_TABLE)


def build_stores(settings: Settings) -> Stores:
    """a2a-sdk's stores on the gateway's engine (nothing connects until first use)."""
    url = database_url(settings, "gateway", settings.gateway_database_url)
    if is_sqlite(url):
        engine = make_engine(url)
    else:
        # A ping per checkout is one more round trip per statement under load: ping
        # only connections that sat idle (a restarted server closed those).
        engine = make_engine(url, pool_pre_ping=False)
        ping_idle_connections(engine)
    tasks = GatewayTaskStore(
        engine,
        tenant_of,
        settings.gateway_write_delay_seconds,
        accelerated=settings.gateway_fast_task_store,
    )
    events = DatabaseTaskEventStream(
        engine,
        create_table=False,
        poll_interval_s=settings.gateway_poll_interval_seconds,
    )
    push = DatabasePushNotificationConfigStore(engine, create_table=False, owner_resolver=tenant_of)
    return Stores(
        engine=engine,
        tasks=tasks,
        events=events,
        push_configs=push,
        routes=RouteStore(engine),
        message_ids=MessageIdStore(engine),
    )
