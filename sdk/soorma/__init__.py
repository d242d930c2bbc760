"""Soorma SDK: event-driven agents on the Soorma platform.

Start with :class:`Agent` (raw events on explicit topics) or :class:`Tool`
(request/response), and :class:`PlatformContext` for the platform clients.
"""

from soorma._http import Identity
from soorma._propagation import current_event
from soorma.agents import (
    Agent,
    DelegationSpec,
    GoalContext,
    InvocationContext,
    Planner,
    ResultContext,
    TaskContext,
    Tool,
    TransitionContext,
    Worker,
)
from soorma.ai.toolkit import EventToolkit
from soorma.bus import BusClient
from soorma.context import PlatformContext, PlatformSettings
from soorma.event import Event
from soorma.memory import MemoryClient
from soorma.plan_context import PlanContext
from soorma.registry import RegistryClient
from soorma.subscription import Subscription

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "BusClient",
    "DelegationSpec",
    "Event",
    "EventToolkit",
    "GoalContext",
    "Identity",
    "InvocationContext",
    "MemoryClient",
    "PlanContext",
    "Planner",
    "PlatformContext",
    "PlatformSettings",
    "RegistryClient",
    "ResultContext",
    "Subscription",
    "TaskContext",
    "Tool",
    "TransitionContext",
    "Worker",
    "__version__",
    "current_event",
]
