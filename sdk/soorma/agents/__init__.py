"""Agent types: :class:`Agent` (raw events) and :class:`Tool` (request/response)."""

from soorma.agents.base import Agent
from soorma.agents.tool import InvocationContext, Tool

__all__ = ["Agent", "InvocationContext", "Tool"]
