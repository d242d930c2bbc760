"""Agent types: :class:`Agent` (raw events), :class:`Tool` (request/response)
and :class:`Worker` (async tasks with delegation)."""

from soorma.agents.base import Agent
from soorma.agents.planner import GoalContext, Planner, TransitionContext
from soorma.agents.tool import InvocationContext, Tool
from soorma.agents.worker import Worker
from soorma.tasking.context import DelegationSpec, TaskContext
from soorma.tasking.results import ResultContext

__all__ = [
    "Agent",
    "DelegationSpec",
    "GoalContext",
    "InvocationContext",
    "Planner",
    "ResultContext",
    "TaskContext",
    "Tool",
    "TransitionContext",
    "Worker",
]
