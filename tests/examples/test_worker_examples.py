"""examples/02-worker-fanout and 03-working-memory run as documented, as real processes
(03's worker under ``soorma run``, as its README starts it)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from event_service import create_app as create_event_app
from event_service.settings import Settings as EventSettings
from memory_service import create_app as create_memory_app
from memory_service.settings import Settings as MemorySettings
from soorma import PlatformContext, PlatformSettings
from testsupport.server import closed_port, serve
from tracker_service import create_app as create_tracker_app
from tracker_service.settings import Settings as TrackerSettings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sdk"))
from sdk_helpers import Proc, soorma_run, subprocess_env

pytestmark = pytest.mark.asyncio

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FANOUT = EXAMPLES / "02-worker-fanout"
WORKING_MEMORY = EXAMPLES / "03-working-memory"


@pytest_asyncio.fixture
async def services(sqlite_url: str, tmp_path: Any) -> AsyncIterator[dict[str, str]]:
    """Event service and memory service; the environment the example processes get."""
    memory_settings = MemorySettings(
        memory_database_url=sqlite_url, data_dir=tmp_path, memory_prune_interval_seconds=3600
    )
    async with (
        serve(create_event_app(EventSettings(event_backend="memory"))) as events,
        serve(create_memory_app(memory_settings)) as memory,
    ):
        yield subprocess_env(
            SOORMA_EVENT_SERVICE_URL=events.url,
            SOORMA_MEMORY_URL=memory.url,
            # No registry in these tests: a closed port, never someone else's registry.
            SOORMA_REGISTRY_URL=f"http://127.0.0.1:{closed_port()}",
        )


async def start_all(env: dict[str, str], *scripts: tuple[Path, str]) -> list[Proc]:
    """Start example processes and wait until each printed its ready line."""
    procs = [await Proc.start(sys.executable, str(path), env=env) for path, _ in scripts]
    await asyncio.gather(*(p.wait_for(ready) for p, (_, ready) in zip(procs, scripts, strict=True)))
    return procs


async def test_fanout_client_prints_the_aggregate_of_three_tools(services: dict[str, str]):
    procs = await start_all(
        services,
        (FANOUT / "tools.py", "agent topic-tool ready"),
        (FANOUT / "worker.py", "agent text-analyzer ready"),
    )
    try:
        await asyncio.gather(
            *(
                procs[0].wait_for(f"agent {name} ready")
                for name in ("sentiment-tool", "entity-tool")
            )
        )
        client = await Proc.start(
            sys.executable,
            str(FANOUT / "client.py"),
            "I love the new laptop from Acme, but the flight to Berlin was late.",
            env=services,
        )
        assert await client.wait() == 0, client.output + "\n" + procs[1].output
        assert json.loads(client.lines[-1]) == {
            "entities": ["Acme", "Berlin"],
            "sentiment": {"label": "neutral", "score": 0},
            "topics": ["technology", "travel"],
        }
        bad = await Proc.start(sys.executable, str(FANOUT / "client.py"), " ", env=services)
        assert await bad.wait() == 1
        assert "analysis failed: data.text must be a non-empty string" in bad.output
        for proc in procs:
            assert await proc.stop(signal.SIGINT) == 0, proc.output
    finally:
        for proc in procs:
            await proc.kill()


async def test_working_memory_worker_reads_the_record_by_key(
    services: dict[str, str], tmp_path: Any
):
    tracker_settings = TrackerSettings(
        tracker_database_url=f"sqlite+aiosqlite:///{tmp_path}/tracker.db",
        data_dir=tmp_path,
        event_service_url=services["SOORMA_EVENT_SERVICE_URL"],
        memory_url=services["SOORMA_MEMORY_URL"],
    )
    # As the README runs it: `soorma run worker.py`, then `python planner.py V-42`.
    worker = await soorma_run(str(WORKING_MEMORY / "worker.py"), env=services)
    settings = PlatformSettings(event_service_url=services["SOORMA_EVENT_SERVICE_URL"])
    try:
        async with (
            serve(create_tracker_app(tracker_settings)) as tracker,
            PlatformContext.from_env(settings=settings) as watcher,
            watcher.bus.subscribe(
                ["action-requests"], event_types=["parts.check.requested"]
            ) as requests,
        ):
            await requests.wait_ready()
            planner = await Proc.start(
                sys.executable, str(WORKING_MEMORY / "planner.py"), "V-42", env=services
            )
            assert await planner.wait() == 0, planner.output + "\n" + worker.output
            request = await anext(requests)
            # The id scopes working memory; no plan runs, so the tracker lists none
            # (a request carrying a plan id would leave one ``pending`` forever).
            assert request.plan_id is None
            api = f"{tracker.url}/v1/tracker"
            async with asyncio.timeout(20):
                while (await watcher.http.get(f"{api}/tasks/{request.id}")).status_code != 200:  # noqa: ASYNC110
                    await asyncio.sleep(0.1)
            assert (await watcher.http.get(f"{api}/plans")).json()["plans"] == []
        assert planner.lines[-1] == (
            "vehicle V-42: 600 history entries; in stock: brake_pads, wiper_blades; "
            "to order: oil_filter"
        )
        # The event carried the key, not the ~100 KB record.
        assert set(request.data) == {"vehicle_id", "plan_id", "memory_key"}
        assert len(json.dumps(request.data)) < 300
        assert await worker.stop(signal.SIGINT) == 0, worker.output
    finally:
        await worker.kill()
