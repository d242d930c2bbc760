"""Push notifications: delivered to an allowed local receiver, authenticated as the config
asks, retried with backoff; private, loopback and unlisted hosts refused (no SSRF)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from a2a.types.a2a_pb2 import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gateway_a2a.pushpolicy import PushPolicy
from testsupport.a2a import BINDINGS, a2a_client, collect, final_task, send_request, user_message
from testsupport.gateway_platform import HEADERS_A, Platform
from testsupport.server import serve

pytestmark = pytest.mark.asyncio(loop_scope="module")


class Receiver:
    """A local webhook that fails its first ``failures`` calls with 500."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.calls = 0
        self.received: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.completed = asyncio.Event()
        self.app = Starlette(routes=[Route("/hook", self.hook, methods=["POST"])])

    async def hook(self, request: Request) -> JSONResponse:
        self.calls += 1
        if self.calls <= self.failures:
            return JSONResponse({"error": "try later"}, status_code=500)
        self.received.append((dict(request.headers), await request.json()))
        if "TASK_STATE_COMPLETED" in self.states():
            self.completed.set()
        return JSONResponse({})

    def states(self) -> list[str]:
        out = []
        for _, body in self.received:
            for key in ("task", "statusUpdate"):
                if key in body:
                    out.append(body[key]["status"]["state"])
        return out


async def test_policy_refuses_private_loopback_and_unlisted_hosts():
    policy = PushPolicy(["hooks.internal", "127.0.0.1:9000"])
    assert await policy("http://hooks.internal/x")
    assert await policy("http://127.0.0.1:9000/x")
    assert not await policy("http://127.0.0.1:9001/x")
    assert not await policy("http://localhost/x")
    assert not await policy("http://10.0.0.5/x")
    assert not await policy("http://169.254.169.254/latest/meta-data")
    assert not await policy("ftp://hooks.internal/x")
    assert not await policy("https://example.com/x")  # not listed and no "*"
    anywhere = PushPolicy(["*"])
    assert not await anywhere("http://127.0.0.1/x")
    assert not await anywhere("http://192.168.1.1/x")


@pytest.mark.parametrize("binding", BINDINGS)
async def test_push_delivered_with_auth_and_retries(platform: Platform, binding: str):
    receiver = Receiver(failures=2)
    async with (
        serve(receiver.app) as hook,
        a2a_client(platform.url, binding, streaming=False, headers=HEADERS_A) as client,
    ):
        request = send_request(
            user_message(data={"doc": f"p-{binding}", "mode": "slow"}, skill="review"),
            blocking=False,
        )
        request.configuration.task_push_notification_config.CopyFrom(
            TaskPushNotificationConfig(
                url=f"{hook.url}/hook",
                token="tok-1",
                authentication=AuthenticationInfo(scheme="Bearer", credentials="sekret"),
            )
        )
        task = final_task(await collect(client, request))
        configs = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
        assert [c.url for c in configs.configs] == [f"{hook.url}/hook"]
        platform.control.release(f"p-{binding}")
        await asyncio.wait_for(receiver.completed.wait(), 10)
    headers, _ = receiver.received[-1]
    assert headers["x-a2a-notification-token"] == "tok-1"
    assert headers["authorization"] == "Bearer sekret"
    assert receiver.calls >= len(receiver.received) + 2  # the two failures were retried


@pytest.mark.parametrize("binding", BINDINGS)
async def test_push_config_crud_and_refused_targets(platform: Platform, binding: str):
    async with a2a_client(platform.url, binding, streaming=False, headers=HEADERS_A) as client:
        task = final_task(
            await collect(
                client,
                send_request(user_message(data={"doc": "q", "mode": "hitl"}, skill="review")),
            )
        )
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        for url in (
            "http://10.0.0.5/hook",
            "http://localhost:1/hook",
            "http://169.254.169.254/x",
            "https://example.com/hook",
        ):
            with pytest.raises(InvalidParamsError):
                await client.create_task_push_notification_config(
                    TaskPushNotificationConfig(task_id=task.id, url=url)
                )
        created = await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task.id, id="cfg-1", url="http://127.0.0.1:1/hook")
        )
        assert created.id == "cfg-1"
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task.id, id="cfg-1")
        )
        assert got.url == "http://127.0.0.1:1/hook"
        await client.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="cfg-1")
        )
        left = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task.id)
        )
    assert not left.configs
