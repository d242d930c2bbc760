"""TrackerClient: read plans, timelines, actions and metrics from the tracker service.

Available as ``context.tracker``::

    plan = await context.tracker.wait_for_plan(correlation_id=goal_cid, timeout=30)
    for entry in (await context.tracker.timeline(plan.plan_id)).entries:
        print(entry.time, entry.summary)
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import httpx

from soorma.client import ServiceClient, raise_for_error
from soorma_common.agent_status import ConnectedAgentList
from soorma_common.errors import NotFound, ServiceUnavailable
from soorma_common.tracker import (
    TERMINAL_PLAN_STATUSES,
    ActionList,
    DelegationGroup,
    PlanDetail,
    PlanList,
    PlanSummary,
    TaskDetail,
    Timeline,
    TrackerMetrics,
)

PREFIX = "/v1/tracker"
DEFAULT_WAIT_TIMEOUT = 30.0
DEFAULT_POLL_INTERVAL = 0.25


class TrackerClient(ServiceClient):
    """Client of the tracker service (``SOORMA_TRACKER_URL``).

    The tracker's data is read-only; :meth:`answer_task` acts by having the tracker
    publish the answer through the event service as the caller.
    Every call is scoped to the caller's tenant. Unknown ids raise ``PlanNotFound`` /
    ``TaskNotFound``; bad filters or cursors raise ``ValidationFailed``.
    """

    async def list_plans(
        self,
        *,
        status: str | None = None,
        goal_event: str | None = None,
        session_id: str | None = None,
        parent_plan_id: str | None = None,
        planner: str | None = None,
        search: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> PlanList:
        """A page of plans, newest first; pass ``next_cursor`` back as ``cursor``.

        Args:
            status: ``pending``, ``running``, ``paused``, ``completed``, ``failed`` or
                ``cancelled``.
            goal_event: The goal's event type.
            session_id: Plans of one session.
            parent_plan_id: Sub-plans of one plan.
            planner: The ``source`` of the plan's events (the planner agent).
            search: A plan id, goal correlation id or event id, or a prefix of one
                (at least 4 characters).
            since: Created at or after.
            until: Created before.
            limit: Page size (1-500).
            cursor: ``next_cursor`` of the previous page.
        """
        params: dict[str, Any] = {"limit": limit}
        for name, value in (
            ("status", status),
            ("goal_event", goal_event),
            ("session_id", session_id),
            ("parent_plan_id", parent_plan_id),
            ("planner", planner),
            ("q", search),
            ("cursor", cursor),
        ):
            if value is not None:
                params[name] = value
        if since is not None:
            params["since"] = since.isoformat()
        if until is not None:
            params["until"] = until.isoformat()
        return PlanList.model_validate(await self._send("GET", f"{PREFIX}/plans", params=params))

    async def get_plan(self, plan_id: str, *, context: bool = True) -> PlanDetail:
        """One plan: summary, state path, waits, sub-plans and (``context=True``) its
        memory-service context (state machine, LLM audit trail)."""
        found = await self._send(
            "GET", f"{PREFIX}/plans/{plan_id}", params={"context": str(context).lower()}
        )
        return PlanDetail.model_validate(found)

    async def plan_by_correlation(self, correlation_id: str) -> PlanSummary:
        """The plan a goal's correlation id (or any of the plan's correlation ids) leads to."""
        found = await self._send("GET", f"{PREFIX}/plans/by-correlation/{correlation_id}")
        return PlanSummary.model_validate(found)

    async def timeline(
        self, plan_id: str, *, limit: int = 200, cursor: str | None = None
    ) -> Timeline:
        """The plan's events, oldest first."""
        params: dict[str, Any] = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        found = await self._send("GET", f"{PREFIX}/plans/{plan_id}/timeline", params=params)
        return Timeline.model_validate(found)

    async def actions(
        self, plan_id: str, *, limit: int = 100, cursor: str | None = None
    ) -> ActionList:
        """The plan's requests with their answers (agent, latency, outcome)."""
        params: dict[str, Any] = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        found = await self._send("GET", f"{PREFIX}/plans/{plan_id}/actions", params=params)
        return ActionList.model_validate(found)

    async def sub_plans(self, plan_id: str, *, limit: int = 50) -> PlanList:
        """Plans started by ``plan_id``."""
        found = await self._send(
            "GET", f"{PREFIX}/plans/{plan_id}/sub-plans", params={"limit": limit}
        )
        return PlanList.model_validate(found)

    async def session_plans(self, session_id: str, *, limit: int = 50) -> PlanList:
        """Plans of one session, newest first."""
        found = await self._send(
            "GET", f"{PREFIX}/sessions/{session_id}/plans", params={"limit": limit}
        )
        return PlanList.model_validate(found)

    async def task(self, task_id: str) -> TaskDetail:
        """One task (a request's event id, or a human-input sub-task id)."""
        return TaskDetail.model_validate(await self._send("GET", f"{PREFIX}/tasks/{task_id}"))

    async def answer_task(self, task_id: str, data: dict[str, Any]) -> str:
        """Answer a pending human input, or release a planner WAIT, as this identity.

        A human input (named by its sub-task id, or the id of the task that asked) gets
        ``data`` as its ``response_event`` on its ``response_topic``, correlated to the
        request, so the asking worker receives it. A planner WAIT (named by its id or
        its plan's) gets the event it expects, correlated to its plan on
        ``action-results``, which resumes the plan. The tracker publishes it through
        the event service as the caller; it shows on the plan's timeline.

        Returns:
            The answer's event id.

        Raises:
            TaskNotFound: nothing waits by that id in the caller's tenant.
            Conflict: it was already answered or timed out.
        """
        sent = await self._send("POST", f"{PREFIX}/tasks/{task_id}/answer", json={"data": data})
        return str(sent["event_id"])

    async def timeout_task(self, task_id: str, *, reason: str | None = None) -> str:
        """Time out a pending human input or planner WAIT now, as this identity.

        The tracker publishes what it would at the deadline (``task.timeout`` for a human
        input, ``plan.wait_timeout`` for a WAIT, with ``timed_out_by``) through the event
        service, so the waiting worker or planner takes its timeout branch.

        Returns:
            The timeout event's id.

        Raises:
            TaskNotFound: nothing waits by that id in the caller's tenant.
            Conflict: it was already answered or timed out.
        """
        body = {"reason": reason} if reason else {}
        sent = await self._send("POST", f"{PREFIX}/tasks/{task_id}/timeout", json=body)
        return str(sent["event_id"])

    async def answer_schema(self, task_id: str) -> dict[str, Any]:
        """The registered schema of the event a wait expects: ``{"task_id",
        "event_type", "schema" (None when unregistered), "description", "note"}``."""
        found = await self._send("GET", f"{PREFIX}/tasks/{task_id}/answer-schema")
        return dict(found)

    async def delegation_group(self, group_id: str) -> DelegationGroup:
        """One ``delegate_parallel`` fan-out and its members."""
        found = await self._send("GET", f"{PREFIX}/delegation-groups/{group_id}")
        return DelegationGroup.model_validate(found)

    async def metrics(self) -> TrackerMetrics:
        """Counts by status, durations and failure rates (the caller's tenant)."""
        return TrackerMetrics.model_validate(await self._send("GET", f"{PREFIX}/metrics"))

    async def agents(self, *, stale: bool = True) -> ConnectedAgentList:
        """The registered agents, each with its last heartbeat and consumer lag.

        Args:
            stale: Include agents past their TTL (kept by the registry until purged).
        """
        params = None if stale else {"stale": "false"}
        found = await self._send("GET", f"{PREFIX}/agents", params=params)
        return ConnectedAgentList.model_validate(found)

    async def wait_for_plan(
        self,
        plan_id: str | None = None,
        *,
        correlation_id: str | None = None,
        timeout: float = DEFAULT_WAIT_TIMEOUT,  # noqa: ASYNC109 - wait_for()'s documented API
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        until_finished: bool = True,
    ) -> PlanDetail:
        """Wait until the plan exists (and, with ``until_finished``, has ended).

        Args:
            plan_id: The plan's id; or
            correlation_id: The goal's correlation id (what ``bus.request`` returned).
            timeout: Seconds to wait in all.
            poll_interval: Seconds between looks.
            until_finished: Wait for ``completed``, ``failed`` or ``cancelled``.

        Returns:
            The plan, with its memory context.

        Raises:
            TimeoutError: not found (or not ended) within ``timeout``.
            ValueError: neither or both of ``plan_id`` and ``correlation_id`` given.
        """
        if (plan_id is None) == (correlation_id is None):
            raise ValueError("wait_for_plan() needs exactly one of plan_id= or correlation_id=")
        what = f"plan {plan_id}" if plan_id else f"the plan of correlation id {correlation_id}"
        last: PlanDetail | None = None
        try:
            async with asyncio.timeout(timeout):
                while True:
                    try:
                        if plan_id is None:
                            assert correlation_id is not None
                            plan_id = (await self.plan_by_correlation(correlation_id)).plan_id
                        last = await self.get_plan(plan_id, context=False)
                    except NotFound:
                        last = None
                    if last is not None and (
                        not until_finished or last.status.value in TERMINAL_PLAN_STATUSES
                    ):
                        return await self.get_plan(last.plan_id)
                    await asyncio.sleep(poll_interval)
        except TimeoutError:
            state = f"still {last.status.value}" if last is not None else "not seen"
            raise TimeoutError(
                f"{what} did not {'end' if until_finished else 'appear'} within "
                f"{timeout:g} s ({state}); is the tracker running at {self.base_url}?"
            ) from None

    async def stream(
        self, plan_id: str, *, after_seq: int = 0
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """Live updates of one plan as ``(kind, data)``: ``plan``, ``entry``, ``end``.

        Ends after ``end`` (the plan finished). Raises ``PlanNotFound`` at once for an
        unknown plan.
        """
        headers = self.headers()
        if after_seq:
            headers["Last-Event-ID"] = str(after_seq)
        try:
            async with self.http.stream(
                "GET",
                self.url(f"{PREFIX}/plans/{plan_id}/stream"),
                headers=headers,
                timeout=httpx.Timeout(self.timeout, read=None),
            ) as response:
                if not response.is_success:
                    await response.aread()
                    raise_for_error(response)
                kind: str | None = None
                async for line in response.aiter_lines():
                    if line.startswith("event: "):
                        kind = line[7:]
                    elif line.startswith("data: ") and kind is not None:
                        if kind != "heartbeat":
                            yield kind, json.loads(line[6:])
                        if kind == "end":
                            return
                        kind = None
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ServiceUnavailable(
                f"cannot reach {self.base_url}: {exc}; is the tracker running?",
                details={"url": self.base_url},
            ) from exc


__all__ = ["TrackerClient"]
