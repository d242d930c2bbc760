"""Auth: API keys (hashed) and bearer JWT, 401 without; tenant B never sees tenant A's tasks."""

from __future__ import annotations

import httpx
import pytest
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError

from gateway_a2a.settings import Settings, hash_api_key
from servicekit.auth import issue_token
from soorma.client import verified_tls
from testsupport.a2a import BINDINGS, a2a_client, collect, final_task, send_request, user_message
from testsupport.gateway_platform import HEADERS_A, HEADERS_B, JWT_SECRET, KEY_A, Platform

pytestmark = pytest.mark.asyncio(loop_scope="module")

RPC = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}


async def test_api_keys_are_kept_hashed():
    settings = Settings(gateway_api_keys={"plain-key": "t1", hash_api_key("other"): "t2"})
    assert settings.gateway_api_keys == {
        hash_api_key("plain-key"): "t1",
        hash_api_key("other"): "t2",
    }
    assert "plain-key" not in repr(settings.gateway_api_keys)


async def test_missing_or_wrong_credentials_answer_401(platform: Platform):
    async with httpx.AsyncClient(verify=verified_tls(), base_url=platform.url) as http:
        for request in (
            http.build_request("POST", "/", json=RPC),
            http.build_request("GET", "/tasks"),
            http.build_request("POST", "/tasks/send", json={}),
            http.build_request("POST", "/", json=RPC, headers={"X-API-Key": "wrong"}),
            http.build_request("POST", "/", json=RPC, headers={"Authorization": "Bearer x.y.z"}),
        ):
            response = await http.send(request)
            assert response.status_code == 401, request
            assert response.json()["error"]["code"] == "unauthenticated"
            assert "WWW-Authenticate" in response.headers
        ok = await http.post("/", json=RPC, headers={"X-API-Key": KEY_A, "A2A-Version": "1.0"})
    assert ok.status_code == 200 and "result" in ok.json()


async def test_bearer_jwt_acts_as_its_tenant(platform: Platform):
    token = issue_token(Settings(jwt_secret=JWT_SECRET), tenant_id="tenant-a", user_id="ann")
    async with a2a_client(
        platform.url, "HTTP+JSON", streaming=False, headers={"Authorization": f"Bearer {token}"}
    ) as client:
        task = final_task(
            await collect(client, send_request(user_message(data={"text": "jwt"}, skill="echo")))
        )
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    async with a2a_client(platform.url, streaming=False, headers=HEADERS_A) as client:
        same_tenant = await client.get_task(GetTaskRequest(id=task.id))
    assert same_tenant.id == task.id


@pytest.mark.parametrize("binding", BINDINGS)
async def test_another_tenants_task_is_not_found(platform: Platform, binding: str):
    async with a2a_client(platform.url, binding, streaming=False, headers=HEADERS_A) as a:
        task = final_task(
            await collect(
                a,
                send_request(user_message(data={"doc": "secret", "mode": "hitl"}, skill="review")),
            )
        )
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    async with a2a_client(platform.url, binding, headers=HEADERS_B) as b:
        with pytest.raises(TaskNotFoundError):
            await b.get_task(GetTaskRequest(id=task.id))
        with pytest.raises(TaskNotFoundError):
            await b.cancel_task(CancelTaskRequest(id=task.id))
        with pytest.raises(TaskNotFoundError):
            async for _ in b.subscribe(SubscribeToTaskRequest(id=task.id)):
                pass
        with pytest.raises(TaskNotFoundError):
            await collect(b, send_request(user_message(text="yes", task_id=task.id)))
        with pytest.raises(TaskNotFoundError):
            await b.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task.id, url="https://example.com/hook")
            )
        assert task.id not in [t.id for t in (await b.list_tasks(ListTasksRequest())).tasks]
    async with a2a_client(platform.url, binding, streaming=False, headers=HEADERS_A) as a:
        still = await a.get_task(GetTaskRequest(id=task.id))
        assert task.id in [t.id for t in (await a.list_tasks(ListTasksRequest())).tasks]
    assert still.status.state == TaskState.TASK_STATE_INPUT_REQUIRED


async def test_tenant_b_tasks_run_as_tenant_b(platform: Platform):
    """Tenant B's own agent answers B's task; B's request never reaches A's agents."""
    await platform.start_agents("tenant-b")
    async with a2a_client(platform.url, streaming=False, headers=HEADERS_B) as b:
        task = final_task(
            await collect(
                b, send_request(user_message(data={"doc": "b-doc", "mode": "ok"}, skill="review"))
            )
        )
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    async with a2a_client(platform.url, streaming=False, headers=HEADERS_A) as a:
        assert task.id not in [t.id for t in (await a.list_tasks(ListTasksRequest())).tasks]
        with pytest.raises(TaskNotFoundError):
            await a.get_task(GetTaskRequest(id=task.id))
