"""The gateway's task store: a2a-sdk's versioned SQL store, with fewer round trips per task.

Built on a2a-sdk's ``VersionedTaskStore`` extension point and on the tables and row format
of its ``VersionedDatabaseTaskStore`` (which it delegates to for listing, deleting and
cancel writes), so a2a-sdk reads what this store writes and the other way round.

What it saves against the SDK's store, per task:

- **No reads of a task the gateway just created.** The gateway generates a new task's id
  itself (:class:`NewTaskIdBuilder`); until that task's first save, a read of it from the
  same request answers "absent" without asking the database (the SDK reads a new task
  three times before its first write).
- **One transaction per write, no read inside it.** A first write inserts the version,
  task and event rows; a later one compare-and-swaps the version row, updates the task row
  and inserts the event rows (the SDK's ``session.merge`` reads the row first).
- **Deferred first write for blocking sends** (``SOORMA_GATEWAY_WRITE_DELAY_SECONDS``,
  default 0.5 s; 0 turns it off). The client of a blocking ``SendMessage`` learns the
  task id only with the answer, so the task's writes are kept in memory and written
  together — with its route — in one transaction when the task ends or asks for input, or
  when the delay has passed, whichever is first. A task answered within the delay costs
  one transaction. Reads on this replica see the pending state; another replica sees the
  task once it is written (at most the delay later); a replica that dies inside the delay
  loses a task its client never learnt the id of (the client's request fails).

``SOORMA_GATEWAY_FAST_TASK_STORE=false`` (``accelerated=False``) turns all three off: every
read and write goes to a2a-sdk's ``VersionedDatabaseTaskStore`` as is
(``tests/gateway/test_gateway_taskstore_switch.py`` runs the same tasks both ways).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from a2a.server.agent_execution import RequestContext, SimpleRequestContextBuilder
from a2a.server.cluster import VersionedDatabaseTaskStore
from a2a.server.cluster.task_store import (
    ConcurrentTaskModificationError,
    StoredTask,
    VersionedTaskStore,
)
from a2a.server.cluster.version import TaskVersion
from a2a.server.context import ServerCallContext
from a2a.server.events.event_queue import Event
from a2a.server.models import TaskEventModel, TaskModel, TaskVersionModel
from a2a.server.owner_resolver import OwnerResolver
from a2a.types.a2a_pb2 import (
    ListTasksRequest,
    ListTasksResponse,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.proto_utils import to_stream_response
from google.protobuf.json_format import MessageToDict
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from gateway_a2a.models import routes as routes_table
from gateway_a2a.request_state import request_state

logger = logging.getLogger(__name__)


TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
    }
)
# States a client acts on: written at once.
SETTLED = TERMINAL | {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}
MAX_ATTEMPTS = 5
RETRY_DELAY_S = 0.02
TRANSIENT_CODES = frozenset({"40P01", "40001"})

TASKS = TaskModel.__table__
VERSIONS = TaskVersionModel.__table__
EVENTS = TaskEventModel.__table__


def _transient(error: DBAPIError) -> bool:
    return (
        isinstance(error, OperationalError)
        or getattr(error.orig, "sqlstate", None) in TRANSIENT_CODES
    )


def task_row(task: Task, owner: str) -> dict[str, Any]:
    """The ``tasks`` row of ``task``, in a2a-sdk's ``DatabaseTaskStore`` format."""
    return {
        "id": task.id,
        "context_id": task.context_id,
        "kind": "task",
        "owner": owner,
        "last_updated": (
            task.status.timestamp.ToDatetime() if task.status.HasField("timestamp") else None
        ),
        "status": MessageToDict(task.status),
        "artifacts": [MessageToDict(a) for a in task.artifacts],
        "history": [MessageToDict(m) for m in task.history],
        "metadata": MessageToDict(task.metadata) if task.metadata.fields else None,
        "protocol_version": "1.0",
    }


