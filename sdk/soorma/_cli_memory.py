"""``soorma memory add|search|episodes|forget|reembed|info``: long-term memory from a
terminal.

Acts as ``SOORMA_TENANT_ID`` / ``SOORMA_USER_ID`` (``--user`` overrides the user), like an
agent built with ``PlatformContext.from_env()``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from soorma._episodes import DEFAULT_EPISODE_SEARCH_LIMIT, DEFAULT_RECENT_LIMIT
from soorma._knowledge import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE, DEFAULT_SEARCH_LIMIT

# Seconds between progress lines of ``reembed --wait``.
REEMBED_POLL_SECONDS = 1.0
# Characters of a hit's content shown by ``search``.
SNIPPET_CHARS = 160


def add_parser(commands: Any) -> None:
    """Register ``soorma memory`` on the CLI's sub-command parser."""
    memory = commands.add_parser(
        "memory",
        help="store, search and forget long-term memory (knowledge, episodes)",
        description="Long-term memory of the memory service (see docs/memory.md).",
    )
    actions = memory.add_subparsers(dest="memory_command", required=True, metavar="ACTION")

    add = actions.add_parser(
        "add",
        help="store knowledge (a text, or a file as a chunked document) or a procedure",
        description="Store a text (the service embeds it). With --file, the file is "
        "stored as a document: chunks under one external id, replaced together. With "
        "--situation, the text is a procedure (rule, prompt or example) for that situation.",
    )
    add.add_argument("text", nargs="*", help="the text to store")
    add.add_argument("--file", type=Path, help="store this file's text as a document")
    add.add_argument(
        "--external-id", help="your id for it (upsert); with --file: default the file name"
    )
    add.add_argument("--tag", action="append", default=[], help="a tag (repeatable)")
    add.add_argument("--source", help="where it came from")
    add.add_argument("--metadata", default="{}", help="JSON object of metadata fields")
    add.add_argument("--public", action="store_true", help="visible to every user of the tenant")
    add.add_argument(
        "--situation",
        help="store a procedure (know-how) that applies in this situation instead",
    )
    add.add_argument(
        "--kind", choices=("rule", "prompt", "example"), default="rule", help="with --situation"
    )
    add.add_argument("--agent", help="with --situation: the agent it is for (default: any)")
    add.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK_SIZE)
    add.add_argument("--chunk-overlap", type=int, default=DEFAULT_CHUNK_OVERLAP)
    _common(add)

    search = actions.add_parser("search", help="find knowledge by meaning")
    search.add_argument("query", nargs="+", help="what to look for")
    search.add_argument("--limit", type=int, default=DEFAULT_SEARCH_LIMIT, help="1-50")
    search.add_argument("--tag", action="append", default=[], help="required tag (repeatable)")
    search.add_argument("--source", help="only this source")
    search.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="metadata equality filter (repeatable; VALUE is JSON when it parses)",
    )
    search.add_argument("--min-score", type=float)
    search.add_argument(
        "--vector", action="store_true", help="rank by vector similarity only (no keywords)"
    )
    search.add_argument("--own", action="store_true", help="only this user's own records")
    _common(search)

    _add_episode_parsers(actions)

    forget = actions.add_parser(
        "forget",
        help="delete everything long-term memory holds for one user",
        description="Delete a user's knowledge, episodes and procedures in the tenant. "
        "Needs that user's identity or the service role (SOORMA_SERVICE_ROLE=service).",
    )
    forget.add_argument("user_id", metavar="USER_ID")
    forget.add_argument("--yes", action="store_true", help="really delete (required)")
    _common(forget, user=False)

    reembed = actions.add_parser(
        "reembed",
        help="rebuild vectors with the service's current embedding model",
        description="Start re-embedding every record still on another model (search "
        "keeps answering meanwhile). --status only reports progress.",
    )
    reembed.add_argument("--status", action="store_true", help="report progress only")
    reembed.add_argument("--wait", action="store_true", help="follow it until it ends")
    _common(reembed, user=False)

    info = actions.add_parser("info", help="the embedding model and records to re-embed")
    _common(info, user=False)


