"""``soorma plans list|show|cancel`` and ``soorma tasks show|answer|timeout``: the tracker's
view of plans, in a terminal, and acting on them through the event service."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import datetime
from typing import Any

from soorma_common.tracker import PlanDetail, PlanSummary, TaskDetail, TimelineEntry

STATUS_MARK = {
    "completed": "✔",
    "failed": "✘",
    "cancelled": "∅",
    "paused": "‖",
    "running": "▶",
    "pending": "…",
    "delegated": "→",
    "waiting": "…",
}


def add_parser(commands: Any) -> None:
    """Register ``soorma plans`` on the CLI's sub-command parser."""
    plans = commands.add_parser("plans", help="list plans and show their timelines (tracker)")
    actions = plans.add_subparsers(dest="plans_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="plans, newest first")
    listing.add_argument("--status", help="pending|running|paused|completed|failed|cancelled")
    listing.add_argument("--goal-event", help="the goal's event type")
    listing.add_argument("--session", help="plans of one session")
    listing.add_argument(
        "--search", help="a plan, correlation or event id, or a prefix of one (4+ chars)"
    )
    listing.add_argument("--limit", type=int, default=20)
    listing.add_argument("--json", action="store_true", help="print the API's JSON")
    listing.add_argument("--url", help="tracker URL (default: SOORMA_TRACKER_URL)")
    show = actions.add_parser("show", help="one plan: state path, timeline, waits")
    show.add_argument(
        "plan_id",
        metavar="ID",
        help="plan id, the goal's correlation id, an event id, or a prefix of one",
    )
    show.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="keep printing new timeline entries until the plan ends",
    )
    show.add_argument("--json", action="store_true", help="print JSON (lines with --follow)")
    show.add_argument("--url", help="tracker URL (default: SOORMA_TRACKER_URL)")
    cancel = actions.add_parser(
        "cancel", help="ask the plan's planner to cancel it (publishes plan.cancel_requested)"
    )
    cancel.add_argument("plan_id", metavar="ID", help="plan id (or the goal's correlation id)")
    cancel.add_argument("--reason", required=True, help="why (recorded and sent to the caller)")
    cancel.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for the plan to end and print how it ended",
    )
    cancel.add_argument("--url", help="tracker URL (default: SOORMA_TRACKER_URL)")

    tasks = commands.add_parser("tasks", help="act on tasks (tracker)")
    task_actions = tasks.add_subparsers(dest="tasks_command", required=True, metavar="ACTION")
    answer = task_actions.add_parser(
        "answer",
        help="answer a pending human input, or release a planner WAIT, as yourself",
    )
    answer.add_argument(
        "task_id",
        metavar="ID",
        help="a human input's sub-task id or task id; a planner WAIT's id or plan id",
    )
    answer.add_argument("--data", required=True, help="the answer, a JSON object")
    answer.add_argument("--url", help="tracker URL (default: SOORMA_TRACKER_URL)")
    show_task = task_actions.add_parser(
        "show", help="one task: status (e.g. cancelled, with why), answer, sub-tasks"
    )
    show_task.add_argument("task_id", metavar="ID", help="the request's event id")
    show_task.add_argument("--json", action="store_true", help="print the API's JSON")
    show_task.add_argument("--url", help="tracker URL (default: SOORMA_TRACKER_URL)")
    timeout = task_actions.add_parser(
        "timeout",
        help="time out a pending human input or planner WAIT now (its timeout branch)",
    )
    timeout.add_argument(
        "task_id",
        metavar="ID",
        help="a human input's sub-task id or task id; a planner WAIT's id or plan id",
    )
    timeout.add_argument("--reason", help="why (recorded on the timeout event)")
    timeout.add_argument("--url", help="tracker URL (default: SOORMA_TRACKER_URL)")


def run(args: argparse.Namespace) -> int:
    """Run ``soorma plans ...`` or ``soorma tasks ...``; the exit code."""
    if args.command == "tasks":
        task_handler = {"answer": _answer, "timeout": _timeout, "show": _show_task}[
            args.tasks_command
        ]
        return asyncio.run(task_handler(args))
    handler = {"list": _list, "show": _show, "cancel": _cancel}[args.plans_command]
    return asyncio.run(handler(args))


def _context(url: str | None) -> Any:
    from dataclasses import replace

    from soorma.context import PlatformContext
    from soorma.settings import PlatformSettings

    settings = PlatformSettings.from_env()
    if url:
        settings = replace(settings, tracker_url=url)
    return PlatformContext.from_env(settings=settings)


def _fail(message: str, code: int = 1) -> int:
    print(f"soorma: {message}", file=sys.stderr)
    return code


