"""MemoryClient: the memory service from an agent (``context.memory``).

Task contexts (async workers), plan contexts and plans (planners), sessions and
plan-scoped working memory; and long-term memory through three views:
``context.memory.knowledge`` (semantic), ``.episodes`` (episodic) and ``.procedures``
(procedural), see docs/memory.md. Every call acts as the context's identity (inside a handler:
the tenant of the event being handled), so one tenant never sees another's records.

Return values are the ``soorma_common.memory`` DTOs. Failures raise the domain error the
service answered with (``VersionConflict``, ``PlanNotFound`` …); the ``get_*`` lookups
return ``None`` for a missing record instead, and the ``delete_*`` calls return ``False``.

(Over 400 lines: one thin, documented method per memory-service route — plans, tasks,
sessions, working memory, recorded answers — all sharing one request/error mapping.)
"""

from __future__ import annotations

import copy
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import quote

from pydantic import BaseModel

from soorma import _tracing
from soorma._concurrency import CONFLICT_RETRIES, retry_on_conflict
from soorma._episodes import EpisodicMemory
from soorma._knowledge import KnowledgeMemory
from soorma._procedures import ProceduralMemory
from soorma._segments import path_segment as _seg
from soorma.client import ServiceClient
from soorma_common import tracing as otel
from soorma_common.errors import NotFound
from soorma_common.knowledge import EmbeddingInfo, ForgetResult, ReembedStatus
from soorma_common.memory import (
    AnswerClaim,
    PlanContextRecord,
    PlanStatus,
    PlanSummary,
    SessionSummary,
    SubTaskStatus,
    TaskContextRecord,
    WorkingMemoryItem,
)

logger = logging.getLogger("soorma.memory")

DEFAULT_LIST_LIMIT = 20
DEFAULT_UPDATE_RETRIES = CONFLICT_RETRIES
# How long recorded answers are kept by default (the memory service allows 1 s - 30 days).
DEFAULT_ANSWER_RETENTION = 86_400.0

R = TypeVar("R", TaskContextRecord, PlanContextRecord)
M = TypeVar("M", bound=BaseModel)
Mutator = Callable[[R], R | Awaitable[R | None] | None]

# Server-owned fields never sent back on a write.
_SERVER_FIELDS = {"version", "created_at", "updated_at"}