def _add_episode_parsers(actions: Any) -> None:
    episodes = actions.add_parser(
        "episodes",
        help="log, list and search interactions (episodic memory)",
        description="Episodes: what happened between an agent and this user, private to "
        "both. `log` stores one, `recent` lists the latest (oldest first), `search` finds "
        "them by meaning.",
    )
    verbs = episodes.add_subparsers(dest="episodes_command", required=True, metavar="VERB")
    log = verbs.add_parser("log", help="record one interaction")
    log.add_argument("agent_id", metavar="AGENT", help="the agent it happened with")
    log.add_argument("text", nargs="+", help="what was said or done")
    log.add_argument(
        "--role", choices=("user", "assistant", "system", "tool"), default="user", help="who"
    )
    log.add_argument("--session", help="session id")
    log.add_argument("--plan", help="plan id")
    log.add_argument("--metadata", default="{}", help="JSON object of metadata fields")
    _common(log)
    recent = verbs.add_parser("recent", help="the latest interactions, oldest first")
    recent.add_argument("agent_id", metavar="AGENT")
    recent.add_argument("--limit", type=int, default=DEFAULT_RECENT_LIMIT, help="1-200")
    recent.add_argument("--session", help="only this session")
    _common(recent)
    search = verbs.add_parser("search", help="find interactions by meaning")
    search.add_argument("agent_id", metavar="AGENT")
    search.add_argument("query", nargs="+", help="what to look for")
    search.add_argument("--limit", type=int, default=DEFAULT_EPISODE_SEARCH_LIMIT, help="1-50")
    search.add_argument(
        "--since", help="only this recent: a time (ISO 8601) or an age (30m, 12h, 7d)"
    )
    search.add_argument("--until", help="only before: a time (ISO 8601) or an age")
    search.add_argument("--session", help="only this session")
    search.add_argument("--min-score", type=float)
    _common(search)


def _common(parser: argparse.ArgumentParser, *, user: bool = True) -> None:
    parser.add_argument("--json", action="store_true", help="print the API's JSON")
    parser.add_argument("--url", help="memory service URL (default: SOORMA_MEMORY_URL)")
    if user:
        parser.add_argument("--user", help="act as this user (default: SOORMA_USER_ID)")


def run(args: argparse.Namespace) -> int:
    """Run ``soorma memory ...``; the exit code."""
    from soorma_common.errors import SoormaError

    handlers = {
        "add": _add,
        "search": _search,
        "episodes": _episodes,
        "forget": _forget,
        "reembed": _reembed,
        "info": _info,
    }
    try:
        return asyncio.run(handlers[args.memory_command](args))
    except SoormaError as exc:
        return _fail(_one_line(exc.message))
    except (OSError, ValueError) as exc:
        return _fail(_one_line(str(exc)))


def _context(args: argparse.Namespace) -> Any:
    from dataclasses import replace

    from soorma.context import PlatformContext
    from soorma.settings import PlatformSettings

    settings = PlatformSettings.from_env()
    if args.url:
        settings = replace(settings, memory_url=args.url)
    if getattr(args, "user", None):
        settings = replace(settings, user_id=args.user)
    return PlatformContext.from_env(settings=settings)


def _fail(message: str, code: int = 1) -> int:
    print(f"soorma: {message}", file=sys.stderr)
    return code


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


