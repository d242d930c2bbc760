"""HTTP routes of the memory-service, one module per resource."""

from memory_service.routes import (
    answers,
    embeddings,
    episodes,
    longterm_admin,
    plan_context,
    plans,
    procedures,
    semantic,
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
    semantic.router,
    episodes.router,
    procedures.router,
    longterm_admin.router,
    embeddings.router,
)

__all__ = ["ROUTERS"]
