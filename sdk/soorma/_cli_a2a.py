"""``soorma a2a card URL`` and ``soorma a2a send URL SKILL JSON``: try a gateway by hand.

Both speak A2A through the official ``a2a-sdk`` client (installed with the platform).
Credentials: ``--api-key`` (or ``SOORMA_GATEWAY_API_KEY``) or ``--token`` (or
``SOORMA_API_TOKEN``).
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from soorma.settings import PlatformSettings

EXIT_OK, EXIT_TASK_FAILED, EXIT_INPUT_REQUIRED, EXIT_USAGE = 0, 1, 3, 2


def add_parser(commands: Any) -> None:
    """Register ``a2a card`` and ``a2a send`` on the CLI's sub-command set."""
    a2a = commands.add_parser("a2a", help="talk to an A2A gateway (card, send)")
    actions = a2a.add_subparsers(dest="a2a_command", required=True, metavar="ACTION")
    card = actions.add_parser("card", help="print the gateway's agent card and skills")
    card.add_argument(
        "url",
        nargs="?",
        help="gateway URL (default: SOORMA_GATEWAY_URL, or SOORMA_URL's /gateway)",
    )
    card.add_argument("--json", action="store_true", help="print the whole card as JSON")
    send = actions.add_parser("send", help="send a message to a skill and stream the task")
    send.add_argument("url", help="gateway URL, e.g. http://127.0.0.1:8085")
    send.add_argument("skill", help="skill id (see `soorma a2a card URL`)")
    send.add_argument("payload", help="JSON object (a data part), or plain text")
    send.add_argument("--binding", choices=["JSONRPC", "HTTP+JSON"], default="JSONRPC")
    send.add_argument("--no-stream", action="store_true", help="one blocking SendMessage")
    send.add_argument("--task", help="answer this input-required task instead")
    for parser in (card, send):
        parser.add_argument("--api-key", help="X-API-Key (default: SOORMA_GATEWAY_API_KEY)")
        parser.add_argument("--token", help="bearer JWT (default: SOORMA_API_TOKEN)")


def run(args: argparse.Namespace) -> int:
    """Run the parsed ``a2a`` command; the process exit code."""
    import asyncio

    try:
        import a2a.client  # noqa: F401
    except ImportError:
        print(
            "soorma: `soorma a2a` needs the a2a-sdk package: pip install 'a2a-sdk[http-server]'",
            file=sys.stderr,
        )
        return EXIT_USAGE
    from soorma.settings import PlatformSettings

    settings = PlatformSettings.from_env()
    if args.a2a_command == "card":
        return asyncio.run(_card(args, settings))
    return asyncio.run(_send(args, settings))


def _headers(args: argparse.Namespace, settings: PlatformSettings) -> dict[str, str]:
    key = args.api_key or settings.gateway_api_key
    token = args.token or settings.api_token
    headers: dict[str, str] = {}
    if key:
        headers["X-API-Key"] = key
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


async def _card(args: argparse.Namespace, settings: PlatformSettings) -> int:
    import httpx
    from a2a.client import A2ACardResolver
    from google.protobuf.json_format import MessageToDict

    if not args.url:
        args.url = settings.gateway_url
    async with httpx.AsyncClient(headers=_headers(args, settings), timeout=30) as http:
        try:
            card = await A2ACardResolver(http, args.url).get_agent_card()
        except Exception as exc:
            print(f"soorma: cannot read the agent card at {args.url}: {exc}", file=sys.stderr)
            return EXIT_TASK_FAILED
    if args.json:
        print(json.dumps(MessageToDict(card), indent=2, sort_keys=True))
        return EXIT_OK
    print(f"{card.name} {card.version} - {card.description}")
    for interface in card.supported_interfaces:
        print(f"  {interface.protocol_binding} {interface.protocol_version}: {interface.url}")
    print(f"skills ({len(card.skills)}):")
    schemas: dict[str, Any] = {}
    for extension in card.capabilities.extensions:
        if "skill-input-schemas" in extension.uri:
            schemas = MessageToDict(extension.params)
    for skill in card.skills:
        schema = (schemas.get(skill.id) or {}).get("inputSchema") or {}
        required = ", ".join(schema.get("required") or [])
        print(f"  {skill.id} - {skill.description}" + (f" (needs: {required})" if required else ""))
    return EXIT_OK


