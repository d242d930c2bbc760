"""An internal Worker that the A2A gateway exposes as the skill ``expense-review``.

It reports progress, asks a human when the amount is over the limit (the gateway turns
that into the A2A task's ``input-required`` state), streams a note in chunks while it
finishes (A2A artifact updates, as an LLM would stream its text), and completes with the
decision and a closing status message.

    python worker.py
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

from soorma import Worker
from soorma_common.registry import AgentCapability, EventDefinition

LIMIT = 100.0
EXPENSE_SCHEMA = {
    "type": "object",
    "properties": {
        "amount": {"type": "number", "exclusiveMinimum": 0},
        "purpose": {"type": "string", "minLength": 1},
    },
    "required": ["amount", "purpose"],
}

worker = Worker(
    name="expense-approver",
    description="Approves expenses; asks a human above the limit.",
    capabilities=[
        AgentCapability(
            task_name="expense-review",
            description="Review an expense claim",
            consumed_event=EventDefinition(
                event_name="expense.review.requested", payload_schema=EXPENSE_SCHEMA
            ),
        )
    ],
)


@worker.on_task("expense.review.requested")
async def review(task, context):
    amount, purpose = task.data["amount"], task.data["purpose"]
    await task.report_progress(0.3, "checking the expense policy")
    if amount <= LIMIT:
        await task.complete({"approved": True, "by": "policy", "amount": amount})
        return
    await task.request_human_input(
        f"Approve {amount:.2f} for {purpose}?",
        response_event="expense.decision",
        timeout_seconds=300,
    )


@worker.on_result("expense.decision", topic="notification-events")
async def decision(result, context):
    task = await result.restore_task()
    approved = bool(result.data.get("approved"))
    verdict = "approved" if approved else "declined"
    chunks = ["A human ", f"{verdict} ", f"{task.data['amount']:.2f}."]
    for index, chunk in enumerate(chunks):
        await task.send_artifact(
            chunk, artifact_id="note", name="note", append=index > 0, last_chunk=index == 2
        )
    await task.complete(
        {
            "approved": approved,
            "by": "human",
            "amount": task.data["amount"],
            "note": result.data.get("text"),
        },
        message=f"{verdict} by a human",
    )


async def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    await worker.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await worker.stop()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
