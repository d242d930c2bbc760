"""The whole platform in ``jwt`` mode: the gateway acts as a platform service
(claim ``soorma_role=service``).

It publishes each task as the caller's tenant and reads every tenant's answers from the
tap with its service token; each tenant's own agents (with their own tenant tokens) answer
only their tenant's tasks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import pytest
import pytest_asyncio
from a2a.types.a2a_pb2 import TaskState
from google.protobuf.json_format import MessageToDict

from event_service import create_app as create_event_app
from gateway_a2a import create_app as create_gateway_app
from gateway_a2a.settings import Settings as GatewaySettings
from memory_service import create_app as create_memory_app
from registry_service import create_app as create_registry_app
from servicekit.auth import issue_token
from testsupport.a2a import (
    a2a_client,
    agent_context,
    collect,
    echo_tool,
    final_task,
    review_worker,
    send_request,
    user_message,
)
from testsupport.gateway_platform import HEADERS_A, HEADERS_B, JWT_SECRET, KEY_A, KEY_B
from testsupport.server import free_port, serve
from testsupport.services import event_settings, memory_settings, registry_settings

pytestmark = pytest.mark.asyncio

JWT = {"auth_mode": "jwt", "jwt_secret": JWT_SECRET}


def token(tenant: str, **claims: Any) -> str:
    return issue_token(
        GatewaySettings(jwt_secret=JWT_SECRET),
        tenant_id=tenant,
        user_id=f"{tenant}-agent",
        **claims,
    )


@pytest_asyncio.fixture
async def jwt_gateway(tmp_path: Any) -> AsyncIterator[str]:
    async with AsyncExitStack() as stack:
        events = await stack.enter_async_context(serve(create_event_app(event_settings(**JWT))))
        registry = await stack.enter_async_context(
            serve(
                create_registry_app(
                    registry_settings(
                        f"sqlite+aiosqlite:///{tmp_path}/registry.db", tmp_path, **JWT
                    )
                )
            )
        )
        memory = await stack.enter_async_context(
            serve(
                create_memory_app(
                    memory_settings(f"sqlite+aiosqlite:///{tmp_path}/memory.db", tmp_path, **JWT)
                )
            )
        )
        for tenant in ("tenant-a", "tenant-b"):
            for make in (echo_tool, review_worker):
                context = agent_context(events.url, registry.url, memory.url, token=token(tenant))
                stack.push_async_callback(context.close)
                agent = make(context)
                await agent.start()
                stack.push_async_callback(agent.stop)
        port = free_port()
        gateway = await stack.enter_async_context(
            serve(
                create_gateway_app(
                    GatewaySettings(
                        event_service_url=events.url,
                        registry_url=registry.url,
                        data_dir=tmp_path,
                        gateway_url=f"http://127.0.0.1:{port}",
                        gateway_card_ttl_seconds=0,
                        gateway_api_keys={KEY_A: "tenant-a", KEY_B: "tenant-b"},
                        default_tenant="tenant-a",
                        gateway_replica_id="jwt",
                        api_token=token("platform", soorma_role="service"),
                        **JWT,
                    )
                ),
                port,
            )
        )
        yield gateway.url


async def test_each_tenant_is_answered_by_its_own_agents(jwt_gateway: str):
    results = {}
    for tenant, headers in (("tenant-a", HEADERS_A), ("tenant-b", HEADERS_B)):
        async with a2a_client(jwt_gateway, streaming=True, headers=headers) as client:
            events = await collect(
                client,
                send_request(user_message(data={"doc": tenant, "mode": "ok"}, skill="review")),
            )
        async with a2a_client(jwt_gateway, streaming=False, headers=headers) as client:
            echoed = final_task(
                await collect(
                    client, send_request(user_message(data={"text": tenant}, skill="echo"))
                )
            )
        states = [e.status_update.status.state for e in events if e.HasField("status_update")]
        assert TaskState.TASK_STATE_WORKING in states  # progress came through the tap
        assert states[-1] == TaskState.TASK_STATE_COMPLETED
        answer = MessageToDict(echoed.artifacts[0].parts[0].data)
        results[tenant] = (answer["echo"], answer["tenant"])
    # Each request reached its own tenant's echo tool, published as that tenant.
    assert results == {"tenant-a": ("tenant-a", "tenant-a"), "tenant-b": ("tenant-b", "tenant-b")}