def _clock(value: datetime | None) -> str:
    return value.strftime("%H:%M:%S.%f")[:-3] if value else "--:--:--"


def _ms(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:.0f} ms" if value < 10_000 else f"{value / 1000:.1f} s"


def format_plan_row(plan: PlanSummary) -> str:
    """One line of ``soorma plans list``."""
    mark = STATUS_MARK.get(plan.status.value, "?")
    parts = [
        plan.created_at.strftime("%Y-%m-%d %H:%M:%S"),
        f"{mark} {plan.status.value:<9}",
        plan.plan_id,
        plan.goal_event or "-",
        plan.current_state or "-",
    ]
    if plan.duration_ms is not None:
        parts.append(_ms(plan.duration_ms))
    return "  ".join(parts)


def format_entry(entry: TimelineEntry, start: datetime | None) -> str:
    """One timeline line: clock, offset from the plan's start, what happened, how long."""
    offset = f"+{(entry.time - start).total_seconds():.3f}s" if start else ""
    line = f"  {_clock(entry.time)} {offset:>10}  {entry.summary}"
    if entry.duration_ms is not None:
        line += f"  ({_ms(entry.duration_ms)})"
    return line


def format_plan(plan: PlanDetail) -> list[str]:
    """The header of ``soorma plans show``: status, goal, path, waits."""
    mark = STATUS_MARK.get(plan.status.value, "?")
    lines = [
        f"plan {plan.plan_id}  {mark} {plan.status.value}"
        + (f" ({plan.reason})" if plan.reason else "")
    ]
    facts = [
        ("goal", plan.goal_event),
        ("goal correlation", plan.goal_correlation_id),
        ("planner", plan.planner),
        ("session", plan.session_id),
        ("parent plan", plan.parent_plan_id),
        ("state", plan.current_state),
        ("duration", _ms(plan.duration_ms) or None),
    ]
    lines += [f"  {name}: {value}" for name, value in facts if value]
    if plan.state_path:
        path = [plan.state_path[0].from_state or "(start)"]
        path += [step.to_state for step in plan.state_path]
        lines.append("  path: " + " -> ".join(path))
    for wait in plan.waits:
        lines.append(
            f"  wait {wait.kind} for {wait.expected_event or '?'}: {wait.status.value}"
            + (f", deadline {_clock(wait.deadline)}" if wait.deadline else "")
        )
    if plan.sub_plan_ids:
        lines.append("  sub-plans: " + ", ".join(plan.sub_plan_ids))
    if plan.context and plan.context.llm_audit:
        lines.append(f"  LLM calls: {len(plan.context.llm_audit)} (see the UI or --json)")
    return lines


async def _list(args: argparse.Namespace) -> int:
    from soorma_common.errors import SoormaError

    async with _context(args.url) as context:
        try:
            page = await context.tracker.list_plans(
                status=args.status,
                goal_event=args.goal_event,
                session_id=args.session,
                search=args.search,
                limit=args.limit,
            )
        except SoormaError as exc:
            return _fail(str(exc))
    if args.json:
        print(page.model_dump_json(indent=2))
        return 0
    if not page.plans:
        print("no plans yet", file=sys.stderr)
    for plan in page.plans:
        print(format_plan_row(plan))
    return 0


async def _resolve(tracker: Any, ident: str) -> PlanDetail:
    """The plan ``ident`` names: its id, its goal's correlation id, or (at least 4
    characters) a prefix of a plan, correlation or event id that only one plan matches."""
    from soorma_common.errors import PlanNotFound

    try:
        plan: PlanDetail = await tracker.get_plan(ident)
        return plan
    except PlanNotFound:
        pass
    try:
        found = await tracker.plan_by_correlation(ident)
    except PlanNotFound:
        if len(ident) < 4:
            raise
        page = await tracker.list_plans(search=ident, limit=10)
        matches = [p.plan_id for p in page.plans]
        if not matches:
            raise
        if len(matches) > 1:
            listed = ", ".join(matches[:5]) + (" ..." if page.next_cursor else "")
            raise PlanNotFound(
                f"{ident!r} matches {len(matches)}{'+' if page.next_cursor else ''} plans "
                f"({listed}); give more of the id",
                details={"matches": matches},
            ) from None
        plan = await tracker.get_plan(matches[0])
        return plan
    plan = await tracker.get_plan(found.plan_id)
    return plan


