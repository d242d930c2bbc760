"""An external A2A client (the official a2a-sdk) streaming a task through the gateway.

    python client.py 250 "team dinner" --answer yes [--binding HTTP+JSON]

It reads the gateway's agent card, sends the expense to the ``expense-review`` skill as a
streaming message over JSON-RPC (or HTTP+JSON), prints every status the task goes through
and each streamed text chunk as it arrives (the last one marked), answers the
human-input question on the same task, and prints the final data artifact as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import Message, Role, SendMessageRequest, TaskState
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct

from soorma import PlatformSettings, run_client

SKILL = "expense-review"


def message(parts: list, *, task_id: str = "", context_id: str = "") -> Message:
    metadata = Struct()
    metadata.update({"skill": SKILL})
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=parts,
        metadata=metadata,
        task_id=task_id,
        context_id=context_id,
    )


async def stream(client, request: SendMessageRequest) -> tuple[str, str, int, list]:
    """Print the task's updates; its id, context, last state and artifacts."""
    task_id = context_id = ""
    state = TaskState.TASK_STATE_UNSPECIFIED
    artifacts = []
    async for event in client.send_message(request):
        if event.HasField("task"):
            task_id, context_id = event.task.id, event.task.context_id
            state = event.task.status.state
            print(f"task {task_id}: {TaskState.Name(state)}")
        elif event.HasField("status_update"):
            update = event.status_update
            task_id, context_id, state = update.task_id, update.context_id, update.status.state
            text = " ".join(p.text for p in update.status.message.parts if p.HasField("text"))
            print(f"status: {TaskState.Name(state)} {text}".rstrip())
        elif event.HasField("artifact_update"):
            artifact = event.artifact_update.artifact
            text = "".join(p.text for p in artifact.parts if p.HasField("text"))
            if text:
                last = " [last chunk]" if event.artifact_update.last_chunk else ""
                print(f"{artifact.name}: {text!r}{last}")  # a chunk, as it arrives
            artifacts.append(artifact)
    return task_id, context_id, state, artifacts


async def main(amount: float, purpose: str, answer: str, binding: str) -> int:
    url = PlatformSettings.from_env().gateway_url  # SOORMA_GATEWAY_URL, or SOORMA_URL's
    try:
        return await review(url, amount, purpose, answer, binding)
    except A2AError as exc:  # e.g. a payload the skill's schema refuses
        print(f"error: the gateway at {url} refused the task: {exc}", file=sys.stderr)
    except httpx.HTTPError as exc:
        print(f"error: cannot reach the gateway at {url}: {exc}", file=sys.stderr)
    return 1


async def review(url: str, amount: float, purpose: str, answer: str, binding: str) -> int:
    headers = (
        {"X-API-Key": os.environ["SOORMA_GATEWAY_API_KEY"]}
        if os.environ.get("SOORMA_GATEWAY_API_KEY")
        else {}
    )
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        print(f"gateway skills: {', '.join(sorted(s.id for s in card.skills))}")
        config = ClientConfig(
            streaming=True, httpx_client=http, supported_protocol_bindings=[binding]
        )
        client = ClientFactory(config).create(card)
        async with client:
            first = message([new_data_part({"amount": amount, "purpose": purpose})])
            task_id, context_id, state, artifacts = await stream(
                client, SendMessageRequest(message=first)
            )
            if state == TaskState.TASK_STATE_INPUT_REQUIRED:
                approved = answer.lower() in {"y", "yes", "ok", "approve"}
                print(f"answering: {answer}")
                reply = message(
                    [new_text_part(answer), new_data_part({"approved": approved})],
                    task_id=task_id,
                    context_id=context_id,
                )
                task_id, context_id, state, artifacts = await stream(
                    client, SendMessageRequest(message=reply)
                )
    if state != TaskState.TASK_STATE_COMPLETED:
        print(f"task ended {TaskState.Name(state)}", file=sys.stderr)
        return 1
    for artifact in artifacts:
        for part in artifact.parts:
            if part.HasField("data"):
                print(json.dumps(MessageToDict(part.data), sort_keys=True))
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("amount", type=float, nargs="?", default=250.0)
    parser.add_argument("purpose", nargs="?", default="team dinner")
    parser.add_argument("--answer", default="yes")
    parser.add_argument("--binding", choices=["JSONRPC", "HTTP+JSON"], default="JSONRPC")
    args = parser.parse_args()
    raise SystemExit(run_client(main(args.amount, args.purpose, args.answer, args.binding)))