async def _add(args: argparse.Namespace) -> int:
    try:
        metadata = json.loads(args.metadata)
    except json.JSONDecodeError as exc:
        return _fail(f"--metadata is not valid JSON ({exc})", 2)
    if not isinstance(metadata, dict):
        return _fail('--metadata must be a JSON object, e.g. \'{"team": "billing"}\'', 2)
    text = " ".join(args.text)
    if bool(text) == bool(args.file):
        return _fail("give the text to store, or --file PATH (not both)", 2)
    options: dict[str, Any] = {
        "metadata": metadata,
        "tags": args.tag,
        "source": args.source,
        "public": args.public,
    }
    if args.situation:
        return await _add_procedure(args, text, metadata)
    async with _context(args) as context:
        knowledge = context.memory.knowledge
        if args.file:
            content = args.file.read_text(encoding="utf-8")
            document_id = args.external_id or args.file.name
            chunks = await knowledge.add_document(
                document_id,
                content,
                chunk_size=args.chunk_size,
                chunk_overlap=args.chunk_overlap,
                **{**options, "source": args.source or args.file.name},
            )
            if args.json:
                _print_json([c.model_dump(mode="json") for c in chunks])
            else:
                print(f"stored {document_id} as {len(chunks)} chunk(s)")
            return 0
        record = await knowledge.add(text, external_id=args.external_id, **options)
    if args.json:
        _print_json(record.model_dump(mode="json"))
    else:
        named = f" ({record.external_id})" if record.external_id else ""
        scope = "public" if record.public else f"private to {record.user_id}"
        print(f"stored {record.id}{named}, {scope}, model {record.embedding_model}")
    return 0


async def _add_procedure(args: argparse.Namespace, text: str, metadata: dict[str, Any]) -> int:
    if not text:
        return _fail("give the procedure's text (--file is for knowledge documents)", 2)
    async with _context(args) as context:
        record = await context.memory.procedures.add(
            text,
            situation=args.situation,
            kind=args.kind,
            agent_id=args.agent,
            metadata=metadata,
            tags=args.tag,
            public=args.public,
        )
    if args.json:
        _print_json(record.model_dump(mode="json"))
    else:
        scope = "public" if record.public else f"private to {record.user_id}"
        agent = f" for {record.agent_id}" if record.agent_id else ""
        print(f"stored {record.kind} {record.id}{agent}, {scope}")
    return 0


def _where(pairs: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--where takes KEY=VALUE, got {pair!r}")
        try:
            found[key] = json.loads(raw)
        except json.JSONDecodeError:
            found[key] = raw
    return found


def format_hit(rank: int, hit: Any) -> str:
    """One line of ``soorma memory search``."""
    record = hit.record
    text = _one_line(record.content)
    if len(text) > SNIPPET_CHARS:
        text = text[: SNIPPET_CHARS - 3] + "..."
    where = [record.external_id or record.id]
    if record.source:
        where.append(f"source={record.source}")
    if record.tags:
        where.append("tags=" + ",".join(record.tags))
    if record.public:
        where.append("public")
    return f"{rank:>2}. {hit.score:.4f}  [{' '.join(where)}]  {text}"


async def _search(args: argparse.Namespace) -> int:
    metadata = _where(args.where)
    async with _context(args) as context:
        found = await context.memory.knowledge.search(
            " ".join(args.query),
            limit=args.limit,
            include_public=not args.own,
            tags=args.tag,
            source=args.source,
            metadata=metadata,
            min_score=args.min_score,
            mode="vector" if args.vector else "hybrid",
        )
    if args.json:
        _print_json(found.model_dump(mode="json"))
        return 0
    if not found.hits:
        print(f"no matches ({found.mode}, model {found.embedding_model})")
        return 0
    for rank, hit in enumerate(found.hits, start=1):
        print(format_hit(rank, hit))
    print(f"{len(found.hits)} hit(s), {found.mode} ranking, model {found.embedding_model}")
    return 0


_AGE = re.compile(r"^(\d+)([smhdw])$")
_AGE_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_when(value: str | None, option: str) -> datetime | None:
    """``--since``/``--until``: an ISO 8601 time (UTC when it has no offset) or an age
    before now such as ``30m``, ``12h``, ``7d``."""
    if value is None:
        return None
    age = _AGE.match(value.strip())
    if age:
        amount, unit = age.groups()
        return datetime.now(UTC) - timedelta(**{_AGE_UNITS[unit]: int(amount)})
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"{option} {value!r} is neither an ISO 8601 time nor an age like 30m, 12h, 7d"
        ) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def format_episode(record: Any, score: float | None = None, rank: int | None = None) -> str:
    """One line of ``soorma memory episodes recent|search``."""
    text = _one_line(record.content)
    if len(text) > SNIPPET_CHARS:
        text = text[: SNIPPET_CHARS - 3] + "..."
    when = record.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    session = f" session={record.session_id}" if record.session_id else ""
    line = f"{when}  {record.role:<9}{text}  [{record.id}{session}]"
    if score is None:
        return line
    return f"{rank:>2}. {score:.4f}  {line}"


