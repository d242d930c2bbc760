"""AI helpers for agents: event discovery, payload validation and the LLM planner.

Nothing here imports an LLM library at import time: the ChoreographyPlanner imports
litellm on its first decision.
"""

from typing import TYPE_CHECKING, Any

from soorma.ai._errors import (
    CircuitBreakerOpen,
    DecisionInvalid,
    LLMNotConfigured,
    PlannerError,
)
from soorma.ai._model_options import ModelOptions
from soorma.ai._retrieval import Retrieval
from soorma.ai._stream import ArtifactSink, stream_text
from soorma.ai.toolkit import EventToolkit

if TYPE_CHECKING:
    from soorma.ai.choreography import ChoreographyPlanner


def __getattr__(name: str) -> Any:
    # Imported on first use: soorma.context imports this package (for EventToolkit)
    # while soorma.agents is still loading, and the planner is built on soorma.agents.
    if name == "ChoreographyPlanner":
        from soorma.ai.choreography import ChoreographyPlanner

        return ChoreographyPlanner
    raise AttributeError(f"module 'soorma.ai' has no attribute {name!r}")


__all__ = [
    "ArtifactSink",
    "ChoreographyPlanner",
    "CircuitBreakerOpen",
    "DecisionInvalid",
    "EventToolkit",
    "LLMNotConfigured",
    "ModelOptions",
    "PlannerError",
    "Retrieval",
    "stream_text",
]
