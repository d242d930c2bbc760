"""The ``soorma`` command: ``dev``, ``init``, ``events``, ``plans`` and ``a2a``."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from soorma import _cli_a2a, _cli_plans
from soorma._templates import AGENT_TYPES, write_skeleton


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
        help="override a service's port (repeatable), e.g. --port events=9082",
    )
    dev.add_argument("--log-level", default="warning", help="uvicorn log level")

    init = commands.add_parser("init", help="write a runnable agent skeleton folder")
    init.add_argument("name", help="agent name, e.g. order-checker")
    init.add_argument("--type", dest="agent_type", choices=AGENT_TYPES, default="tool")
    init.add_argument("--dir", type=Path, help="target folder (default: ./NAME)")
    init.add_argument("--force", action="store_true", help="overwrite a non-empty folder")

    events = commands.add_parser("events", help="watch or publish events")
    events_commands = events.add_subparsers(dest="events_command", required=True, metavar="ACTION")
    tail = events_commands.add_parser("tail", help="print events live, one line each")
    tail.add_argument("--topic", required=True, action="append", help="topic (repeatable)")
    tail.add_argument("--type", dest="event_type", help="event-type glob, e.g. 'order.*'")
    tail.add_argument("--count", type=int, help="exit after this many events")
    tail.add_argument("--url", help="event service URL (default: SOORMA_EVENT_SERVICE_URL)")

    publish = events_commands.add_parser("publish", help="publish one event")
    publish.add_argument("--topic", required=True)
    publish.add_argument("--type", dest="event_type", required=True)
    publish.add_argument("--data", default="{}", help="JSON object payload")
    publish.add_argument("--correlation-id")
    publish.add_argument("--response-event")
    publish.add_argument("--response-topic")
    publish.add_argument("--url", help="event service URL (default: SOORMA_EVENT_SERVICE_URL)")
    _cli_plans.add_parser(commands)
    _cli_a2a.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``soorma`` console script."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "dev":
            code = _dev(args)
        elif args.command == "init":
            code = _init(args)
        elif args.command == "plans":
            code = _cli_plans.run(args)
        elif args.command == "a2a":
            code = _cli_a2a.run(args)
        elif args.events_command == "tail":
            code = asyncio.run(_tail(args))
        else:
            code = asyncio.run(_publish(args))
    except KeyboardInterrupt:
        code = 0
    raise SystemExit(code)


def _fail(message: str, code: int = 1) -> int:
    print(f"soorma: {message}", file=sys.stderr)
    return code


def _dev(args: argparse.Namespace) -> int:
    from soorma._dev import DevError, run_dev, select_services

    try:
        services = select_services(args.only, args.port)
        return asyncio.run(
            run_dev(services, host=args.host, log_level=args.log_level, out=sys.stdout)
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
    return 0


def _context(url: str | None) -> Any:
    from soorma.context import PlatformContext, PlatformSettings

    settings = PlatformSettings.from_env()
    if url:
        from dataclasses import replace

        settings = replace(settings, event_service_url=url)
    return PlatformContext.from_env(settings=settings)


def format_event_line(event: Any) -> str:
    """One line per event for ``soorma events tail``."""
    data = json.dumps(event.data, separators=(",", ":"), default=str)
    if len(data) > 200:
        data = data[:197] + "..."
    parts = [event.time.strftime("%H:%M:%S.%f")[:-3], event.topic, event.type, f"id={event.id}"]
    if event.correlation_id:
        parts.append(f"corr={event.correlation_id}")
    parts.append(data)
    return " ".join(parts)


async def _tail(args: argparse.Namespace) -> int:
    from soorma_common.errors import SoormaError

    seen = 0
    async with _context(args.url) as context:
        event_types = [args.event_type] if args.event_type else None
        try:
            async with context.bus.subscribe(args.topic, event_types=event_types) as sub:
                await sub.wait_ready()
                print(f"tailing {', '.join(args.topic)} (Ctrl-C to stop)", file=sys.stderr)
                async for event in sub:
                    print(format_event_line(event), flush=True)
                    seen += 1
                    if args.count and seen >= args.count:
                        break
        except (SoormaError, ValueError) as exc:
            return _fail(str(exc))
    return 0


async def _publish(args: argparse.Namespace) -> int:
    from soorma_common.errors import SoormaError

    try:
        data = json.loads(args.data)
    except json.JSONDecodeError as exc:
        return _fail(f'--data is not valid JSON ({exc}); e.g. --data \'{{"key": "value"}}\'', 2)
    if not isinstance(data, dict):
        return _fail('--data must be a JSON object, e.g. \'{"key": "value"}\'', 2)
    async with _context(args.url) as context:
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


__all__ = ["format_event_line", "main"]
