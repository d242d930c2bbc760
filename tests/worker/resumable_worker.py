"""A worker run as its own process by test_worker_restart.py.

``job.requested`` delegates one ``step.requested`` and returns; the answer
(``step.done``) completes the job. Nothing about the job is kept in the process.
"""

from __future__ import annotations

import logging

from soorma import Worker

worker = Worker(name="resumable")


@worker.on_task("job.requested")
async def start_job(task, context):
    sub_task_id = await task.delegate("step.requested", {"job": task.data["job"]}, "step.done")
    print(f"delegated {sub_task_id}", flush=True)


@worker.on_result("step.done")
async def finish_job(result, context):
    task = await result.restore_task()
    await task.complete({"job": task.data["job"], "step": result.data})
    print(f"completed {task.task_id}", flush=True)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    worker.run()
