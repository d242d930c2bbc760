"""The gateway end to end with the official a2a-sdk client: card, send, stream, get."""

from __future__ import annotations

import pytest
from a2a.types.a2a_pb2 import TaskState
from conftest import HEADERS_A, Platform
from gateway_helpers import (
    BINDINGS,
    a2a_client,
    collect,
    final_task,
    send_request,
    user_message,
)
from google.protobuf.json_format import MessageToDict

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("binding", BINDINGS)
async def test_send_blocking_completes_with_the_tools_answer(platform: Platform, binding: str):
    async with a2a_client(platform.url, binding, streaming=False, headers=HEADERS_A) as client:
        events = await collect(client, send_request(
            user_message(data={"text": "hi", "times": 2}, skill="echo", message_id="msg-7")))
    task = final_task(events)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    data = MessageToDict(task.artifacts[0].parts[0].data)
    assert data["echo"] == "hihi"
    assert data["message_id"] == "msg-7"
