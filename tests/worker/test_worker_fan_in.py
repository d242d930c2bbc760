"""Fan-in under concurrency: 100 results racing across worker replicas."""

from __future__ import annotations

import asyncio

import pytest
from worker_helpers import collect

from soorma import AgentOptions, DelegationSpec, PlatformContext, Worker

pytestmark = pytest.mark.asyncio

FAN_OUT = 100
REPLICAS = 3
# At-least-once delivery means answers can come twice: a quarter of them do here.
DUPLICATES = 25


def replica(
    context: PlatformContext,
    handled: list[tuple[int, str]],
    completions: list[bool],
    all_handled: asyncio.Event,
    number: int,
) -> Worker:
    worker = Worker(
        name="bulk",
        context=context,
        options=AgentOptions(max_concurrency=16),
    )

    @worker.on_task("bulk.requested")
    async def fan_out(task, ctx):
        await task.delegate_parallel(
            [DelegationSpec("item.process", {"i": i}, "item.done") for i in range(FAN_OUT)]
        )

    @worker.on_result("item.done")
    async def fan_in(result, ctx):
        try:
            task = await result.restore_task()
            results = task.aggregate_parallel_results(task.group_of(result.correlation_id))
            if results is not None:
                completions.append(await task.complete(sorted(r["i"] for r in results.values())))
        finally:
            handled.append((number, result.correlation_id))
            if len(handled) == FAN_OUT + DUPLICATES:
                all_handled.set()

    return worker


async def test_fan_in_keeps_all_results_and_completes_exactly_once_under_concurrency(
    context: PlatformContext,
):
    handled: list[tuple[int, str]] = []
    completions: list[bool] = []
    all_handled = asyncio.Event()
    workers = [replica(context, handled, completions, all_handled, n) for n in range(REPLICAS)]
    bus = context.bus
    for worker in workers:
        await worker.start()
    try:
        async with (
            bus.subscribe(["action-requests"], event_types=["item.process"]) as requests,
            bus.subscribe(["action-results"], event_types=["bulk.done"]) as answers,
        ):
            await requests.wait_ready()
            await answers.wait_ready()
            await bus.request("bulk.requested", {}, "bulk.done", correlation_id="caller-bulk")
            delegated = await collect(requests, FAN_OUT)
            # Each request carries its own data and a distinct sub-task id.
            assert sorted(e.data["i"] for e in delegated) == list(range(FAN_OUT))
            assert len({e.correlation_id for e in delegated}) == FAN_OUT
            # All answers at once, from several concurrent publishers, so that the
            # replicas record them concurrently; some answers are sent twice.
            results = [
                bus.build_event(
                    "action-results",
                    "item.done",
                    {"i": e.data["i"]},
                    correlation_id=e.correlation_id,
                )
                for e in [*delegated, *delegated[-DUPLICATES:]]
            ]
            await asyncio.gather(*(bus.publish_batch(results[k::4]) for k in range(4)))
            async with asyncio.timeout(60):
                await all_handled.wait()
                # Under load a redelivered answer can be handled twice and fill the count
                # while the handler that completes the task is still running: wait for it.
                while True not in completions:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
            # The completing handler has returned, so its answer has been published; a
            # sentinel published now arrives after it (per-topic order).
            await bus.respond("bulk.done", {"sentinel": True}, correlation_id="sentinel")
            received = []
            async with asyncio.timeout(20):
                async for event in answers:
                    if event.correlation_id == "sentinel":
                        break
                    received.append(event)
    finally:
        for worker in workers:
            await worker.stop()

    assert len(received) == 1, [e.data for e in received]
    answer = received[0]
    assert answer.correlation_id == "caller-bulk"
    assert answer.data["status"] == "completed"
    assert answer.data["result"] == list(range(FAN_OUT))
    assert completions.count(True) == 1
    # More than one replica took part (the work was really shared).
    assert len({number for number, _ in handled}) > 1
    assert await context.memory.get_task_context(answer.data["task_id"]) is None
