"""Worker: asynchronous task agents (layer 3).

A worker's ``on_task`` handler does not return the answer. It saves its task, delegates
sub-tasks (``task.delegate()``, ``task.delegate_parallel()``) or asks a human
(``task.request_human_input()``), and returns. Answers arrive at ``on_result`` handlers —
on any replica, also after a restart — which restore the task from the memory service
and ``complete()`` it when everything is in.

A task request handled once is not run again when it comes back (redelivered after a
crash, or re-sent by a planner): if its answer is recorded (see
:mod:`soorma.agents._answers`) that answer is sent again; if it delegated or asked a
human, the requests still unanswered are re-sent under their original ids.

A memory-service outage does not make a task run twice (as for a :class:`Tool`; the
rule lives in :class:`~soorma.agents._answers.AnswerLog`): while a task's record cannot
be read, its handler does not run (the request waits and runs once the service is
back); a finished task's answer, and the context a delegation saves before its
requests go out, are held in the process and retried for up to ``record_wait``
seconds, neither published nor acked before they are recorded.

A worker that asked a human (``task.request_human_input``) hears the tracker's
``task.timeout`` for its own sub-tasks (published when the deadline passes): the
``@worker.on_timeout()`` handler runs, or, without one, the task fails with
``reason: "hitl_timeout"``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, Unpack

from soorma.agents._answers import (
    DEFAULT_ANSWER_RETENTION,
    DEFAULT_RECORD_WAIT,
    RecordWait,
    keep_answers,
)
from soorma.agents._cancel import TaskCancels, was_cancelled
from soorma.agents._handlers import HandlerSpec, check_handler, make_spec, placeholder
from soorma.agents.base import Agent, AgentArguments
from soorma.context import PlatformContext
from soorma.event import Event
from soorma.tasking.cancelled import is_cancelled
from soorma.tasking.context import TaskContext
from soorma.tasking.results import ResultContext
from soorma_common.errors import TaskNotFound
from soorma_common.events import ACTION_REQUESTS, ACTION_RESULTS, SYSTEM_EVENTS, TASK_TIMEOUT
from soorma_common.memory import SubTaskStatus

logger = logging.getLogger("soorma.worker")

WorkerHandler = Callable[[Any, Any], Awaitable[Any]]
W = TypeVar("W", bound=WorkerHandler)
TimeoutHandler = Callable[[Any, Any, Any], Awaitable[Any]]
TH = TypeVar("TH", bound=TimeoutHandler)

# Published by the tracker when a human did not answer in time.
HITL_TIMEOUT = "hitl_timeout"


class Worker(RecordWait, Agent):
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

    Args:
        answer_retention: Seconds a task's answer is kept for a repeated request
            (default a day; ``0``: off); see the module doc.
        record_wait: Seconds a finished task's answer (or a delegation's saved
            context) waits for an unreachable memory service to record it (default
            300), its request still leased; after that the request is given back and,
            redelivered, runs again.
        **kwargs: See :class:`~soorma.agents.base.Agent`.
    """

    agent_type = "worker"

    def __init__(
        self,
        *,
        answer_retention: float = DEFAULT_ANSWER_RETENTION,
        record_wait: float = DEFAULT_RECORD_WAIT,
        **kwargs: Unpack[AgentArguments],
    ) -> None:
        super().__init__(**kwargs)
        self.answers = keep_answers(self, answer_retention, record_wait)
        self._timeout_handler: TimeoutHandler | None = None
        self._hears_timeouts = False
        self._has_tasks = False
        self.cancels = TaskCancels(self)  # task.cancel_requested (see soorma.agents._cancel)

    async def start(self) -> None:
        """Start like any agent; refuses a given context without a memory client."""
        if self._context is not None and self._context.memory is None:
            raise RuntimeError(
                f"worker {self.name!r} needs context.memory: its tasks live in the memory "
                "service (build the context with PlatformContext.from_env(), which reads "
                "SOORMA_MEMORY_URL)"
            )
        if self._has_tasks and not self.running:
            # Any task may ask a human; the tracker's ``task.timeout`` must reach it.
            self._hear_timeouts()
            self.cancels.listen()  # and any may be cancelled (task.cancel_requested)
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
            topic=topic, event_type=event_type, func=placeholder, decorator="on_task()"
        )

        def decorator(func: W) -> W:
            check_handler(func, params=("task", "context"), decorator="on_task()")

            async def run_task(event: Event, context: PlatformContext) -> None:
                # Leaving the turn (answered, delegated or failed) releases the claim: a
                # copy waiting for the answer, or a redelivery, goes on at once.
                async with await self.answers.begin(context, event.id) as turn:
                    if await turn.resend(context.bus):
                        return
                    if await self._handled_before(event, context):
                        return
                    task = TaskContext.from_event(
                        event, context, agent_id=self.name, answers=self.answers
                    )
                    await self.cancels.run(task, func, context)

            self._add_handler(
                HandlerSpec(
                    topic=checked.topic,
                    event_type=checked.event_type,
                    func=run_task,
                    name=getattr(func, "__qualname__", repr(func)),
                )
            )
            self._has_tasks = True
            return func

        return decorator

    async def _handled_before(self, event: Event, context: PlatformContext) -> bool:
        """True when this task request was handled already (and is now taken care of):
        it delegated or asked a human (its open requests are re-sent). Its recorded
        answer was looked up with the claim (:meth:`AnswerLog.begin`)."""
        if context.memory is None:
            return False
        record = await context.memory.get_task_context(event.id)
        if record is None:
            return False
        if was_cancelled(self.name, record):
            return True
        task = TaskContext.from_record(record, context)
        if not task.has_sent:
            return False  # saved, but nothing delegated or asked: run the handler again
        resent = await task.resend_pending()
        logger.info(
            "worker %s: task %s was handled before; re-sent %d open request(s)",
            self.name,
            event.id,
            resent,
        )
        return True

    def on_timeout(self) -> Callable[[TH], TH]:
        """Register ``async def handler(task, timeout_data, context)`` for HITL timeouts.

        Called when the tracker reports (``task.timeout``) that a human did not answer
        a ``task.request_human_input()`` of this worker in time; ``timeout_data`` is the
        event's data (``task_id``, ``sub_task_id``, ``reason``, ``deadline``,
        ``timeout_seconds``). Without a handler the task fails with
        ``reason: "hitl_timeout"``. A human answer arriving after that is ignored.

        Raises:
            TypeError: the handler is not ``async def f(task, timeout_data, context)``.
            RuntimeError: a second handler.
        """

        def decorator(func: TH) -> TH:
            check_handler(
                func, params=("task", "timeout_data", "context"), decorator="on_timeout()"
            )
            if self._timeout_handler is not None:
                raise RuntimeError(f"worker {self.name!r} already has an on_timeout() handler")
            self._timeout_handler = func
            self._hear_timeouts()
            return func

        return decorator

    def _hear_timeouts(self) -> None:
        if self._hears_timeouts:
            return
        self._hears_timeouts = True
        self._add_handler(
            HandlerSpec(
                topic=SYSTEM_EVENTS,
                event_type=TASK_TIMEOUT,
                func=self._timed_out,
                name=f"{self.name} task.timeout",
            )
        )

    async def _timed_out(self, event: Event, context: PlatformContext) -> None:
        """A ``task.timeout``: fail (or hand to ``on_timeout``) our task if still waiting."""
        data = dict(event.data)
        sub_task_id = str(data.get("sub_task_id") or event.correlation_id or "")
        if not sub_task_id or context.memory is None:
            return
        record = await context.memory.get_task_by_subtask(sub_task_id)
        if record is None:
            return  # not a task of ours, or it has ended
        task = TaskContext.from_record(record, context, answers=self.answers)
        sub = task.sub_tasks.get(sub_task_id)
        if is_cancelled(record):
            return  # the task was cancelled: nothing to time out
        if task.agent_id != self.name or sub is None or sub.status is not SubTaskStatus.PENDING:
            return  # another worker's task, or the human answered first
        if self._timeout_handler is not None:
            await self._timeout_handler(task, data, context)
            return
        reason = str(data.get("reason") or HITL_TIMEOUT)
        await task.fail(
            f"no answer from a human before the deadline ({data.get('deadline')})",
            reason=reason,
            sub_task_id=sub_task_id,
            deadline=data.get("deadline"),
            timeout_seconds=data.get("timeout_seconds"),
        )

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
            topic=topic, event_type=event_type, func=placeholder, decorator="on_result()"
        )

        def decorator(func: W) -> W:
            check_handler(func, params=("result", "context"), decorator="on_result()")

            async def run_result(event: Event, context: PlatformContext) -> None:
                result = ResultContext.from_event(event, context, answers=self.answers)
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
                        self.name,
                        event.type,
                        event.correlation_id,
                        exc,
                    )

            self._add_handler(
                HandlerSpec(
                    topic=checked.topic,
                    event_type=checked.event_type,
                    func=run_result,
                    name=getattr(func, "__qualname__", repr(func)),
                )
            )
            return func

        return decorator


__all__ = ["Worker"]
