"""TaskContext and ResultContext: the Worker's async task model.

A worker's task outlives the handler that received it. Its state — the original caller's
correlation id and response event, the delegated sub-tasks and their results — lives in
the memory service, not in the process, so any replica (or a restarted process) can pick
the task up when a sub-task's result arrives:

1. ``on_task`` gets a :class:`TaskContext`; ``delegate()`` / ``delegate_parallel()``
   save the context *before* publishing the requests (``correlation_id`` = sub-task id).
2. ``on_result`` gets a :class:`ResultContext`; ``restore_task()`` records the result
   through the memory service's atomic endpoint and returns the whole, current context,
   so fan-in decides completion from data no concurrent result can overwrite.
3. ``complete()`` / ``fail()`` claim the task with a versioned write (exactly one claimant
   wins when results race), answer the caller's ``response_event`` with the caller's
   original ``correlation_id``, then delete the context.

The implementation lives in :mod:`soorma.tasking`: ``stored`` (building, saving and
claiming a task), ``context`` (delegation, fan-in, answering, progress, human input) and
``results`` (``ResultContext``); this module keeps the public import path ``soorma.task``.
"""

from __future__ import annotations

from soorma.tasking.context import (
    HUMAN_INPUT_EVENT,
    PROGRESS_EVENT,
    DelegationSpec,
    SubTaskInfo,
    TaskContext,
)
from soorma.tasking.results import ResultContext

__all__ = [
    "HUMAN_INPUT_EVENT",
    "PROGRESS_EVENT",
    "DelegationSpec",
    "ResultContext",
    "SubTaskInfo",
    "TaskContext",
]