async def _episodes(args: argparse.Namespace) -> int:
    verb = args.episodes_command
    if verb == "log":
        try:
            metadata = json.loads(args.metadata)
        except json.JSONDecodeError as exc:
            return _fail(f"--metadata is not valid JSON ({exc})", 2)
        if not isinstance(metadata, dict):
            return _fail("--metadata must be a JSON object", 2)
    since = parse_when(getattr(args, "since", None), "--since")
    until = parse_when(getattr(args, "until", None), "--until")
    async with _context(args) as context:
        episodes = context.memory.episodes
        if verb == "log":
            record = await episodes.log(
                args.agent_id,
                args.role,
                " ".join(args.text),
                metadata=metadata,
                session_id=args.session,
                plan_id=args.plan,
            )
            if args.json:
                _print_json(record.model_dump(mode="json"))
            else:
                print(f"logged {record.id} ({record.role}, agent {record.agent_id})")
            return 0
        if verb == "recent":
            records = await episodes.recent(
                args.agent_id, limit=args.limit, session_id=args.session
            )
            if args.json:
                _print_json([r.model_dump(mode="json") for r in records])
            elif not records:
                print(f"no episodes with agent {args.agent_id}")
            else:
                for record in records:
                    print(format_episode(record))
            return 0
        found = await episodes.search(
            args.agent_id,
            " ".join(args.query),
            limit=args.limit,
            since=since,
            until=until,
            session_id=args.session,
            min_score=args.min_score,
        )
    if args.json:
        _print_json(found.model_dump(mode="json"))
    elif not found.hits:
        print(f"no matching episodes with agent {args.agent_id}")
    else:
        for rank, hit in enumerate(found.hits, start=1):
            print(format_episode(hit.record, hit.score, rank))
        print(f"{len(found.hits)} hit(s)")
    return 0


async def _forget(args: argparse.Namespace) -> int:
    if not args.yes:
        return _fail(
            f"this deletes all long-term memory of user {args.user_id!r}; "
            "run again with --yes to do it",
            2,
        )
    async with _context(args) as context:
        result = await context.memory.forget_user(args.user_id)
    if args.json:
        _print_json(result.model_dump(mode="json"))
    else:
        print(
            f"forgot user {result.user_id}: {result.semantic} knowledge record(s), "
            f"{result.episodic} episode(s), {result.procedural} procedure(s)"
        )
    return 0


def format_reembed(status: Any) -> str:
    """One progress line of ``soorma memory reembed``."""
    line = f"re-embed to {status.model}: {status.state} ({status.done}/{status.total})"
    return f"{line}: {status.error}" if status.error else line


async def _reembed(args: argparse.Namespace) -> int:
    async with _context(args) as context:
        memory = context.memory
        status = await (memory.reembed_status() if args.status else memory.reembed())
        while True:
            if args.json:
                print(json.dumps(status.model_dump(mode="json"), default=str), flush=True)
            else:
                print(format_reembed(status), flush=True)
            if not args.wait or status.state != "running":
                break
            await asyncio.sleep(REEMBED_POLL_SECONDS)
            status = await memory.reembed_status()
    return 1 if status.state == "failed" else 0


async def _info(args: argparse.Namespace) -> int:
    async with _context(args) as context:
        info = await context.memory.embedding_info()
    if args.json:
        _print_json(info.model_dump(mode="json"))
    else:
        print(f"embedding model {info.model} ({info.provider}, {info.dimensions} dimensions)")
        if info.records_on_other_models:
            print(
                f"{info.records_on_other_models} record(s) on another model: "
                "run `soorma memory reembed`"
            )
    return 0


__all__ = ["add_parser", "format_episode", "format_hit", "format_reembed", "parse_when", "run"]
