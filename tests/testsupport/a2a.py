"""A2A for the gateway tests: the agents behind the gateway and official a2a-sdk clients."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.client.client import Client
from a2a.helpers.proto_helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import Message, Role, SendMessageRequest, StreamResponse, Task
from google.protobuf.struct_pb2 import Struct

from soorma import PlatformContext, PlatformSettings, Tool, Worker
from soorma.client import verified_tls
from soorma_common.registry import AgentCapability, EventDefinition

ECHO_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}, "times": {"type": "integer", "minimum": 1}},
    "required": ["text"],
}
REVIEW_SCHEMA = {
    "type": "object",
    "properties": {
        "doc": {"type": "string"},
        "mode": {"enum": ["ok", "fail", "reject", "hitl", "slow", "files"]},
    },
    "required": ["doc", "mode"],
}
BINDINGS = ["JSONRPC", "HTTP+JSON"]


def capability(task: str, event: str, schema: dict[str, Any]) -> AgentCapability:
    return AgentCapability(
        task_name=task,
        description=f"{task} skill",
        consumed_event=EventDefinition(event_name=event, payload_schema=schema),
    )


def echo_tool(context: PlatformContext) -> Tool:
    """``echo``: answers with the text (times ``times``) and the A2A message id it saw."""
    tool = Tool(
        name="echo-tool",
        description="Echoes text.",
        context=context,
        capabilities=[capability("echo", "echo.requested", ECHO_SCHEMA)],
    )

    @tool.on_invoke("echo.requested")
    async def echo(request, ctx):
        message = request.data.get("a2a_message") or {}
        return {
            "echo": request.data["text"] * request.data.get("times", 1),
            "message_id": message.get("message_id"),
            "tenant": request.tenant_id,
        }

    return tool


@dataclass
class ReviewControl:
    """Holds the reviewer's slow mode per document; records what it received."""

    gates: dict[str, asyncio.Event] = field(default_factory=dict)
    seen: list[dict[str, Any]] = field(default_factory=list)

    def gate(self, doc: str) -> asyncio.Event:
        return self.gates.setdefault(doc, asyncio.Event())

    def release(self, doc: str) -> None:
        self.gate(doc).set()


def review_worker(context: PlatformContext, control: ReviewControl | None = None) -> Worker:
    """``review``: progress, human input, failure, rejection, several artifacts."""
    control = control or ReviewControl()
    worker = Worker(
        name="reviewer",
        description="Reviews documents.",
        context=context,
        capabilities=[capability("review", "doc.review", REVIEW_SCHEMA)],
    )

    @worker.on_task("doc.review")
    async def review(task, ctx):
        control.seen.append(dict(task.data))
        mode = task.data["mode"]
        await task.report_progress(0.5, "reading the document")
        if mode == "fail":
            await task.fail("the document is unreadable")
        elif mode == "reject":
            await ctx.bus.respond(
                task.response_event,
                {"status": "rejected", "reason": "not my kind of document"},
                correlation_id=task.correlation_id,
            )
        elif mode == "hitl":
            await task.request_human_input(
                "Approve the document?",
                response_event="doc.approval",
                timeout_seconds=600,
            )
        elif mode == "slow":
            await control.gate(task.data["doc"]).wait()
            await task.complete({"doc": task.data["doc"], "verdict": "late"})
        elif mode == "files":
            await task.complete(
                {
                    "artifacts": [
                        {"name": "summary", "parts": [{"text": "fine"}]},
                        {"name": "scores", "parts": [{"data": {"score": 9}}]},
                        {
                            "name": "files",
                            "parts": [
                                {
                                    "url": "https://example.com/report.pdf",
                                    "media_type": "application/pdf",
                                    "filename": "report.pdf",
                                },
                                {
                                    "bytes": "aGVsbG8=",
                                    "media_type": "text/plain",
                                    "filename": "hello.txt",
                                },
                            ],
                        },
                    ]
                }
            )
        else:
            await task.complete({"doc": task.data["doc"], "verdict": "approved"})

    @worker.on_result("doc.approval", topic="notification-events")
    async def approval(result, ctx):
        task = await result.restore_task()
        control.seen.append(dict(result.data))
        verdict = "approved" if result.data.get("approved") else "declined"
        await task.complete(
            {"doc": task.data["doc"], "verdict": verdict, "note": result.data.get("text")}
        )

    return worker


def agent_context(
    events: str,
    registry: str,
    memory: str | None = None,
    tenant: str | None = None,
    token: str | None = None,
) -> PlatformContext:
    settings = PlatformSettings(
        event_service_url=events,
        registry_url=registry,
        memory_url=memory or "http://127.0.0.1:9",
        tenant_id=None if token else tenant,
        api_token=token,
    )
    context = PlatformContext.from_env(settings=settings)
    context.bus.max_backoff = 0.3
    return context


@contextlib.asynccontextmanager
async def a2a_client(
    url: str,
    binding: str = "JSONRPC",
    *,
    streaming: bool = True,
    headers: dict[str, str] | None = None,
) -> AsyncIterator[Client]:
    """An official a2a-sdk client for the gateway at ``url`` over ``binding``."""
    http = httpx.AsyncClient(verify=verified_tls(), headers=headers or {}, timeout=30)
    try:
        factory = ClientFactory(
            ClientConfig(
                streaming=streaming,
                httpx_client=http,
                supported_protocol_bindings=[binding],
            )
        )
        client = await factory.create_from_url(url)
        async with client:
            yield client
    finally:
        await http.aclose()


def user_message(
    *,
    text: str | None = None,
    data: dict[str, Any] | None = None,
    skill: str | None = None,
    task_id: str = "",
    context_id: str = "",
    message_id: str = "m-1",
) -> Message:
    metadata = Struct()
    if skill:
        metadata.update({"skill": skill})
    parts = []
    if text is not None:
        parts.append(new_text_part(text))
    if data is not None:
        parts.append(new_data_part(data))
    return Message(
        message_id=message_id,
        role=Role.ROLE_USER,
        parts=parts,
        metadata=metadata,
        task_id=task_id,
        context_id=context_id,
    )


def send_request(message: Message, *, blocking: bool = True) -> SendMessageRequest:
    request = SendMessageRequest(message=message)
    request.configuration.return_immediately = not blocking
    return request


async def collect(client: Client, request: SendMessageRequest) -> list[StreamResponse]:
    return [event async for event in client.send_message(request)]


def final_task(events: list[StreamResponse]) -> Task:
    for event in reversed(events):
        if event.HasField("task"):
            return event.task
    raise AssertionError(f"no task in {events}")
