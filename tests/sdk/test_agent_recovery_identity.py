"""How an agent replica picks its consumer id (stable across restarts, distinct per replica)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from soorma import Agent, AgentOptions
from soorma.consumer_identity import ConsumerIdentity


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SOORMA_CONSUMER_ID", raising=False)
    monkeypatch.delenv("SOORMA_REPLICA", raising=False)
    monkeypatch.setenv("SOORMA_STATE_DIR", str(tmp_path / "state"))


def test_an_explicit_id_wins_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOORMA_CONSUMER_ID", "pod-7")
    monkeypatch.setenv("SOORMA_REPLICA", "3")
    assert ConsumerIdentity("g", "given").consumer_id == "given"
    assert ConsumerIdentity("g").consumer_id == "pod-7"
    monkeypatch.delenv("SOORMA_CONSUMER_ID")
    replica = ConsumerIdentity("g")
    assert replica.consumer_id.endswith("-3") and replica.source == "SOORMA_REPLICA"


def test_an_invalid_id_names_its_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOORMA_CONSUMER_ID", "bad id/with slash")
    with pytest.raises(ValueError, match="SOORMA_CONSUMER_ID"):
        ConsumerIdentity("g")
    with pytest.raises(ValueError, match="consumer_id"):
        Agent(
            name="a",
            options=AgentOptions(consumer_id="-dash-first"),
        )


def test_replicas_take_distinct_slots_and_a_freed_slot_is_taken_again() -> None:
    one, two = ConsumerIdentity("workers"), ConsumerIdentity("workers")
    assert (one.source, two.source) == ("slot", "slot")
    assert one.consumer_id.endswith("-0") and two.consumer_id.endswith("-1")
    other_group = ConsumerIdentity("planners")
    assert other_group.consumer_id.endswith("-0")
    one.release()  # the process stopped (or died: the OS drops the lock)
    again = ConsumerIdentity("workers")
    assert again.consumer_id == one.consumer_id
    for identity in (two, other_group, again):
        identity.release()


def test_without_a_usable_state_dir_the_id_is_random_with_a_warning(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("SOORMA_STATE_DIR", str(blocker))
    with caplog.at_level(logging.WARNING, logger="soorma.agent"):
        first, second = ConsumerIdentity("g"), ConsumerIdentity("g")
    assert first.source == "random" and first.consumer_id != second.consumer_id
    assert "SOORMA_CONSUMER_ID" in caplog.text
