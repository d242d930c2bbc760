"""The tracker API's response models (defined in :mod:`soorma_common.tracker`, shared with
the SDK's ``TrackerClient``).

Endpoints (all under ``/v1/tracker``, scoped to the caller's tenant):

- ``GET /plans`` → :class:`PlanList` (newest first; filters ``status``, ``goal_event``,
  ``session_id``, ``parent_plan_id``, ``planner``, ``since``, ``until``; ``limit``, ``cursor``)
- ``GET /plans/{plan_id}`` → :class:`PlanDetail`
- ``GET /plans/by-correlation/{correlation_id}`` → :class:`PlanSummary`
- ``GET /plans/{plan_id}/actions`` → :class:`ActionList`
- ``GET /plans/{plan_id}/timeline`` → :class:`Timeline`
- ``GET /plans/{plan_id}/sub-plans`` → :class:`PlanList`
- ``GET /plans/{plan_id}/stream`` → SSE (see below)
- ``GET /sessions/{session_id}/plans`` → :class:`PlanList`
- ``GET /delegation-groups/{group_id}`` → :class:`DelegationGroup`
- ``GET /tasks/{task_id}`` → :class:`TaskDetail`
- ``GET /metrics`` → :class:`TrackerMetrics`

``GET /plans/{plan_id}/stream`` (``text/event-stream``) frames:

- ``event: plan`` — data :class:`PlanSummary` JSON: sent first, then whenever the plan changes;
- ``event: entry`` — data :class:`TimelineEntry` JSON, each new timeline entry in order
  (the first ``plan`` frame is followed by the whole timeline so far); ``id:`` is its ``seq``
  (reconnect with ``Last-Event-ID`` to resume after it);
- ``event: end`` — data :class:`PlanSummary`: the plan reached a terminal status, the stream
  closes;
- ``event: heartbeat`` — data ``{}`` every ``heartbeat`` seconds (default 15) of silence.
"""

from soorma_common.tracker import (
    ActionList,
    DelegationGroup,
    DurationStats,
    LlmAuditRecord,
    PlanContextView,
    PlanDetail,
    PlanList,
    PlanSummary,
    ProjectorStats,
    StateStep,
    StatusCounts,
    TaskDetail,
    TaskSummary,
    Timeline,
    TimelineEntry,
    TrackedPlanStatus,
    TrackedTaskStatus,
    TrackerMetrics,
    Wait,
    WaitStatus,
)

__all__ = [
    "ActionList",
    "DelegationGroup",
    "DurationStats",
    "LlmAuditRecord",
    "PlanContextView",
    "PlanDetail",
    "PlanList",
    "PlanSummary",
    "ProjectorStats",
    "StateStep",
    "StatusCounts",
    "TaskDetail",
    "TaskSummary",
    "Timeline",
    "TimelineEntry",
    "TrackedPlanStatus",
    "TrackedTaskStatus",
    "TrackerMetrics",
    "Wait",
    "WaitStatus",
]