async def _show(args: argparse.Namespace) -> int:
    from soorma_common.errors import SoormaError

    async with _context(args.url) as context:
        tracker = context.tracker
        try:
            plan = await _resolve(tracker, args.plan_id)
            timeline = await tracker.timeline(plan.plan_id, limit=500)
            entries = list(timeline.entries)
            while timeline.next_cursor:
                timeline = await tracker.timeline(
                    plan.plan_id, limit=500, cursor=timeline.next_cursor
                )
                entries.extend(timeline.entries)
            start = plan.started_at or plan.created_at
            if args.json and not args.follow:
                print(
                    json.dumps(
                        {
                            "plan": plan.model_dump(mode="json"),
                            "timeline": [e.model_dump(mode="json") for e in entries],
                        },
                        indent=2,
                    )
                )
                return 0
            if args.json:
                print(json.dumps({"plan": plan.model_dump(mode="json")}), flush=True)
                for e in entries:
                    print(json.dumps({"entry": e.model_dump(mode="json")}), flush=True)
            else:
                print("\n".join(format_plan(plan)))
                print("timeline:")
                for e in entries:
                    print(format_entry(e, start), flush=True)
            if not args.follow:
                return 0
            last = entries[-1].seq if entries else 0
            async for kind, data in tracker.stream(plan.plan_id, after_seq=last):
                if args.json:
                    print(json.dumps({kind: data}), flush=True)
                elif kind == "entry":
                    print(format_entry(TimelineEntry.model_validate(data), start), flush=True)
                elif kind == "end":
                    ended = PlanSummary.model_validate(data)
                    print(
                        f"plan {ended.status.value}"
                        + (f" ({ended.reason})" if ended.reason else ""),
                        flush=True,
                    )
        except SoormaError as exc:
            return _fail(str(exc))
    return 0


def format_task(task: TaskDetail) -> list[str]:
    """``soorma tasks show``: the task's status line, facts, then one line per sub-task."""
    status = task.status.value
    why = task.reason or task.error
    lines = [
        f"task {task.task_id or task.correlation_id}  {STATUS_MARK.get(status, '?')} {status}"
        + (f" ({why})" if why else "")
    ]
    facts = [
        ("request", task.event_type),
        ("plan", task.plan_id),
        ("requested by", task.requester),
        ("answered by", task.agent),
        ("answer", task.answer_type),
        ("latency", _ms(task.latency_ms) or None),
    ]
    lines += [f"  {name}: {value}" for name, value in facts if value]
    for sub in task.sub_tasks:
        mark = STATUS_MARK.get(sub.status.value, "?")
        lines.append(
            f"  sub-task {sub.task_id or sub.correlation_id}  {mark} {sub.status.value}"
            f"  {sub.event_type or '-'}"
        )
    return lines


async def _show_task(args: argparse.Namespace) -> int:
    from soorma_common.errors import SoormaError

    async with _context(args.url) as context:
        try:
            task = await context.tracker.task(args.task_id)
        except SoormaError as exc:
            return _fail(str(exc))
    print(task.model_dump_json(indent=2) if args.json else "\n".join(format_task(task)))
    return 0


async def _answer(args: argparse.Namespace) -> int:
    from soorma_common.errors import SoormaError

    try:
        data = json.loads(args.data)
    except ValueError as exc:
        return _fail(f"--data is not JSON: {exc}", 2)
    if not isinstance(data, dict):
        return _fail("--data must be a JSON object", 2)
    async with _context(args.url) as context:
        try:
            event_id = await context.tracker.answer_task(args.task_id, data)
        except SoormaError as exc:
            return _fail(str(exc))
    print(f"answered {args.task_id} (event {event_id})")
    return 0


async def _timeout(args: argparse.Namespace) -> int:
    from soorma_common.errors import SoormaError

    async with _context(args.url) as context:
        try:
            event_id = await context.tracker.timeout_task(args.task_id, reason=args.reason)
        except SoormaError as exc:
            return _fail(str(exc))
    print(f"timed out {args.task_id} (event {event_id})")
    return 0


async def _cancel(args: argparse.Namespace) -> int:
    from soorma_common.errors import SoormaError

    async with _context(args.url) as context:
        try:
            plan = await _resolve(context.tracker, args.plan_id)
            if plan.status.value in ("completed", "failed", "cancelled"):
                return _fail(f"plan {plan.plan_id} has already ended ({plan.status.value})")
            event_id = await context.cancel_plan(plan.plan_id, args.reason)
            print(f"cancel requested for plan {plan.plan_id} (event {event_id})")
            if args.wait <= 0:
                return 0
            ended = await context.tracker.wait_for_plan(
                plan.plan_id, until_finished=True, timeout=args.wait
            )
        except TimeoutError:
            return _fail(f"plan {args.plan_id} did not end within {args.wait:g} s")
        except SoormaError as exc:
            return _fail(str(exc))
    print(f"plan {ended.status.value}" + (f" ({ended.reason})" if ended.reason else ""))
    return 0 if ended.status.value == "cancelled" else 1


__all__ = ["add_parser", "format_entry", "format_plan", "format_plan_row", "run"]
