"""Soorma SDK: event-driven agents on the Soorma platform.

Start with :class:`Agent` (raw events on explicit topics) or :class:`Tool`
(request/response), and :class:`PlatformContext` for the platform clients. The
platform's errors (:class:`VersionConflict`, :class:`PlanNotFound`, ...) are raised as
these classes, whichever service answered.
"""

from soorma._client_main import run_client
from soorma._propagation import current_event
from soorma.agents._options import AgentOptions
from soorma.agents.base import Agent
from soorma.agents.planner import GoalContext, Planner, TransitionContext
from soorma.agents.tool import InvocationContext, Tool, run_once
from soorma.agents.worker import Worker
from soorma.ai.toolkit import EventToolkit
from soorma.bus import BusClient
from soorma.context import PlatformContext
from soorma.event import Event
from soorma.memory import MemoryClient
from soorma.planning.plan import PlanContext
from soorma.registry import RegistryClient
from soorma.settings import PlatformSettings
from soorma.subscription import Subscription
from soorma.tasking.context import DelegationSpec, TaskContext
from soorma.tasking.results import ResultContext
from soorma_common.errors import (
    AgentNotFound,
    ConfigurationError,
    Conflict,
    EmbeddingMismatch,
    EmbeddingUnavailable,
    EventDefinitionNotFound,
    EventNotFound,
    HandlerFailed,
    InvalidTopic,
    MemoryKeyNotFound,
    MemoryNotFound,
    NotFound,
    PayloadInvalid,
    PayloadTooLarge,
    PermissionDenied,
    PlanNotFound,
    SchemaInvalid,
    ServiceUnavailable,
    SessionNotFound,
    SoormaError,
    TaskNotFound,
    Unauthenticated,
    ValidationFailed,
    VectorSearchUnavailable,
    VersionConflict,
)

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentNotFound",
    "AgentOptions",
    "BusClient",
    "ConfigurationError",
    "Conflict",
    "DelegationSpec",
    "EmbeddingMismatch",
    "EmbeddingUnavailable",
    "Event",
    "EventDefinitionNotFound",
    "EventNotFound",
    "EventToolkit",
    "GoalContext",
    "HandlerFailed",
    "InvalidTopic",
    "InvocationContext",
    "MemoryClient",
    "MemoryKeyNotFound",
    "MemoryNotFound",
    "NotFound",
    "PayloadInvalid",
    "PayloadTooLarge",
    "PermissionDenied",
    "PlanContext",
    "PlanNotFound",
    "Planner",
    "PlatformContext",
    "PlatformSettings",
    "RegistryClient",
    "ResultContext",
    "SchemaInvalid",
    "ServiceUnavailable",
    "SessionNotFound",
    "SoormaError",
    "Subscription",
    "TaskContext",
    "TaskNotFound",
    "Tool",
    "TransitionContext",
    "Unauthenticated",
    "ValidationFailed",
    "VectorSearchUnavailable",
    "VersionConflict",
    "Worker",
    "__version__",
    "current_event",
    "run_client",
    "run_once",
]