def _message(args: argparse.Namespace) -> Any:
    from a2a.helpers.proto_helpers import new_data_part, new_text_part
    from a2a.types.a2a_pb2 import Message, Role
    from google.protobuf.struct_pb2 import Struct

    try:
        value = json.loads(args.payload)
    except json.JSONDecodeError:
        value = None
    part = new_data_part(value) if isinstance(value, dict) else new_text_part(args.payload)
    metadata = Struct()
    metadata.update({"skill": args.skill})
    return Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[part],
        metadata=metadata,
        task_id=args.task or "",
    )


async def _send(args: argparse.Namespace, settings: PlatformSettings) -> int:
    import httpx
    from a2a.client import ClientConfig, ClientFactory
    from a2a.types.a2a_pb2 import SendMessageRequest, TaskState
    from a2a.utils.errors import A2AError
    from google.protobuf.json_format import MessageToDict

    state = TaskState.TASK_STATE_UNSPECIFIED
    task_ids: list[str] = []
    async with httpx.AsyncClient(headers=_headers(args, settings), timeout=None) as http:
        factory = ClientFactory(
            ClientConfig(
                streaming=not args.no_stream,
                httpx_client=http,
                supported_protocol_bindings=[args.binding],
            )
        )
        try:
            client = await factory.create_from_url(args.url)
            async with client:
                async for event in client.send_message(SendMessageRequest(message=_message(args))):
                    state = _print_event(event, MessageToDict) or state
                    task_ids.append(_task_id(event))
        except A2AError as exc:
            print(f"soorma: {type(exc).__name__}: {exc}", file=sys.stderr)
            return EXIT_TASK_FAILED
        except httpx.HTTPError as exc:
            print(f"soorma: cannot reach the gateway at {args.url}: {exc}", file=sys.stderr)
            return EXIT_TASK_FAILED
    if state == TaskState.TASK_STATE_INPUT_REQUIRED:
        task_id = next((t for t in reversed(task_ids) if t), "TASK_ID")
        print(
            f"soorma: the task waits for your answer; send it on the same task:\n"
            f"  soorma a2a send {args.url} {args.skill} '<answer>' --task {task_id}",
            file=sys.stderr,
        )
        return EXIT_INPUT_REQUIRED
    return (
        EXIT_OK
        if state in (TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_UNSPECIFIED)
        else EXIT_TASK_FAILED
    )


def _task_id(event: Any) -> str:
    """The id of the task an event is about ("" for a bare message)."""
    if event.HasField("task"):
        return str(event.task.id)
    for field in ("status_update", "artifact_update"):
        if event.HasField(field):
            return str(getattr(event, field).task_id)
    return ""


def _print_event(event: Any, to_dict: Any) -> Any:
    """One line per event; the task state it reports (if any)."""
    from a2a.types.a2a_pb2 import TaskState

    def text(message: Any) -> str:
        return " ".join(p.text for p in message.parts if p.HasField("text"))

    if event.HasField("message"):
        print(json.dumps(to_dict(event.message)))
        return TaskState.TASK_STATE_COMPLETED
    if event.HasField("task"):
        task = event.task
        print(f"task {task.id}: {TaskState.Name(task.status.state)} {text(task.status.message)}")
        for artifact in task.artifacts:
            print(json.dumps(to_dict(artifact)))
        return task.status.state
    if event.HasField("status_update"):
        status = event.status_update.status
        print(
            f"task {event.status_update.task_id}: {TaskState.Name(status.state)} "
            f"{text(status.message)}".rstrip()
        )
        return status.state
    if event.HasField("artifact_update"):
        print(json.dumps(to_dict(event.artifact_update.artifact)))
    return None