@dataclass(slots=True)
class _Write:
    """Writes of one task not yet in the database (or being written now)."""

    task_id: str
    owner: str
    base: int  # the stored version these writes start from (0: not stored yet)
    version: int = 0
    task: Task | None = None
    events: list[tuple[int, bytes]] = field(default_factory=list)
    route: dict[str, Any] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    timer: asyncio.Task[None] | None = None
    done: bool = False

    def apply(self, task: Task, event: Event | None) -> None:
        self.version += 1
        snapshot = Task()
        snapshot.CopyFrom(task)  # the SDK keeps mutating the task it saved
        self.task = snapshot
        if event is not None:
            self.events.append((self.version, to_stream_response(event).SerializeToString()))


class GatewayTaskStore(VersionedTaskStore):
    """See the module docstring."""

    def __init__(
        self,
        engine: AsyncEngine,
        owner_resolver: OwnerResolver,
        write_delay_seconds: float = 0.5,
        *,
        accelerated: bool = True,
    ) -> None:
        self.accelerated = accelerated
        self.engine = engine
        self.postgres = engine.dialect.name == "postgresql"
        self.owner_resolver = owner_resolver
        self.write_delay = write_delay_seconds
        self.sdk = VersionedDatabaseTaskStore(
            engine, create_table=False, owner_resolver=owner_resolver
        )
        self._pending: dict[str, _Write] = {}

    # -- reads ---------------------------------------------------------------------------

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        if not self.accelerated:
            return await self.sdk.get(task_id, context)
        owner = self.owner_resolver(context)
        pending = self._pending.get(task_id)
        if pending is not None and pending.owner == owner and pending.task is not None:
            snapshot = Task()
            snapshot.CopyFrom(pending.task)
            return StoredTask(snapshot, TaskVersion(pending.version))
        if request_state(context).fresh_task(task_id):
            return None  # generated by this request and not saved yet
        return await self.sdk.get(task_id, context)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        return await self.sdk.list(params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        self._pending.pop(task_id, None)
        await self.sdk.delete(task_id, context)

    # -- writes --------------------------------------------------------------------------

    def defer_route(self, context: ServerCallContext, task_id: str, values: dict[str, Any]) -> bool:
        """Keep a new task's route for its first write; False: insert it now instead."""
        pending = self._pending.get(task_id)
        if pending is None and not self._defers(context, task_id):
            return False
        (pending or self._entry(task_id, self.owner_resolver(context))).route = values
        return True

    def forget(self, task_id: str) -> bool:
        """Drop a task never announced (its agent answered with a message); False: its
        route, if any, is already in the database."""
        pending = self._pending.pop(task_id, None)
        if pending is None:
            return False
        pending.done = True
        if pending.timer is not None:
            pending.timer.cancel()
        return True

    async def update_route(self, task_id: str, values: dict[str, Any]) -> bool:
        """Change a route not written yet; False: it is in the database (update it there)."""
        pending = self._pending.get(task_id)
        if pending is None:
            return False
        async with pending.lock:
            if pending.done or pending.route is None:
                return False
            pending.route.update(values)
            return True

    async def save(
        self,
        task: Task,
        *,
        event: Event | None = None,
        prev: Task | None = None,
        prev_version: TaskVersion,
        context: ServerCallContext,
    ) -> TaskVersion:
        del prev
        if not self.accelerated:
            return await self.sdk.save(
                task, event=event, prev_version=prev_version, context=context
            )
        owner = self.owner_resolver(context)
        pending = self._pending.get(task.id)
        if pending is None and prev_version.is_missing and self._defers(context, task.id):
            pending = self._entry(task.id, owner)
        state = request_state(context)
        if state.new_task_id == task.id:
            state.new_task_saved = True
        if pending is not None:
            async with pending.lock:
                if not pending.done:
                    return await self._save_pending(pending, task, event, prev_version)
        if task.status.state == TaskState.TASK_STATE_CANCELED:
            # Cancel overwrites any non-terminal version: the SDK's own rules.
            return await self.sdk.save(
                task, event=event, prev_version=prev_version, context=context
            )
        write = _Write(
            task_id=task.id,
            owner=owner,
            base=0 if prev_version.is_missing else _as_int(prev_version),
        )
        write.version = write.base
        write.apply(task, event)
        await self._write(write)
        return TaskVersion(write.version)

    def _defers(self, context: ServerCallContext, task_id: str) -> bool:
        state = request_state(context)
        return (
            self.accelerated
            and self.write_delay > 0
            and state.defer_writes
            and state.fresh_task(task_id)
        )

    def _entry(self, task_id: str, owner: str) -> _Write:
        pending = self._pending.get(task_id)
        if pending is None:
            pending = self._pending[task_id] = _Write(task_id=task_id, owner=owner, base=0)
            pending.timer = asyncio.create_task(self._write_later(pending))
        return pending

    async def _save_pending(
        self, pending: _Write, task: Task, event: Event | None, prev_version: TaskVersion
    ) -> TaskVersion:
        if prev_version != TaskVersion(pending.version):
            raise ConcurrentTaskModificationError(task.id)
        before = (pending.version, pending.task, len(pending.events))
        pending.apply(task, event)
        if task.status.state in SETTLED:
            try:
                await self._write_pending(pending)
            except Exception:
                # Not applied: the caller keeps the version it had (the timer retries).
                pending.version, pending.task = before[0], before[1]
                del pending.events[before[2] :]
                raise
        return TaskVersion(pending.version)

    async def _write_later(self, pending: _Write, attempt: int = 1) -> None:
        await asyncio.sleep(self.write_delay * attempt)
        async with pending.lock:
            if pending.done:
                return
            try:
                await self._write_pending(pending)
            except Exception as exc:
                if attempt >= MAX_ATTEMPTS:
                    logger.error("gateway: task %s could not be written: %s", pending.task_id, exc)
                    self._pending.pop(pending.task_id, None)
                    return
                # Still pending: the task's next change writes it, or the next try does.
                logger.warning(
                    "gateway: deferred write of task %s failed (%s); retrying",
                    pending.task_id,
                    exc,
                )
                pending.timer = asyncio.create_task(self._write_later(pending, attempt + 1))

    async def _write_pending(self, pending: _Write) -> None:
        """Write what ``pending`` holds (the caller holds its lock)."""
        await self._write(pending)
        pending.done = True
        self._pending.pop(pending.task_id, None)
        timer = pending.timer
        if timer is not None and timer is not asyncio.current_task():
            timer.cancel()

    async def flush(self) -> None:
        """Write every pending task now (at shutdown)."""
        for pending in list(self._pending.values()):
            async with pending.lock:
                if not pending.done:
                    with contextlib.suppress(Exception):
                        await self._write_pending(pending)

    async def _write(self, write: _Write) -> None:
        if write.route is not None and write.task is not None:
            # A task that ended before its route was written needs no routing (and no
            # takeover): the route is written finished, at no extra cost.
            write.route["finished"] = write.task.status.state in TERMINAL
        attempts = 0
        while True:
            attempts += 1
            try:
                if self.postgres and write.base == 0:
                    await self._insert_all(write)
                else:
                    async with self.engine.begin() as conn:
                        await self._write_once(conn, write)
                return
            except DBAPIError as exc:
                if exc.connection_invalidated and attempts < MAX_ATTEMPTS:
                    continue  # a pooled connection the server dropped: on a new one
                if isinstance(exc, IntegrityError) or not _transient(exc):
                    if isinstance(exc, IntegrityError):
                        raise ConcurrentTaskModificationError(write.task_id) from exc
                    raise
                if attempts >= MAX_ATTEMPTS:
                    raise
                await asyncio.sleep(RETRY_DELAY_S * attempts)

    async def _insert_all(self, write: _Write) -> None:
        """A first write on PostgreSQL: every row in one statement (one round trip).

        The inserts of the route, version and task rows are data-modifying CTEs of the
        events' insert; one statement is atomic without BEGIN/COMMIT round trips.
        """
        task = write.task
        events = write.events if task is not None else []
        if write.route is None and task is None:
            return
        params: dict[str, Any] = {}
        if write.route is not None:
            params.update({f"r_{k}": v for k, v in write.route.items()})
            params["r_updated_at"] = datetime.now(UTC)
        if task is not None:
            params.update({f"k_{k}": v for k, v in task_row(task, write.owner).items()})
            params["v_version"] = write.version
        for i, (version, data) in enumerate(events):
            params[f"e{i}_version"], params[f"e{i}_data"] = version, data
        statement = _first_write(write.route is not None, task is not None, len(events))
        async with self.engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(statement, params)

    async def _write_once(self, conn: AsyncConnection, write: _Write) -> None:
        if write.route is not None:
            await conn.execute(
                sa.insert(routes_table).values(**write.route, updated_at=datetime.now(UTC))
            )
        task = write.task
        if task is None:
            return
        # Version row first (the SDK's lock order), then the task row, then the events.
        if write.base == 0:
            await conn.execute(
                sa.insert(VERSIONS).values(
                    task_id=task.id, owner=write.owner, version=write.version
                )
            )
            await conn.execute(sa.insert(TASKS).values(**task_row(task, write.owner)))
        else:
            done = await conn.execute(
                sa.update(VERSIONS)
                .where(
                    VERSIONS.c.task_id == task.id,
                    VERSIONS.c.owner == write.owner,
                    VERSIONS.c.version == write.base,
                )
                .values(version=write.version)
            )
            if done.rowcount == 0:
                raise ConcurrentTaskModificationError(task.id)
            row = task_row(task, write.owner)
            del row["id"], row["owner"]
            await conn.execute(
                sa.update(TASKS)
                .where(TASKS.c.id == task.id, TASKS.c.owner == write.owner)
                .values(**row)
            )
        if write.events:
            await conn.execute(
                sa.insert(EVENTS),
                [
                    {
                        "task_id": task.id,
                        "owner": write.owner,
                        "task_version": version,
                        "event_data": data,
                    }
                    for version, data in write.events
                ],
            )


@functools.cache
def _first_write(route: bool, task: bool, events: int) -> Any:
    """The one statement of a first write, by shape (compiled once, then cached)."""

    def bind(prefix: str, table: sa.Table) -> dict[str, Any]:
        return {c.name: sa.bindparam(f"{prefix}_{c.name}", type_=c.type) for c in table.c}

    ctes: list[Any] = []
    if route:
        ctes.append(sa.insert(routes_table).values(bind("r", routes_table)).cte("route_row"))
    if task:
        ctes.append(
            sa.insert(VERSIONS)
            .values(
                task_id=sa.bindparam("k_id", type_=TASKS.c.id.type),
                owner=sa.bindparam("k_owner", type_=TASKS.c.owner.type),
                version=sa.bindparam("v_version", type_=VERSIONS.c.version.type),
            )
            .cte("version_row")
        )
        ctes.append(sa.insert(TASKS).values(bind("k", TASKS)).cte("task_row"))
    # One single-row insert per event (a multi-row VALUES is not cached by SQLAlchemy).
    inserts = [
        sa.insert(EVENTS).values(
            task_id=sa.bindparam("k_id", type_=TASKS.c.id.type),
            owner=sa.bindparam("k_owner", type_=TASKS.c.owner.type),
            task_version=sa.bindparam(f"e{i}_version", type_=EVENTS.c.task_version.type),
            event_data=sa.bindparam(f"e{i}_data", type_=EVENTS.c.event_data.type),
        )
        for i in range(events if task else 0)
    ]
    ctes += [insert.cte(f"event_row_{i}") for i, insert in enumerate(inserts[:-1])]
    main: Any = inserts[-1] if inserts else sa.select(sa.literal(1))
    for cte in ctes:
        main = main.add_cte(cte)
    return main


def _as_int(version: TaskVersion) -> int:
    value = version._value  # the SDK's own stores read it the same way
    if not isinstance(value, int):
        raise TypeError(f"integer task versions expected, got {type(value).__name__}")
    return value


class NewTaskIdBuilder(SimpleRequestContextBuilder):
    """a2a-sdk's request context builder; the id of a new task is recorded in the call state.

    So :class:`GatewayTaskStore` knows that nothing is stored under that id yet, and
    ``on_new`` (if given) hears of the new task and its request.
    """

    def __init__(self, on_new: Callable[[str, SendMessageRequest], None] | None = None) -> None:
        super().__init__()
        self.on_new = on_new

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        if params is not None and not task_id and not params.message.task_id:
            state = request_state(context)
            task_id = state.preset_task_id or str(uuid.uuid4())
            state.new_task_id = task_id
            if self.on_new is not None:
                self.on_new(task_id, params)
        return await super().build(context, params, task_id, context_id, task)
