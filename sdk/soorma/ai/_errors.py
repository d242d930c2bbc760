"""Errors raised by the LLM planning layer.

They subclass :class:`soorma_common.errors.SoormaError`, so a handler that already catches
domain errors catches these too.
"""

from __future__ import annotations

from soorma_common.errors import SoormaError


class PlannerError(SoormaError):
    """The planner could not produce or carry out a valid decision."""

    code = "planner_error"


class LLMNotConfigured(PlannerError):
    """litellm is missing, or the model's provider has no credentials."""

    code = "llm_not_configured"


class DecisionInvalid(PlannerError):
    """Every attempt (repairs, fallback models, fallback planner) gave an invalid decision.

    ``details`` lists the attempts with their validation errors.
    """

    code = "decision_invalid"


class CircuitBreakerOpen(PlannerError):
    """The plan reached its ``max_actions`` limit; it has been failed."""

    code = "circuit_breaker_open"


__all__ = ["CircuitBreakerOpen", "DecisionInvalid", "LLMNotConfigured", "PlannerError"]
