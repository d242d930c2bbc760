"""HTTP routes of the memory-service, one module per resource."""

from memory_service.routes import (
    answers,
    plan_context,
    plans,
    sessions,
    task_context,
    working_memory,
)

ROUTERS = (
    task_context.router,
    plan_context.router,
    plans.router,
    sessions.router,
    working_memory.router,
    answers.router,
)

__all__ = ["ROUTERS"]
