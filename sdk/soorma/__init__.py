"""Soorma SDK: event-driven agents on the Soorma platform.

Start with :class:`Agent` (raw events on explicit topics) or :class:`Tool`
(request/response), and :class:`PlatformContext` for the platform clients.
"""

from soorma._http import Identity
from soorma._propagation import current_event
from soorma.agents import Agent, InvocationContext, Tool
from soorma.bus import BusClient
from soorma.context import PlatformContext, PlatformSettings
from soorma.event import Event
from soorma.subscription import Subscription

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "BusClient",
    "Event",
    "Identity",
    "InvocationContext",
    "PlatformContext",
    "PlatformSettings",
    "Subscription",
    "Tool",
    "__version__",
    "current_event",
]
