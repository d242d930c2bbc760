"""A replica that never returns: a live replica takes its tasks over (SIGKILL, two replicas).

Replica K runs in its own process and is SIGKILLed while two of its tasks run. Replica A
(alive) stops hearing K's heartbeat, takes both tasks over after the lease, and:

- the task whose answer arrives after the kill completes (the answer is applied by A);
- the task no answer ever reaches fails after the grace period, naming why.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys

import httpx
import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState
from google.protobuf.json_format import MessageToDict

from soorma.client import verified_tls
from testsupport import forkserver
from testsupport.a2a import a2a_client, collect, final_task, send_request, user_message
from testsupport.gateway_platform import HEADERS_A, KEY_A, KEY_B, Platform
from testsupport.server import free_port

pytestmark = pytest.mark.asyncio

S = TaskState
FAST = {
    "gateway_heartbeat_seconds": 0.1,
    "gateway_replica_lease_seconds": 0.8,
    "gateway_takeover_grace_seconds": 0.5,
}


async def start_replica_process(p: Platform, replica: str) -> tuple[forkserver.ForkedProcess, str]:
    """A gateway replica in its own process (so it can be SIGKILLed)."""
    port = free_port()
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "SOORMA_EVENT_SERVICE_URL": p.events.url,
        "SOORMA_REGISTRY_URL": p.registry.url,
        "SOORMA_GATEWAY_DATABASE_URL": p.database,
        "SOORMA_DATA_DIR": str(p.tmp_path),
        "SOORMA_GATEWAY_URL": f"http://127.0.0.1:{port}",
        "SOORMA_GATEWAY_REPLICA_ID": replica,
        "SOORMA_GATEWAY_CARD_TTL_SECONDS": "0",
        "SOORMA_GATEWAY_API_KEYS": json.dumps({KEY_A: "tenant-a", KEY_B: "tenant-b"}),
        "SOORMA_DEFAULT_TENANT": "tenant-a",
        **{f"SOORMA_{k.upper()}": str(v) for k, v in FAST.items()},
    }
    proc = await forkserver.ForkedProcess.start(
        sys.executable,
        "-m",
        "uvicorn",
        "--factory",
        "gateway_a2a.app:create_app",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        env=env,
    )
    proc.keep_output()
    url = f"http://127.0.0.1:{port}"
    async with (
        httpx.AsyncClient(
            verify=verified_tls(),
        ) as http,
        asyncio.timeout(60),
    ):
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if (await http.get(f"{url}/health")).status_code == 200:
                    return proc, url
            if proc.returncode is not None:
                await proc.wait()
                raise RuntimeError(f"replica {replica} exited:\n{proc.output}")
            await asyncio.sleep(0.1)


async def wait_state(client, task_id: str, state: int, within: float = 20.0):
    async with asyncio.timeout(within):
        while True:
            task = await client.get_task(GetTaskRequest(id=task_id))
            if task.status.state == state:
                return task
            await asyncio.sleep(0.1)


@pytest.mark.postgres
async def test_tasks_of_a_killed_replica_are_taken_over(pg_platform: Platform):
    p = pg_platform
    assert p.gateway is not None
    await p.gateway.stop()  # replica A again, with the short heartbeat/lease/grace
    p.gateway = await p.start_gateway(**FAST)
    proc, url_k = await start_replica_process(p, "replica-k")
    try:
        async with a2a_client(url_k, streaming=False, headers=HEADERS_A) as on_k:
            ids = {}
            for doc in ("k-answered", "k-silent"):
                sent = await collect(
                    on_k,
                    send_request(
                        user_message(data={"doc": doc, "mode": "slow"}, skill="review"),
                        blocking=False,
                    ),
                )
                ids[doc] = final_task(sent).id
            for task_id in ids.values():
                await wait_state(on_k, task_id, S.TASK_STATE_WORKING)
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        p.control.release("k-answered")  # answered after K died; K never comes back
        async with a2a_client(p.url, streaming=False, headers=HEADERS_A) as on_a:
            done = await wait_state(on_a, ids["k-answered"], S.TASK_STATE_COMPLETED)
            failed = await wait_state(on_a, ids["k-silent"], S.TASK_STATE_FAILED)
        assert MessageToDict(done.artifacts[0].parts[0].data)["verdict"] == "late"
        reason = " ".join(p.text for p in failed.status.message.parts)
        assert "replica running this task stopped" in reason
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        p.control.release("k-silent")
