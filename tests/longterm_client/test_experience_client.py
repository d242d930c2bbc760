"""context.memory.episodes and .procedures, forget_user and the embedding calls, against
the real memory service (deterministic embedder)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from soorma_common.errors import PermissionDenied, ValidationFailed
from soorma_common.knowledge import (
    EmbeddingInfo,
    EpisodeRecord,
    ForgetResult,
    ProcedureRecord,
    ReembedStatus,
)

pytestmark = pytest.mark.asyncio


async def test_episodes_log_recent_window_and_search_in_a_time_range(memory):
    logged = []
    for i, (role, text) in enumerate(
        [
            ("user", "My parcel to Oslo is late."),
            ("assistant", "I am sorry, let me check the parcel status."),
            ("user", "Also, can I change my billing address?"),
            ("assistant", "Yes, billing addresses can be changed in settings."),
        ]
    ):
        logged.append(
            await memory.episodes.log("support-bot", role, text, session_id="s1", metadata={"i": i})
        )
    await memory.episodes.log("support-bot", "user", "Another conversation.", session_id="s2")
    assert isinstance(logged[0], EpisodeRecord) and logged[0].user_id == "user-1"

    window = await memory.episodes.recent("support-bot", limit=3, session_id="s1")
    assert [e.id for e in window] == [e.id for e in logged[1:]]  # the latest 3, oldest first

    found = await memory.episodes.search("support-bot", "late parcel Oslo", limit=2)
    assert found.hits[0].record.id == logged[0].id
    later = await memory.episodes.search(
        "support-bot", "late parcel Oslo", since=datetime.now(UTC) + timedelta(minutes=1)
    )
    assert later.hits == []
    before = await memory.episodes.search(
        "support-bot", "late parcel Oslo", until=datetime.now(UTC) - timedelta(days=1)
    )
    assert before.hits == []

    assert await memory.episodes.delete(logged[0].id) is True
    assert await memory.episodes.delete(logged[0].id) is False
    assert logged[0].id not in [e.id for e in await memory.episodes.recent("support-bot")]


async def test_episodes_are_private_to_user_and_agent(make_memory):
    alice, bob = make_memory("tenant-a", "alice"), make_memory("tenant-a", "bob")
    other_tenant = make_memory("tenant-b", "alice")
    await alice.episodes.log("support-bot", "user", "My secret order is 99.")

    assert await bob.episodes.recent("support-bot") == []
    assert (await bob.episodes.search("support-bot", "secret order")).hits == []
    assert await alice.episodes.recent("sales-bot") == []
    assert await other_tenant.episodes.recent("support-bot") == []
    assert len(await alice.episodes.recent("support-bot")) == 1


async def test_episode_with_an_unknown_role_is_refused(memory):
    with pytest.raises(ValidationFailed, match="role"):
        await memory.episodes.log("bot", "narrator", "hello")  # type: ignore[arg-type]


async def test_procedures_what_applies_here_own_agent_and_public(make_memory):
    alice, bob = make_memory("tenant-a", "alice"), make_memory("tenant-a", "bob")
    refund = await alice.procedures.add(
        "Quote the order id in refund answers.",
        situation="a customer asks about a refund",
        agent_id="support-bot",
    )
    greeting = await alice.procedures.add(
        "You are a friendly support agent.", kind="prompt", situation="any conversation"
    )
    shared = await alice.procedures.add(
        "Customer: where is my refund? Agent: It is on its way, order 12.",
        kind="example",
        situation="a customer asks where the refund is",
        public=True,
    )
    assert isinstance(refund, ProcedureRecord) and refund.kind == "rule"

    question = "customer asks about a refund"
    applies = await alice.procedures.relevant(question, agent_id="support-bot")
    ids = [h.record.id for h in applies.hits]
    assert ids[0] == refund.id and shared.id in ids
    examples = await alice.procedures.relevant("refund", kinds=["example"])
    assert [h.record.id for h in examples.hits] == [shared.id]

    bob_sees = await bob.procedures.relevant(question, agent_id="support-bot")
    assert [h.record.id for h in bob_sees.hits] == [shared.id]

    assert {p.id for p in await alice.procedures.list(kind="prompt")} == {greeting.id}
    assert {p.id for p in await alice.procedures.list(agent_id="support-bot")} >= {refund.id}
    assert (await alice.procedures.get(refund.id)).situation == "a customer asks about a refund"
    assert await bob.procedures.get(refund.id) is None
    assert await alice.procedures.delete(refund.id) is True
    assert await alice.procedures.get(refund.id) is None
    assert await alice.procedures.delete(refund.id) is False


async def test_forget_user_deletes_every_memory_type_of_that_user_only(make_memory):
    alice, bob = make_memory("tenant-a", "alice"), make_memory("tenant-a", "bob")
    await alice.knowledge.add("Alice likes tea.")
    await alice.knowledge.add("Alice's public note.", public=True)
    await alice.episodes.log("bot", "user", "hello from alice")
    await alice.procedures.add("Say hi to Alice.", situation="alice writes")
    kept = await bob.knowledge.add("Bob likes coffee.")
    with pytest.raises(PermissionDenied):
        await bob.forget_user("alice")  # only alice herself, or a platform service

    result = await alice.forget_user("alice")

    assert isinstance(result, ForgetResult)
    assert (result.user_id, result.semantic, result.episodic, result.procedural) == (
        "alice",
        2,
        1,
        1,
    )
    assert await alice.knowledge.list() == []
    assert await alice.episodes.recent("bot") == []
    assert await alice.procedures.list() == []
    after = await bob.knowledge.search("Alice's public note")
    assert all(h.record.user_id != "alice" for h in after.hits)
    assert await bob.knowledge.get(kept.id) is not None


async def test_embedding_info_and_reembed_status(memory, make_memory):
    info = await memory.embedding_info()
    assert isinstance(info, EmbeddingInfo)
    assert info.model.startswith("deterministic") and info.dimensions > 0
    assert info.records_on_other_models == 0

    await memory.knowledge.add("one record to re-embed")
    with pytest.raises(PermissionDenied):
        await memory.reembed()  # platform services only
    service = make_memory(role="service")
    started = await service.reembed()
    assert isinstance(started, ReembedStatus) and started.model == info.model
    async with asyncio.timeout(20):
        status = started
        while status.state == "running":
            await asyncio.sleep(0.05)
            status = await service.reembed_status()
    assert status.state in {"done", "idle"}, status
