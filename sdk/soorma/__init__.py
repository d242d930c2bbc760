"""Soorma SDK: event-driven agents on the Soorma platform.

Start with :class:`Agent` (raw events on explicit topics) or :class:`Tool`
(request/response), and :class:`PlatformContext` for the platform clients.
"""

from soorma._http import Identity
from soorma._propagation import current_event
from soorma.agents import (
    Agent,
    DelegationSpec,
    InvocationContext,
    ResultContext,
    TaskContext,
    Tool,
    Worker,
)
from soorma.bus import BusClient
from soorma.context import PlatformContext, PlatformSettings
from soorma.event import Event
from soorma.memory import MemoryClient
from soorma.subscription import Subscription

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "BusClient",
    "DelegationSpec",
    "Event",
    "Identity",
    "InvocationContext",
    "MemoryClient",
    "PlatformContext",
    "PlatformSettings",
    "ResultContext",
    "Subscription",
    "TaskContext",
    "Tool",
    "Worker",
    "__version__",
    "current_event",
]
