"""soorma._concurrency.retry_on_conflict, the SDK's one optimistic-concurrency loop,
against the real memory service: no lost update, the budget, the jitter, and stopping."""

from __future__ import annotations

import asyncio

import pytest

from soorma._concurrency import (
    BACKOFF_BASE,
    BACKOFF_CAP,
    CONFLICT_RETRIES,
    backoff,
    retry_on_conflict,
    retry_while_unavailable,
)
from soorma.memory import MemoryClient
from soorma_common.errors import PlanNotFound, ServiceUnavailable, VersionConflict
from soorma_common.memory import PlanContextRecord


class Recorder:
    """The real backoff, with the conflicts it was asked about written down."""

    def __init__(self) -> None:
        self.asked: list[int] = []
        self.waits: list[float] = []

    def __call__(self, conflicts: int) -> float:
        wait = backoff(conflicts)
        self.asked.append(conflicts)
        self.waits.append(wait)
        return wait


@pytest.mark.asyncio(loop_scope="module")
async def test_writers_that_collide_retry_until_every_change_is_stored(memory: MemoryClient):
    await memory.store_plan_context("p1", None, {"goal_event": "g", "state": {"seen": []}})
    writers = 8
    barrier = asyncio.Barrier(writers)
    delays = Recorder()

    async def append(name: str) -> PlanContextRecord:
        first = True

        async def write() -> PlanContextRecord:
            nonlocal first
            record = await memory.get_plan_context("p1")
            assert record is not None
            if first:  # every writer reads the same version before anyone writes
                first = False
                await barrier.wait()
            record.state["seen"] = [*record.state["seen"], name]
            return await memory.replace_plan_context(record, expected_version=record.version)

        return await retry_on_conflict(write, delay=delays)

    await asyncio.gather(*(append(f"w{i}") for i in range(writers)))
    stored = await memory.get_plan_context("p1")
    assert stored is not None
    assert sorted(stored.state["seen"]) == sorted(f"w{i}" for i in range(writers))
    assert stored.version == 1 + writers
    # All but one writer lost the first round; each retry waited a jittered time first.
    assert delays.asked.count(1) == writers - 1
    for conflicts, wait in zip(delays.asked, delays.waits, strict=True):
        assert 0.0 <= wait <= min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (conflicts - 1))


@pytest.mark.asyncio(loop_scope="module")
async def test_the_budget_is_retries_rereads_then_the_conflict_reaches_the_caller(
    memory: MemoryClient,
):
    await memory.store_plan_context("p1", None, {"goal_event": "g"})
    writes = rereads = 0
    delays = Recorder()

    async def write_after_a_rival() -> PlanContextRecord:
        nonlocal writes
        record = await memory.get_plan_context("p1")
        assert record is not None
        rival = record.model_copy(deep=True)
        rival.current_state = f"rival-{writes}"
        await memory.replace_plan_context(rival, expected_version=rival.version)
        writes += 1
        return await memory.replace_plan_context(record, expected_version=record.version)

    async def reread() -> None:
        nonlocal rereads
        rereads += 1

    with pytest.raises(VersionConflict):
        await retry_on_conflict(write_after_a_rival, reread, retries=4, delay=delays)
    assert (writes, rereads) == (5, 4)
    assert delays.asked == [1, 2, 3, 4]
    assert CONFLICT_RETRIES == 20  # the one documented budget (docs/reliability.md)


@pytest.mark.asyncio(loop_scope="module")
async def test_a_reread_that_raises_stops_the_retries(memory: MemoryClient):
    stored = await memory.store_plan_context("p1", None, {"goal_event": "g"})
    writes = 0

    async def stale_write() -> PlanContextRecord:
        nonlocal writes
        writes += 1
        return await memory.replace_plan_context(stored, expected_version=stored.version - 1)

    async def reread() -> None:
        await memory.delete_plan_context("p1")
        if await memory.get_plan_context("p1") is None:
            raise PlanNotFound("p1 was deleted")

    with pytest.raises(PlanNotFound):
        await retry_on_conflict(stale_write, reread)
    assert writes == 1


def test_backoff_is_full_jitter_growing_to_a_cap() -> None:
    for conflicts in (1, 2, 3, 6, 7, 20, 500):
        bound = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (conflicts - 1))
        waits = {backoff(conflicts) for _ in range(200)}
        assert all(0.0 <= w <= bound for w in waits)
        assert len(waits) > 150  # random, not a fixed schedule
        assert max(waits) > bound / 2
    assert BACKOFF_BASE * 2**6 > BACKOFF_CAP  # the cap applies from the 7th conflict on


@pytest.mark.asyncio(loop_scope="module")
async def test_an_outage_is_waited_out_with_doubling_pauses_until_the_budget() -> None:
    attempts: list[float] = []
    pauses: list[float] = []

    async def back_on_third() -> str:
        attempts.append(0)
        if len(attempts) < 3:
            raise ServiceUnavailable("down for a restart")
        return "done"

    result = await retry_while_unavailable(
        back_on_third,
        wait=1.0,
        first_pause=0.01,
        max_pause=0.015,
        on_retry=lambda exc, pause, waited: pauses.append(pause),
    )
    assert result == "done"
    assert pauses == [0.01, 0.015]

    async def never_back() -> None:
        attempts.append(0)
        raise ServiceUnavailable("still down")

    attempts.clear()
    with pytest.raises(ServiceUnavailable, match="still down"):
        await retry_while_unavailable(never_back, wait=0.03, first_pause=0.01, max_pause=0.01)
    # Pauses of 0.01 s until 0.03 s are spent: the first try and three more.
    assert len(attempts) == 4
