"""Worker: asynchronous task agents (layer 3, seed RF-SDK-004).

A worker's ``on_task`` handler does not return the answer. It saves its task, delegates
sub-tasks (``task.delegate()``, ``task.delegate_parallel()``) or asks a human
(``task.request_human_input()``), and returns. Answers arrive at ``on_result`` handlers —
on any replica, also after a restart — which restore the task from the memory service
and ``complete()`` it when everything is in.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from soorma.agents._handlers import HandlerSpec, check_handler, make_spec
from soorma.agents.base import Agent, _placeholder
from soorma.context import PlatformContext
from soorma.event import Event
from soorma.task import ResultContext, TaskContext
from soorma_common.errors import TaskNotFound
from soorma_common.events import ACTION_REQUESTS, ACTION_RESULTS

logger = logging.getLogger("soorma.worker")

WorkerHandler = Callable[[Any, Any], Awaitable[Any]]
W = TypeVar("W", bound=WorkerHandler)


class Worker(Agent):
    """An agent whose tasks complete asynchronously.

    Example (fan-out / fan-in)::

        worker = Worker(name="analyzer")

        @worker.on_task("analyze.requested")
        async def analyze(task, context):
            await task.delegate_parallel([
                DelegationSpec("sentiment.analyze", {"text": task.data["text"]},
                               "sentiment.completed"),
                DelegationSpec("entity.extract", {"text": task.data["text"]},
                               "entity.completed"),
            ])

        @worker.on_result("sentiment.completed")
        @worker.on_result("entity.completed")
        async def collect(result, context):
            task = await result.restore_task()
            group = task.group_of(result.correlation_id)
            results = task.aggregate_parallel_results(group)
            if results is not None:
                await task.complete({"parts": list(results.values())})

        worker.run()

    Needs the memory service (``context.memory``): task state lives there, not in the
    process. A handler exception nacks the event (it is redelivered, then dead-lettered);
    call ``task.fail(error)`` to answer the caller with a failure instead.
    """

    agent_type = "worker"

    async def start(self) -> None:
        """Start like any agent; refuses a given context without a memory client."""
        if self._context is not None and self._context.memory is None:
            raise RuntimeError(
                f"worker {self.name!r} needs context.memory: its tasks live in the memory "
                "service (build the context with PlatformContext.from_env(), which reads "
                "SOORMA_MEMORY_URL)"
            )
        await super().start()

    def on_task(self, event_type: str, *, topic: str = ACTION_REQUESTS) -> Callable[[W], W]:
        """Register ``async def handler(task: TaskContext, context)`` for requests.

        Args:
            event_type: Request event type (or glob pattern).
            topic: Topic requests arrive on (``action-requests``).

        Raises:
            TypeError: the handler is not ``async def f(task, context)``.
            ValueError: invalid topic or empty event type.
        """
        checked = make_spec(
            topic=topic, event_type=event_type, func=_placeholder, decorator="on_task()"
        )

        def decorator(func: W) -> W:
            check_handler(func, params=("task", "context"), decorator="on_task()")

            async def run_task(event: Event, context: PlatformContext) -> None:
                task = TaskContext.from_event(event, context, agent_id=self.name)
                await func(task, context)

            self._add_handler(
                HandlerSpec(
                    topic=checked.topic, event_type=checked.event_type, func=run_task,
                    name=getattr(func, "__qualname__", repr(func)),
                )
            )
            return func

        return decorator

    def on_result(self, event_type: str, *, topic: str = ACTION_RESULTS) -> Callable[[W], W]:
        """Register ``async def handler(result: ResultContext, context)`` for answers.

        Stack the decorator to handle several answer types with one function. A human's
        answer to ``task.request_human_input()`` arrives on the topic it was asked for:
        pass ``topic="notification-events"`` then.

        Args:
            event_type: Answer event type (a sub-task's ``response_event``).
            topic: Topic answers arrive on (``action-results``).

        Raises:
            TypeError: the handler is not ``async def f(result, context)``.
            ValueError: invalid topic or empty event type.
        """
        checked = make_spec(
            topic=topic, event_type=event_type, func=_placeholder, decorator="on_result()"
        )

        def decorator(func: W) -> W:
            check_handler(func, params=("result", "context"), decorator="on_result()")

            async def run_result(event: Event, context: PlatformContext) -> None:
                result = ResultContext.from_event(event, context)
                try:
                    await func(result, context)
                except TaskNotFound as exc:
                    if not result.restore_attempted:
                        raise
                    # The task was finished (by another replica, or before a redelivery
                    # of this answer): a late answer, nothing left to do. Retrying would
                    # only dead-letter it.
                    logger.info(
                        "worker %s: %s (%s) has no task to resume: %s",
                        self.name, event.type, event.correlation_id, exc,
                    )

            self._add_handler(
                HandlerSpec(
                    topic=checked.topic, event_type=checked.event_type, func=run_result,
                    name=getattr(func, "__qualname__", repr(func)),
                )
            )
            return func

        return decorator


__all__ = ["Worker"]
