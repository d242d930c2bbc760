"""PlanContext: a planner's durable, event-driven state machine.

The implementation lives in :mod:`soorma.planning` (``plan``, ``transitions``,
``stored``, ``records``, ``steps``, ``lifecycle``); this module keeps the public import
path ``soorma.plan_context``.
"""

from __future__ import annotations

from soorma.planning.cache import DEFAULT_CACHE_PLANS, PlanCache
from soorma.planning.lifecycle import (
    PLAN_COMPLETED,
    PLAN_FAILED,
    PLAN_PAUSED,
    PLAN_RESUMED,
    PLAN_STARTED,
    PLAN_STATE_CHANGED,
)
from soorma.planning.machine import CONDITION_NAMES, validate_state_machine
from soorma.planning.plan import PlanContext
from soorma.planning.steps import APPLIED_MEMORY
from soorma.planning.stored import DEFAULT_SAVE_RETRIES, START_STATE
from soorma.planning.transitions import FAILED_STATE_NAMES

__all__ = [
    "APPLIED_MEMORY",
    "CONDITION_NAMES",
    "DEFAULT_CACHE_PLANS",
    "DEFAULT_SAVE_RETRIES",
    "FAILED_STATE_NAMES",
    "PLAN_COMPLETED",
    "PLAN_FAILED",
    "PLAN_PAUSED",
    "PLAN_RESUMED",
    "PLAN_STARTED",
    "PLAN_STATE_CHANGED",
    "START_STATE",
    "PlanCache",
    "PlanContext",
    "validate_state_machine",
]
