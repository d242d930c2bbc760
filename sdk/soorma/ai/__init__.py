"""AI helpers for agents: event discovery and payload validation for LLM prompts.

Nothing here imports an LLM library; the LLM-driven planner lives in its own module and
imports litellm lazily.
"""

from soorma.ai.toolkit import EventToolkit

__all__ = ["EventToolkit"]