def _key(value: str) -> str:
    """A working-memory key: the last part of the path, so it may contain ``/``."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"working-memory keys must be non-empty strings, got {value!r}")
    return quote(value, safe="/")


def _body(record: TaskContextRecord | PlanContextRecord) -> dict[str, Any]:
    return record.model_dump(mode="json", exclude=_SERVER_FIELDS)


class MemoryClient(ServiceClient):
    """Client of the memory service.

    Build it through :meth:`soorma.context.PlatformContext.from_env` (``context.memory``)
    or directly::

        memory = MemoryClient(base_url="http://127.0.0.1:8083", http=httpx.AsyncClient())

    Args:
        **kwargs: See :class:`soorma.client.ServiceClient`.
    """

    # -- long-term memory ------------------------------------------------------------

    @property
    def knowledge(self) -> KnowledgeMemory:
        """Semantic memory: facts and documents, searched by meaning."""
        return KnowledgeMemory(self._send)

    @property
    def episodes(self) -> EpisodicMemory:
        """Episodic memory: an agent's interactions with the user."""
        return EpisodicMemory(self._send)

    @property
    def procedures(self) -> ProceduralMemory:
        """Procedural memory: rules, prompt fragments and examples for situations."""
        return ProceduralMemory(self._send)

    async def forget_user(self, user_id: str) -> ForgetResult:
        """Delete everything long-term memory holds for ``user_id`` in this tenant
        (knowledge, episodes, procedures), public records they stored included.

        Returns:
            How many records of each type were deleted.

        Raises:
            PermissionDenied: the caller is neither that user nor a platform service
                (``SOORMA_SERVICE_ROLE=service``).
        """
        data = await self._send("DELETE", f"/v1/memory/users/{_seg(user_id)}")
        return ForgetResult.model_validate(data)

    async def embedding_info(self) -> EmbeddingInfo:
        """The service's embedding model, its dimensions and provider, and how many
        records still carry vectors of another model (to re-embed)."""
        return EmbeddingInfo.model_validate(await self._send("GET", "/v1/memory/embedding"))

    async def reembed(self) -> ReembedStatus:
        """Start rebuilding every vector with the service's current embedding model.

        Search keeps answering meanwhile; follow it with :meth:`reembed_status`.

        Raises:
            PermissionDenied: the caller is not a platform service
                (``SOORMA_SERVICE_ROLE=service``).
        """
        return ReembedStatus.model_validate(await self._send("POST", "/v1/memory/reembed"))

    async def reembed_status(self) -> ReembedStatus:
        """Progress of the last re-embed (``idle``, ``running``, ``done`` or ``failed``)."""
        return ReembedStatus.model_validate(await self._send("GET", "/v1/memory/reembed"))

    # -- helpers ---------------------------------------------------------------------

    async def _send(self, method: str, path: str, **kwargs: Any) -> Any:
        if otel.ENABLED:  # a CLIENT span per call (docs/tracing.md)
            return await _tracing.client_call("memory", self, super()._send, method, path, **kwargs)
        return await super()._send(method, path, **kwargs)

    async def _get_or_none(self, model: type[M], path: str) -> M | None:
        """``GET`` one resource as ``model``; ``None`` when the service has no such thing."""
        try:
            data = await self._send("GET", path)
        except NotFound:
            return None
        return model.model_validate(data)

    async def _delete(self, path: str) -> bool:
        try:
            await self._send("DELETE", path)
        except NotFound:
            return False
        return True

    @staticmethod
    def _if_match(expected_version: int | None) -> dict[str, str] | None:
        return None if expected_version is None else {"If-Match": str(expected_version)}

    async def _write_record(
        self, method: str, path: str, record: R, model: type[R], expected_version: int | None
    ) -> R:
        """``POST`` (upsert) or ``PUT`` (replace) a task or plan context; the stored one."""
        data = await self._send(
            method, path, json=_body(record), headers=self._if_match(expected_version)
        )
        return model.model_validate(data)

    # -- task context ----------------------------------------------------------------

    async def store_task_context(
        self,
        task_id: str,
        plan_id: str | None = None,
        record: TaskContextRecord | Mapping[str, Any] | None = None,
        *,
        expected_version: int | None = None,
    ) -> TaskContextRecord:
        """Create or replace a task context (upsert).

        Args:
            task_id: The task's id.
            plan_id: Plan the task belongs to (overrides ``record``'s).
            record: The record's other fields (``event_type``, ``sub_tasks``, ``state`` …).
            expected_version: Write only if the stored version is still this one
                (``0``: only if absent).

        Returns:
            The stored record, with its new ``version``.

        Raises:
            VersionConflict: ``expected_version`` is stale.
        """
        fields = _fields(record)
        fields["task_id"] = task_id
        if plan_id is not None:
            fields["plan_id"] = plan_id
        full = TaskContextRecord.model_validate(fields)
        return await self._write_record(
            "POST", "/v1/memory/task-context", full, TaskContextRecord, expected_version
        )

    async def replace_task_context(
        self, record: TaskContextRecord, *, expected_version: int | None = None
    ) -> TaskContextRecord:
        """Replace an existing task context (``PUT``; never creates one).

        Raises:
            TaskNotFound: the context does not exist (e.g. it was completed).
            VersionConflict: ``expected_version`` is stale.
        """
        return await self._write_record(
            "PUT",
            f"/v1/memory/task-context/{_seg(record.task_id)}",
            record,
            TaskContextRecord,
            expected_version,
        )

    async def get_task_context(self, task_id: str) -> TaskContextRecord | None:
        """The task context, or ``None`` when there is none."""
        return await self._get_or_none(
            TaskContextRecord, f"/v1/memory/task-context/{_seg(task_id)}"
        )

    async def delete_task_context(self, task_id: str) -> bool:
        """Delete a task context; ``False`` when it did not exist."""
        return await self._delete(f"/v1/memory/task-context/{_seg(task_id)}")

    async def get_task_by_subtask(self, sub_task_id: str) -> TaskContextRecord | None:
        """The task context that owns ``sub_task_id`` (a delegation's correlation id)."""
        return await self._get_or_none(
            TaskContextRecord, f"/v1/memory/task-context/by-subtask/{_seg(sub_task_id)}"
        )

    async def record_sub_task_result(
        self,
        task_id: str,
        sub_task_id: str,
        *,
        result: Mapping[str, Any] | None = None,
        status: SubTaskStatus | str = SubTaskStatus.COMPLETED,
        error: str | None = None,
    ) -> TaskContextRecord:
        """Record one sub-task's result atomically; returns the whole updated context.

        Concurrent results for one task are serialized by the service, so none is lost and
        each answer shows every result recorded up to and including this one: fan-in
        decides completion from the returned context.

        Raises:
            TaskNotFound: no such task, or it does not list ``sub_task_id``.
        """
        body = {
            "status": SubTaskStatus(status).value,
            "result": None if result is None else dict(result),
            "error": error,
        }
        data = await self._send(
            "POST",
            f"/v1/memory/task-context/{_seg(task_id)}/sub-tasks/{_seg(sub_task_id)}/result",
            json=body,
        )
        return TaskContextRecord.model_validate(data)

    async def update_task_context(
        self,
        task_id: str,
        mutate: Mutator[TaskContextRecord],
        *,
        retries: int = DEFAULT_UPDATE_RETRIES,
    ) -> TaskContextRecord:
        """Read, change and write a task context, retrying on ``VersionConflict``.

        Args:
            task_id: The task context to change.
            mutate: Called with a fresh copy; changes it in place (or returns a new record;
                may be ``async``). It may run several times, so keep it free of side effects.
            retries: Re-reads after a conflict before giving up.

        Raises:
            TaskNotFound: the context does not exist.
            VersionConflict: still conflicting after ``retries`` re-reads.
        """

        async def read() -> TaskContextRecord:
            data = await self._send("GET", f"/v1/memory/task-context/{_seg(task_id)}")
            return TaskContextRecord.model_validate(data)

        return await _read_modify_write(read, mutate, self.replace_task_context, retries)

    # -- plan context ----------------------------------------------------------------

    async def store_plan_context(
        self,
        plan_id: str,
        session_id: str | None = None,
        record: PlanContextRecord | Mapping[str, Any] | None = None,
        *,
        expected_version: int | None = None,
    ) -> PlanContextRecord:
        """Create or replace a plan context (upsert; also creates the plan record).

        Args:
            plan_id: The plan's id.
            session_id: Session the plan belongs to (overrides ``record``'s).
            record: The record's other fields (``goal_event``, ``state_machine`` …).
            expected_version: Write only if the stored version is still this one
                (``0``: only if absent).

        Raises:
            VersionConflict: ``expected_version`` is stale.
        """
        fields = _fields(record)
        fields["plan_id"] = plan_id
        if session_id is not None:
            fields["session_id"] = session_id
        full = PlanContextRecord.model_validate(fields)
        return await self._write_record(
            "POST", "/v1/memory/plan-context", full, PlanContextRecord, expected_version
        )

    async def replace_plan_context(
        self, record: PlanContextRecord, *, expected_version: int | None = None
    ) -> PlanContextRecord:
        """Replace an existing plan context (``PUT``; never creates one).

        Raises:
            PlanNotFound: the plan does not exist.
            VersionConflict: ``expected_version`` is stale.
        """
        return await self._write_record(
            "PUT",
            f"/v1/memory/plan-context/{_seg(record.plan_id)}",
            record,
            PlanContextRecord,
            expected_version,
        )

    async def get_plan_context(self, plan_id: str) -> PlanContextRecord | None:
        """The plan context, or ``None`` when there is none."""
        return await self._get_or_none(
            PlanContextRecord, f"/v1/memory/plan-context/{_seg(plan_id)}"
        )

    async def get_plan_by_correlation(self, correlation_id: str) -> PlanContextRecord | None:
        """The plan whose ``plan_id`` or ``correlation_ids`` contains ``correlation_id``."""
        return await self._get_or_none(
            PlanContextRecord, f"/v1/memory/plan-context/by-correlation/{_seg(correlation_id)}"
        )

    async def delete_plan_context(self, plan_id: str) -> bool:
        """Delete the plan and its data; ``False`` when it did not exist."""
        return await self._delete(f"/v1/memory/plan-context/{_seg(plan_id)}")

    async def update_plan_context(
        self,
        plan_id: str,
        mutate: Mutator[PlanContextRecord],
        *,
        retries: int = DEFAULT_UPDATE_RETRIES,
    ) -> PlanContextRecord:
        """Read, change and write a plan context, retrying on ``VersionConflict``.

        Example::

            def advance(plan):
                plan.current_state = "review"
                plan.results["search"] = found

            plan = await context.memory.update_plan_context(plan_id, advance)

        Args:
            plan_id: The plan to change.
            mutate: Called with a fresh copy; changes it in place (or returns a new record;
                may be ``async``). It may run several times, so keep it free of side effects.
            retries: Re-reads after a conflict before giving up.

        Raises:
            PlanNotFound: the plan does not exist.
            VersionConflict: still conflicting after ``retries`` re-reads.
        """

        async def read() -> PlanContextRecord:
            data = await self._send("GET", f"/v1/memory/plan-context/{_seg(plan_id)}")
            return PlanContextRecord.model_validate(data)

        return await _read_modify_write(read, mutate, self.replace_plan_context, retries)

    # -- plans -----------------------------------------------------------------------

    async def create_plan_record(
        self,
        goal_event: str,
        goal_data: Mapping[str, Any] | None = None,
        response_event: str | None = None,
        session_id: str | None = None,
        parent_plan_id: str | None = None,
        *,
        plan_id: str | None = None,
        status: PlanStatus | str = PlanStatus.PENDING,
    ) -> PlanSummary:
        """Create a plan record (a new ``plan_id`` unless given).

        Raises:
            Conflict: ``plan_id`` already exists.
        """
        body = {
            "plan_id": plan_id,
            "goal_event": goal_event,
            "goal_data": dict(goal_data or {}),
            "response_event": response_event,
            "session_id": session_id,
            "parent_plan_id": parent_plan_id,
            "status": PlanStatus(status).value,
        }
        return PlanSummary.model_validate(await self._send("POST", "/v1/memory/plans", json=body))

    async def list_plans(
        self,
        status: PlanStatus | str | Sequence[PlanStatus | str] | None = None,
        session_id: str | None = None,
        limit: int = DEFAULT_LIST_LIMIT,
        *,
        parent_plan_id: str | None = None,
    ) -> list[PlanSummary]:
        """The caller's plans, most recently updated first.

        Args:
            status: One status or several (any of them matches).
            session_id: Only plans of this session.
            limit: Most plans returned (1-1000).
            parent_plan_id: Only sub-plans of this plan.
        """
        params: dict[str, Any] = {"limit": limit}
        if status is not None:
            statuses = [status] if isinstance(status, str) else list(status)
            params["status"] = [PlanStatus(s).value for s in statuses]
        if session_id is not None:
            params["session_id"] = session_id
        if parent_plan_id is not None:
            params["parent_plan_id"] = parent_plan_id
        data = await self._send("GET", "/v1/memory/plans", params=params)
        return [PlanSummary.model_validate(p) for p in data["plans"]]

    async def get_plan(self, plan_id: str) -> PlanSummary | None:
        """A plan's summary, or ``None`` when there is none."""
        return await self._get_or_none(PlanSummary, f"/v1/memory/plans/{_seg(plan_id)}")

    async def update_plan(
        self,
        plan_id: str,
        *,
        status: PlanStatus | str,
        expected_version: int | None = None,
    ) -> PlanSummary:
        """Change a plan's status (guarded by ``expected_version`` when given).

        Raises:
            PlanNotFound: no such plan.
            VersionConflict: ``expected_version`` is stale.
        """
        body = {"status": PlanStatus(status).value, "expected_version": expected_version}
        data = await self._send("PUT", f"/v1/memory/plans/{_seg(plan_id)}", json=body)
        return PlanSummary.model_validate(data)

    async def delete_plan(self, plan_id: str) -> bool:
        """Delete a plan with its working memory and task contexts; ``False`` if absent."""
        return await self._delete(f"/v1/memory/plans/{_seg(plan_id)}")

    # -- sessions --------------------------------------------------------------------

    async def create_session(
        self,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        session_id: str | None = None,
    ) -> SessionSummary:
        """Create a session (conversation) record; a new ``session_id`` unless given.

        Raises:
            Conflict: ``session_id`` already exists.
        """
        body = {"session_id": session_id, "name": name, "metadata": dict(metadata or {})}
        data = await self._send("POST", "/v1/memory/sessions", json=body)
        return SessionSummary.model_validate(data)

    async def list_sessions(self, limit: int = DEFAULT_LIST_LIMIT) -> list[SessionSummary]:
        """The caller's sessions, newest first, with plan counts and last activity."""
        data = await self._send("GET", "/v1/memory/sessions", params={"limit": limit})
        return [SessionSummary.model_validate(s) for s in data["sessions"]]

    async def get_session(self, session_id: str) -> SessionSummary | None:
        """A session's summary, or ``None`` when there is none."""
        return await self._get_or_none(SessionSummary, f"/v1/memory/sessions/{_seg(session_id)}")

    async def delete_session(self, session_id: str) -> bool:
        """Delete a session **and its plans**; ``False`` when it did not exist."""
        return await self._delete(f"/v1/memory/sessions/{_seg(session_id)}")

    # -- recorded answers ------------------------------------------------------------

    async def record_answer(
        self,
        request_id: str,
        answer: Mapping[str, Any],
        *,
        retention_seconds: float = DEFAULT_ANSWER_RETENTION,
    ) -> dict[str, Any]:
        """Record the answer sent for ``request_id`` (first one wins until it expires).

        Args:
            request_id: The request's event id.
            answer: What it was answered with (JSON object).
            retention_seconds: How long the answer is kept (1 s to 30 days).

        Returns:
            The answer kept: ``answer``, or the one recorded earlier.
        """
        data = await self._send(
            "PUT",
            f"/v1/memory/answers/{_seg(request_id)}",
            json={"answer": dict(answer), "retention_seconds": retention_seconds},
        )
        return dict(data["answer"])

    async def claim_request(
        self, request_id: str, owner: str, *, lease_seconds: float
    ) -> AnswerClaim:
        """Claim ``request_id`` before running it, or renew ``owner``'s claim.

        Args:
            request_id: The key its answer is recorded under.
            owner: The claimant's token (one per delivery).
            lease_seconds: How long the claim holds unless renewed (1 - 600 s).

        Returns:
            ``granted`` (run it), ``answered`` (with the recorded answer: send that) or
            ``held`` (by another owner until ``expires_at``).
        """
        data = await self._send(
            "PUT",
            f"/v1/memory/answers/{_seg(request_id)}/claim",
            json={"owner": owner, "lease_seconds": lease_seconds},
        )
        return AnswerClaim.model_validate(data)

    async def release_claim(self, request_id: str, owner: str) -> bool:
        """Give back ``owner``'s claim on ``request_id``; ``False`` when it held none."""
        try:
            await self._send(
                "DELETE", f"/v1/memory/answers/{_seg(request_id)}/claim", params={"owner": owner}
            )
        except NotFound:
            return False
        return True

    def without_retries(self) -> MemoryClient:
        """A view of this client that fails at once when the service is unreachable
        (for the SDK's optional calls, e.g. recorded-answer look-ups)."""
        view = copy.copy(self)
        view.connect_retries = 0
        return view

    async def recorded_answer(self, request_id: str) -> dict[str, Any] | None:
        """The unexpired answer recorded for ``request_id``, or ``None``."""
        try:
            data = await self._send("GET", f"/v1/memory/answers/{_seg(request_id)}")
        except NotFound:
            return None
        return dict(data["answer"])

    # -- working memory --------------------------------------------------------------

    async def store(self, key: str, value: Any, plan_id: str) -> WorkingMemoryItem:
        """Store ``value`` (any JSON value) under ``key`` in the plan's working memory.

        Large data belongs here rather than in events: put it here and send the key.
        """
        data = await self._send(
            "POST", f"/v1/working-memory/{_seg(plan_id)}", json={"key": key, "value": value}
        )
        return WorkingMemoryItem.model_validate(data)

    async def retrieve(self, key: str, plan_id: str, default: Any = None) -> Any:
        """The value stored under ``key``, or ``default`` when there is none."""
        item = await self.retrieve_item(key, plan_id)
        return default if item is None else item.value

    async def retrieve_item(self, key: str, plan_id: str) -> WorkingMemoryItem | None:
        """The stored item (value and ``updated_at``), or ``None`` when there is none."""
        return await self._get_or_none(
            WorkingMemoryItem, f"/v1/working-memory/{_seg(plan_id)}/{_key(key)}"
        )

    async def delete_item(self, key: str, plan_id: str) -> bool:
        """Delete one key; ``False`` when it did not exist."""
        return await self._delete(f"/v1/working-memory/{_seg(plan_id)}/{_key(key)}")

    async def list_items(self, plan_id: str) -> list[WorkingMemoryItem]:
        """Every item of the plan's working memory, by key."""
        data = await self._send("GET", f"/v1/working-memory/{_seg(plan_id)}")
        return [WorkingMemoryItem.model_validate(i) for i in data["items"]]

    async def list_keys(self, plan_id: str) -> list[str]:
        """The keys of the plan's working memory, sorted."""
        return [item.key for item in await self.list_items(plan_id)]

    async def clear(self, plan_id: str) -> int:
        """Delete the plan's whole working memory; returns how many keys there were."""
        data = await self._send("DELETE", f"/v1/working-memory/{_seg(plan_id)}")
        return int(data["deleted"])


def _fields(record: Any) -> dict[str, Any]:
    if record is None:
        return {}
    if hasattr(record, "model_dump"):
        return dict(record.model_dump(exclude=_SERVER_FIELDS))
    if isinstance(record, Mapping):
        return {k: v for k, v in record.items() if k not in _SERVER_FIELDS}
    raise TypeError(f"record must be a record or a mapping, got {type(record).__name__}")


async def _read_modify_write(
    read: Callable[[], Awaitable[R]],
    mutate: Mutator[R],
    write: Callable[..., Awaitable[R]],
    retries: int,
) -> R:
    """Optimistic update: write with ``If-Match``; on a conflict read and change again."""

    async def attempt() -> R:
        current = await read()
        version = current.version
        changed = mutate(current)
        if inspect.isawaitable(changed):
            changed = await changed
        record = current if changed is None else changed
        return await write(record, expected_version=version)

    return await retry_on_conflict(attempt, retries=retries)


__all__ = [
    "DEFAULT_LIST_LIMIT",
    "DEFAULT_UPDATE_RETRIES",
    "EpisodicMemory",
    "KnowledgeMemory",
    "MemoryClient",
    "ProceduralMemory",
]
