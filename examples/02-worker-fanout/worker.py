"""The analyzer: fans ``analyze.requested`` out to three tools and fans the answers in.

``on_task`` delegates the three analyses in parallel and returns at once. Each answer
reaches ``on_result`` — on whichever replica gets it — which records it on the task in
the memory service and completes the task when the third one is in.
"""

from __future__ import annotations

import logging

from soorma import DelegationSpec, Worker

# request event -> answer event; each tool answers with its own key(s) of the aggregate
ANALYSES = {
    "sentiment.analyze": "sentiment.completed",
    "entity.extract": "entity.completed",
    "topic.classify": "topic.completed",
}

worker = Worker(name="text-analyzer", description="Sentiment, entities and topics of a text.")


@worker.on_task("analyze.requested")
async def analyze(task, context):
    text = task.data.get("text")
    if not isinstance(text, str) or not text.strip():
        await task.fail("data.text must be a non-empty string")
        return
    await task.delegate_parallel(
        [DelegationSpec(request, {"text": text}, answer) for request, answer in ANALYSES.items()]
    )


@worker.on_result("sentiment.completed")
@worker.on_result("entity.completed")
@worker.on_result("topic.completed")
async def collect(result, context):
    task = await result.restore_task()
    results = task.aggregate_parallel_results(task.group_of(result.correlation_id))
    if results is None:
        return  # still waiting for the others
    aggregate = {}
    for sub_task_id, answer in results.items():
        if not answer.get("success"):
            failed = task.sub_tasks[sub_task_id].event_type
            await task.fail(f"{failed} failed: {answer.get('error')}")
            return
        aggregate.update(answer["result"])
    await task.complete(aggregate)


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    worker.run()
