"""The storage interface the routes depend on (injected by the app's lifespan).

One SQL implementation (:class:`memory_service.sql.SqlMemoryStore`) serves both SQLite and
PostgreSQL. Every method takes the caller's ``tenant`` first: no record is reachable
without it, and a record of another tenant behaves exactly like a missing one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from soorma_common.memory import (
    PlanContextRecord,
    PlanCreate,
    PlanStatus,
    PlanSummary,
    SessionCreate,
    SessionSummary,
    SubTaskResultRequest,
    TaskContextRecord,
    WorkingMemoryItem,
)


class MemoryStore(Protocol):
    """Task/plan contexts, plans, sessions and working memory, scoped by tenant.

    Writes that carry ``expected_version`` fail with ``VersionConflict`` when the stored
    version differs (``0`` means "must not exist yet"); writes without it bump the
    version. Missing records raise the matching ``*NotFound`` domain error.
    """

    # task contexts
    async def save_task(
        self,
        tenant: str,
        record: TaskContextRecord,
        *,
        expected_version: int | None = None,
        must_exist: bool = False,
    ) -> TaskContextRecord: ...
    async def get_task(self, tenant: str, task_id: str) -> TaskContextRecord: ...
    async def get_task_by_sub_task(self, tenant: str, sub_task_id: str) -> TaskContextRecord: ...
    async def record_sub_task_result(
        self, tenant: str, task_id: str, sub_task_id: str, result: SubTaskResultRequest
    ) -> TaskContextRecord: ...
    async def delete_task(self, tenant: str, task_id: str) -> None: ...

    # plans and plan contexts (one record: the context is the plan's full state)
    async def save_plan(
        self,
        tenant: str,
        record: PlanContextRecord,
        *,
        expected_version: int | None = None,
        must_exist: bool = False,
    ) -> PlanContextRecord: ...
    async def create_plan(self, tenant: str, plan: PlanCreate) -> PlanContextRecord: ...
    async def get_plan(self, tenant: str, plan_id: str) -> PlanContextRecord: ...
    async def get_plan_by_correlation(
        self, tenant: str, correlation_id: str
    ) -> PlanContextRecord: ...
    async def update_plan_status(
        self,
        tenant: str,
        plan_id: str,
        *,
        status: PlanStatus | None,
        expected_version: int | None = None,
    ) -> PlanContextRecord: ...
    async def list_plans(
        self,
        tenant: str,
        *,
        statuses: list[PlanStatus] | None = None,
        session_id: str | None = None,
        parent_plan_id: str | None = None,
        limit: int = 100,
    ) -> list[PlanSummary]: ...
    async def delete_plan(self, tenant: str, plan_id: str) -> None: ...

    # sessions
    async def create_session(self, tenant: str, session: SessionCreate) -> SessionSummary: ...
    async def get_session(self, tenant: str, session_id: str) -> SessionSummary: ...
    async def list_sessions(self, tenant: str, *, limit: int = 100) -> list[SessionSummary]: ...
    async def delete_session(self, tenant: str, session_id: str) -> None: ...

    # working memory
    async def put_memory(
        self, tenant: str, plan_id: str, key: str, value: Any
    ) -> WorkingMemoryItem: ...
    async def get_memory(self, tenant: str, plan_id: str, key: str) -> WorkingMemoryItem: ...
    async def list_memory(self, tenant: str, plan_id: str) -> list[WorkingMemoryItem]: ...
    async def delete_memory(self, tenant: str, plan_id: str, key: str) -> None: ...
    async def clear_memory(self, tenant: str, plan_id: str) -> int: ...

    # housekeeping
    async def prune_finished_plans(self, *, updated_before: datetime) -> int: ...
    async def ping(self) -> None: ...
    async def close(self) -> None: ...
