"""The tracker's consumer id comes from its settings: the environment is read once, when
``Settings`` is built, and the lifespan resolves the replica identity from that object."""

from __future__ import annotations

from pathlib import Path

import pytest
from asgi_lifespan import LifespanManager

from soorma.consumer_identity import ConsumerIdentity
from tracker_service import create_app
from tracker_service.app import replica_settings
from tracker_service.projector import GROUP
from tracker_service.settings import ReplicaSettings, Settings


def test_the_replica_variables_are_parsed_from_the_settings_not_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SOORMA_REPLICA", "7")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    settings = ReplicaSettings()
    monkeypatch.setenv("SOORMA_REPLICA", "8")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "elsewhere"))
    parsed = replica_settings(settings)
    assert parsed.replica == "7"
    assert parsed.consumer_id is None
    assert parsed.replica_state_dir == tmp_path / "cache" / "soorma"
    assert ConsumerIdentity(GROUP, settings=parsed).consumer_id.endswith("-7")


def test_empty_replica_variables_count_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOORMA_CONSUMER_ID", " ")
    monkeypatch.setenv("SOORMA_STATE_DIR", "")
    settings = ReplicaSettings()
    assert settings.consumer_id is None
    assert settings.state_dir is None


@pytest.mark.asyncio
async def test_the_lifespan_takes_the_consumer_id_its_settings_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SOORMA_CONSUMER_ID", "tracker-from-settings")
    settings = Settings(
        tracker_database_url=f"sqlite+aiosqlite:///{tmp_path / 'tracker.db'}",
        tracker_projector=False,
        tracker_timeouts=False,
    )
    monkeypatch.setenv("SOORMA_CONSUMER_ID", "tracker-read-again")
    app = create_app(settings)
    async with LifespanManager(app) as manager:
        assert manager._state["tracker"].projector.consumer == "tracker-from-settings"
