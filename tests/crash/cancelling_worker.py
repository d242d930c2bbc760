"""A worker run as its own process, for the delegated-cancel crash test.

Its handler prints ``handler-started <task id>``, delegates ``chart.draw`` (nobody
answers it) and waits. ``CRASH_HOLD=mid_cancel`` stops the process (print, then sleep)
right after a cancel request's mark was stored and before the handler was interrupted
or anything announced, so the test can SIGKILL it there.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from soorma import AgentOptions, Worker
from soorma.agents import _cancel

if os.environ.get("CRASH_HOLD") == "mid_cancel":
    store_mark = _cancel.mark_cancelled

    async def hold_after_storing(*args: Any, **kwargs: Any) -> Any:
        record = await store_mark(*args, **kwargs)
        if record is not None:
            print(f"cancel stored {record.task_id}", flush=True)
            await asyncio.sleep(600)
        return record

    _cancel.mark_cancelled = hold_after_storing  # type: ignore[assignment]

worker = Worker(
    name="analyst",
    options=AgentOptions(
        visibility_timeout=float(os.environ.get("CRASH_VISIBILITY", "2")), ack_window=0.9
    ),
)
# A killed process's claim on its running task lapses after this long.
worker.answers.claim_lease = 2.0


@worker.on_task("analysis.requested")
async def analyse(task: Any, context: Any) -> None:
    print(f"handler-started {task.task_id}", flush=True)
    await task.delegate("chart.draw", {"kind": "bar"}, "chart.drawn")
    try:
        await asyncio.sleep(600)
    except asyncio.CancelledError:
        print(f"handler-cancelled {task.task_id}", flush=True)
        raise


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    worker.run()
