"""An internal Worker that the A2A gateway exposes as the skill ``expense-review``.

It reports progress, asks a human when the amount is over the limit (the gateway turns
that into the A2A task's ``input-required`` state), has a model write a note that is
streamed to the client while it is written (``soorma.ai.stream_text``: A2A artifact
chunks), and completes with the decision and a closing status message.

    python worker.py                      # the note is a canned text (no model needed)
    NOTE_MODEL=ollama/llama3 python worker.py   # a real model writes it
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import signal

from soorma import Worker
from soorma.ai import stream_text
from soorma_common.registry import AgentCapability, EventDefinition

LIMIT = 100.0
# Any litellm model id; unset: litellm's mock streams a canned note (offline, no key).
NOTE_MODEL = os.environ.get("NOTE_MODEL")
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
    amount = task.data["amount"]
    canned = f"A human {verdict} {amount:.2f} for {task.data['purpose']}."
    # Streamed as it is written: the client sees the note grow, chunk by chunk.
    note = await stream_text(
        task,
        f"In one sentence, note that a human {verdict} an expense of {amount:.2f} "
        f"for {task.data['purpose']}.",
        model=NOTE_MODEL or "openai/note-writer",
        artifact_id="note",
        name="note",
        status="writing the note",
        min_chars=8,
        **({} if NOTE_MODEL else {"mock_response": canned}),
    )
    await task.complete(
        {
            "approved": approved,
            "by": "human",
            "amount": task.data["amount"],
            "answer": result.data.get("text"),
            "note": note,
        },
        message=f"{verdict} by a human",
    )


async def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    # The model library takes seconds to import: before the first task, not during it.
    await asyncio.to_thread(importlib.import_module, "litellm")
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
