"""Start-up: migrations create the schema once, data survives a restart, /ready checks the DB."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from registry_payloads import order_validator

from registry_service.app import VERSION_TABLE
from servicekit.db import make_engine
from testsupport.services import in_process

pytestmark = pytest.mark.asyncio


async def test_registrations_survive_a_restart_and_migrations_run_once(
    make_client, db_url: str
) -> None:
    async with make_client() as client:
        assert (await client.post("/v1/agents", json=order_validator())).status_code == 201
    async with make_client() as client:  # second start-up: migrations are a no-op
        r = await client.get("/v1/agents/validator-1")
        assert r.status_code == 200
        assert r.json()["capabilities"][0]["consumed_event"]["event_name"] == "order.validate"
        assert (await client.get("/v1/events/order.validated")).status_code == 200

    engine = make_engine(db_url)
    try:
        async with engine.connect() as conn:
            versions = await conn.execute(sa.text(f"SELECT version_num FROM {VERSION_TABLE}"))
            assert [v for (v,) in versions] == ["0001_initial"]
            tables = await conn.run_sync(lambda c: set(sa.inspect(c).get_table_names()))
    finally:
        await engine.dispose()
    assert {
        "registry_agents",
        "registry_agent_capabilities",
        "registry_agent_events",
        "registry_events",
        VERSION_TABLE,
    } <= tables


async def test_ready_reports_the_database(make_client) -> None:
    async with make_client() as client:
        r = await client.get("/ready")
        assert r.status_code == 200
        assert r.json()["checks"] == {"database": "ok"}


async def test_the_embedded_default_is_an_sqlite_file_in_the_data_dir(tmp_path) -> None:
    from registry_service import Settings, create_app

    settings = Settings(data_dir=tmp_path / "data", database_url=None, registry_database_url=None)
    async with in_process(create_app(settings)) as client:
        assert (await client.post("/v1/agents", json=order_validator())).status_code == 201
    assert (tmp_path / "data" / "registry.db").is_file()
