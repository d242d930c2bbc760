"""``soorma agents list``: the registered agents, when each was last seen and how far its
consumer group is behind (the tracker's ``GET /v1/tracker/agents``)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from soorma_common.agent_status import ConnectedAgent, ConnectedAgentList, GroupLag

HEADERS = ("AGENT", "STATUS", "LAST SEEN", "LAG", "PENDING", "CAPABILITIES", "CONSUMES")
START_HINT = (
    "no agents registered for this tenant. Start one: 'soorma init hello --type worker', "
    "then 'python hello/agent.py' (with 'soorma dev' running)"
)


def add_parser(commands: Any) -> None:
    """Register ``soorma agents`` on the CLI's sub-command parser."""
    agents = commands.add_parser(
        "agents", help="registered agents: heartbeat and consumer lag (tracker)"
    )
    actions = agents.add_subparsers(dest="agents_command", required=True, metavar="ACTION")
    listing = actions.add_parser(
        "list",
        help="one line per agent: status, last seen, lag, capabilities, consumed events",
        description="Agents registered for your tenant, as the tracker sees them: 'live' "
        "while they heartbeat, 'stale' once their TTL passed without one. LAG: events "
        "waiting for the agent's consumer group; PENDING: delivered, not yet acknowledged.",
    )
    listing.add_argument("--live", action="store_true", help="leave out stale agents")
    listing.add_argument("--json", action="store_true", help="print the API's JSON")
    listing.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour stale agents and lag (auto: on a terminal, unless NO_COLOR is set)",
    )
    listing.add_argument("--url", help="tracker URL (default: SOORMA_TRACKER_URL)")


def run(args: argparse.Namespace) -> int:
    """Run ``soorma agents ...``; the exit code."""
    return asyncio.run(_list(args))


def ago(when: datetime | None, now: datetime) -> str:
    """``when`` relative to ``now``: ``4s ago``, ``3m ago``, ``2h ago``, ``5d ago``."""
    if when is None:
        return "never"
    seconds = max(0, int((now - when).total_seconds()))
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


def _counts(group: GroupLag | None) -> tuple[str, str]:
    if group is None:
        return "-", "-"
    return str(group.lag), str(group.pending)


def agent_row(agent: ConnectedAgent, now: datetime) -> list[str]:
    """The cells of one agent's line."""
    lag, pending = _counts(agent.consumer_group)
    return [
        agent.name if agent.name == agent.agent_id else f"{agent.name} ({agent.agent_id})",
        "stale" if agent.stale else "live",
        ago(agent.last_seen, now),
        lag,
        pending,
        ", ".join(agent.capabilities) or "-",
        ", ".join(agent.consumes) or "-",
    ]


def table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns two spaces apart; the last column is not padded."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return [
        "  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]).rstrip()
        for r in rows
    ]


def format_agents(listing: ConnectedAgentList, *, color: bool = False) -> list[str]:
    """``soorma agents list`` as lines: the agents' table, then groups no agent owns."""
    from soorma._cli_style import paint

    now = listing.checked_at
    lines: list[str] = []
    if listing.agents:
        rows = [list(HEADERS), *(agent_row(a, now) for a in listing.agents)]
        for i, line in enumerate(table(rows)):
            if i and listing.agents[i - 1].stale:
                line = paint(line, "error", color)
            elif i == 0:
                line = paint(line, "dim", color)
            lines.append(line)
    if listing.other_groups:
        if lines:
            lines.append("")
        lines.append("consumer groups with no registered agent:")
        rows = [["GROUP", "LAG", "PENDING", "LAST DELIVERED"]]
        rows += [
            [g.group, str(g.lag), str(g.pending), ago(g.last_delivered_at, now)]
            for g in listing.other_groups
        ]
        lines += ["  " + line for line in table(rows)]
    return lines


async def _list(args: argparse.Namespace) -> int:
    from soorma._cli_style import use_color
    from soorma.context import PlatformContext
    from soorma.settings import PlatformSettings
    from soorma_common.errors import SoormaError

    settings = PlatformSettings.from_env()
    if args.url:
        from dataclasses import replace

        settings = replace(settings, tracker_url=args.url)
    async with PlatformContext.from_env(settings=settings) as context:
        try:
            listing = await context.tracker.agents(stale=not args.live)
        except SoormaError as exc:
            print(f"soorma: {exc}", file=sys.stderr)
            return 1
    if args.json:
        print(listing.model_dump_json(indent=2))
        return 0
    for error in listing.errors:
        print(f"soorma: warning: {error} (lag unknown)", file=sys.stderr)
    if not listing.agents:
        print(START_HINT, file=sys.stderr)
    for line in format_agents(listing, color=use_color(args.color, sys.stdout)):
        print(line)
    return 0


__all__ = ["add_parser", "agent_row", "ago", "format_agents", "run", "table"]
