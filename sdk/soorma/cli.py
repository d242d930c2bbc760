"""The ``soorma`` command: ``dev``, ``run``, ``init``, ``call``, ``events``, ``plans``,
``tasks``, ``agents``, ``memory`` and ``a2a``."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from soorma import _cli_a2a, _cli_agents, _cli_memory, _cli_plans
from soorma._templates import AGENT_TYPES, write_skeleton
from soorma_common.errors import SoormaError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="soorma", description="Soorma platform tools.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    dev = commands.add_parser(
        "dev",
        help="run all five services in one process (embedded backends)",
        description="Run registry, events, memory, tracker and gateway in one process. "
        "SOORMA_EVENT_BACKEND / SOORMA_REDIS_URL / SOORMA_DATABASE_URL select real backends.",
    )
    dev.add_argument("--host", default="127.0.0.1", help="interface to listen on")
    dev.add_argument(
        "--only", help="comma-separated subset: registry,events,memory,tracker,gateway"
    )
    dev.add_argument(
        "--port",
        action="append",
        default=[],
        metavar="NAME=PORT",
        help="override a port (repeatable), e.g. --port events=9082; "
        "--port platform=PORT moves the one address serving them all (default 8080)",
    )
    dev.add_argument("--log-level", default="warning", help="uvicorn log level")
    dev.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="service logs: one readable line per record (text, default) or JSON objects",
    )

    init = commands.add_parser("init", help="write a runnable agent skeleton folder")
    init.add_argument("name", help="agent name, e.g. order-checker")
    init.add_argument("--type", dest="agent_type", choices=AGENT_TYPES, default="tool")
    init.add_argument("--dir", type=Path, help="target folder (default: ./NAME)")
    init.add_argument("--force", action="store_true", help="overwrite a non-empty folder")

    events = commands.add_parser("events", help="watch or publish events")
    events_commands = events.add_subparsers(dest="events_command", required=True, metavar="ACTION")
    tail = events_commands.add_parser(
        "tail",
        help="print events live, one line each",
        description="Print the tenant's events as they are published. Without --topic: "
        "every standard topic and every topic of an event registered in the registry.",
    )
    tail.add_argument(
        "--topic", action="append", help="topic (repeatable; default: all of the tenant's)"
    )
    tail.add_argument("--type", dest="event_type", help="event-type glob, e.g. 'order.*'")
    tail.add_argument("--count", type=int, help="exit after this many events")
    tail.add_argument(
        "--json", action="store_true", help="print each event as one JSON object (the envelope)"
    )
    tail.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the lines (auto: on a terminal, unless NO_COLOR is set)",
    )
    tail.add_argument(
        "--url", help="event service URL (default: from SOORMA_URL or SOORMA_EVENT_SERVICE_URL)"
    )

    publish = events_commands.add_parser("publish", help="publish one event")
    publish.add_argument("--topic", required=True)
    publish.add_argument("--type", dest="event_type", required=True)
    publish.add_argument("--data", default="{}", help="JSON object payload")
    publish.add_argument("--correlation-id")
    publish.add_argument("--response-event")
    publish.add_argument("--response-topic")
    publish.add_argument(
        "--url", help="event service URL (default: from SOORMA_URL or SOORMA_EVENT_SERVICE_URL)"
    )
    run = commands.add_parser(
        "run",
        help="run a project's agents in one process, restarted when their code changes",
        description="Import each TARGET (a .py file, a folder of them, or a module name such "
        "as myproject.agents or 'myproject.agents.*'), start every agent it defines at module "
        "level, and restart them when a file beside them changes.",
    )
    run.add_argument("targets", nargs="+", metavar="TARGET")
    run.add_argument(
        "--no-reload", dest="reload", action="store_false", help="do not watch for changes"
    )

    call = commands.add_parser(
        "call",
        help="send a request and print its answer",
        description="Publish EVENT on action-requests, wait for the answer carrying the "
        "same correlation id and print its data as JSON (exit 1 when the handler failed).",
    )
    call.add_argument("event_type", metavar="EVENT", help="request event, e.g. greet.requested")
    call.add_argument("--data", default="{}", help="JSON object payload")
    call.add_argument(
        "--response-event",
        help="the answer's event type (default: EVENT with .requested -> .completed)",
    )
    call.add_argument("--timeout", type=float, default=30.0, help="seconds to wait (30)")
    call.add_argument("--url", help="event service URL (default: from SOORMA_URL)")
    _cli_plans.add_parser(commands)
    _cli_memory.add_parser(commands)
    _cli_a2a.add_parser(commands)
    _cli_agents.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``soorma`` console script."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "dev":
            code = _dev(args)
        elif args.command == "init":
            code = _init(args)
        elif args.command in ("plans", "tasks"):
            code = _cli_plans.run(args)
        elif args.command == "memory":
            code = _cli_memory.run(args)
        elif args.command == "a2a":
            code = _cli_a2a.run(args)
        elif args.command == "agents":
            code = _cli_agents.run(args)
        elif args.command == "run":
            code = _run(args)
        elif args.command == "call":
            code = asyncio.run(_call(args))
        elif args.events_command == "tail":
            code = asyncio.run(_tail(args))
        else:
            code = asyncio.run(_publish(args))
    except KeyboardInterrupt:
        code = 0
    except (SoormaError, TimeoutError) as exc:
        # Expected failures (configuration, an unreachable platform, no answer): one
        # line that names the cause, not a traceback.
        code = _fail(str(exc) or type(exc).__name__)
    raise SystemExit(code)


def _fail(message: str, code: int = 1) -> int:
    print(f"soorma: {message}", file=sys.stderr)
    return code


def _dev(args: argparse.Namespace) -> int:
    from soorma._dev import DevError, run_dev, select_platform_port, select_services

    try:
        services = select_services(args.only, args.port)
        return asyncio.run(
            run_dev(
                services,
                platform_port=select_platform_port(args.port),
                host=args.host,
                log_level=args.log_level,
                log_format=args.log_format,
                out=sys.stdout,
            )
        )
    except DevError as exc:
        return _fail(str(exc))
    except ModuleNotFoundError as exc:
        return _fail(
            f"cannot import {exc.name}: `soorma dev` runs the platform's services, so it "
            "needs them installed (run scripts/setup.sh in the Soorma repository)"
        )


def _init(args: argparse.Namespace) -> int:
    target = args.dir or Path(args.name)
    try:
        files = write_skeleton(target, name=args.name, agent_type=args.agent_type, force=args.force)
    except ValueError as exc:
        return _fail(str(exc), 2)
    for path in files:
        print(f"wrote {path}")
    print(f"next: soorma dev (platform), then: python {target / 'agent.py'}")
    if args.agent_type == "tool":
        prefix = args.name.replace("-", "_")
        print(f'then try it: soorma call {prefix}.requested --data \'{{"text": "hello"}}\'')
    return 0


async def _context(url: str | None) -> Any:
    """The platform's clients: found from ``SOORMA_URL``'s discovery document when set."""
    import httpx

    from soorma.context import PlatformContext
    from soorma.settings import PlatformSettings

    async with httpx.AsyncClient() as http:
        settings = await PlatformSettings.discover(http)
    if url:
        from dataclasses import replace

        settings = replace(settings, event_service_url=url)
    return PlatformContext.from_env(settings=settings)


_FAILED = re.compile(r"fail|error|dlq|timeout|cancel", re.IGNORECASE)


def format_event_line(event: Any, *, color: bool = False) -> str:
    """One line per event for ``soorma events tail``."""
    from soorma._cli_style import paint

    data = json.dumps(event.data, separators=(",", ":"), default=str)
    if len(data) > 200:
        data = data[:197] + "..."
    parts = [
        paint(event.time.strftime("%H:%M:%S.%f")[:-3], "dim", color),
        paint(event.topic, "topic", color),
        paint(event.type, "error" if _FAILED.search(event.type) else "type", color),
        paint(f"id={event.id}", "dim", color),
    ]
    if event.correlation_id:
        parts.append(paint(f"corr={event.correlation_id}", "dim", color))
    if event.source:
        parts.append(paint(f"from={event.source}", "dim", color))
    parts.append(data)
    return " ".join(parts)


async def tail_topics(context: Any) -> list[str]:
    """Every topic of the tenant ``soorma events tail`` can know of: the standard topics
    and the topics of events registered in the registry (when it answers)."""
    from soorma_common.events import STANDARD_TOPICS

    topics = set(STANDARD_TOPICS)
    if context.registry is not None:
        try:
            events = await context.registry.without_retries().list_events()
        except Exception:  # no registry: the standard topics are all we know
            events = []
        topics.update(e.topic for e in events if not e.topic.endswith(".dlq"))
    return sorted(topics)[:MAX_TAIL_TOPICS]


# The event service's limit on topics per stream.
MAX_TAIL_TOPICS = 32


async def _tail(args: argparse.Namespace) -> int:
    from soorma._cli_style import use_color
    from soorma_common.errors import SoormaError

    color = use_color(args.color, sys.stdout)
    seen = 0
    async with await _context(args.url) as context:
        topics = args.topic or await tail_topics(context)
        event_types = [args.event_type] if args.event_type else None
        try:
            async with context.bus.subscribe(topics, event_types=event_types) as sub:
                await sub.wait_ready()
                which = ", ".join(topics) if args.topic else f"all topics ({', '.join(topics)})"
                print(f"tailing {which} (Ctrl-C to stop)", file=sys.stderr, flush=True)
                async for event in sub:
                    if args.json:
                        line = json.dumps(event.to_dict(), separators=(",", ":"), default=str)
                    else:
                        line = format_event_line(event, color=color)
                    print(line, flush=True)
                    seen += 1
                    if args.count and seen >= args.count:
                        break
        except (SoormaError, ValueError) as exc:
            return _fail(str(exc))
    return 0


def _json_object(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f'--data is not valid JSON ({exc}); e.g. --data \'{{"key": "value"}}\''
        ) from None
    if not isinstance(data, dict):
        raise ValueError('--data must be a JSON object, e.g. \'{"key": "value"}\'')
    return data


def _run(args: argparse.Namespace) -> int:
    from soorma._run import RunError, configure_logging, load_agents, run_agents, supervise

    try:
        if args.reload:
            return supervise(args.targets, out=sys.stdout)
        configure_logging()
        agents = load_agents(args.targets)
        return asyncio.run(run_agents(agents, out=sys.stdout))
    except RunError as exc:
        return _fail(str(exc))


def default_response_event(event_type: str) -> str:
    """``greet.requested`` -> ``greet.completed``; otherwise ``<event>.completed``."""
    stem = event_type.removesuffix(".requested")
    return f"{stem}.completed"


async def _call(args: argparse.Namespace) -> int:
    try:
        data = _json_object(args.data)
    except ValueError as exc:
        return _fail(str(exc), 2)
    response_event = args.response_event or default_response_event(args.event_type)
    async with await _context(args.url) as context:
        answer = await context.bus.call(
            args.event_type, data, response_event=response_event, timeout=args.timeout
        )
    print(json.dumps(answer.data, default=str))
    # A failed answer: HandlerFailed, printed by main() in one line.
    answer.raise_for_error()
    return 0


async def _publish(args: argparse.Namespace) -> int:
    from soorma_common.errors import SoormaError

    try:
        data = _json_object(args.data)
    except ValueError as exc:
        return _fail(str(exc), 2)
    async with await _context(args.url) as context:
        try:
            event_id = await context.bus.publish(
                args.topic,
                args.event_type,
                data,
                correlation_id=args.correlation_id,
                response_event=args.response_event,
                response_topic=args.response_topic,
            )
        except (SoormaError, TypeError, ValueError) as exc:
            return _fail(str(exc))
    print(event_id)
    return 0


__all__ = ["default_response_event", "format_event_line", "main", "tail_topics"]
