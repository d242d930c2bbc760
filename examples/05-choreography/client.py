"""Sends a research goal to the planner and prints the final report.

    python client.py "event-driven agents"

The last line names the plan, so you can look at it afterwards: its results and the audit
of every LLM call are in the memory service (``GET /v1/memory/plan-context/{plan_id}``).
"""

from __future__ import annotations

import argparse
import sys

from soorma import PlatformContext, run_client

DEFAULT_TOPIC = "event-driven choreography"


async def main(topic: str, wait_seconds: float) -> int:
    async with PlatformContext.from_env() as context:
        answer = await context.bus.call(
            "doc.research.requested",
            {"topic": topic},
            response_event="doc.research.completed",
            timeout=wait_seconds,
        )
    data = answer.data
    result = data.get("result") or {}
    if data.get("status") != "completed" or "report" not in result:
        error = data.get("error") or result.get("error") or result
        print(f"research failed: {error}", file=sys.stderr)
        print(f"plan {data.get('plan_id')}: {data.get('status')}")
        return 1
    print(result["report"])
    print()
    print(f"plan {data['plan_id']}: completed")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Ask the research planner for a report.")
    parser.add_argument("topic", nargs="*", help=f"what to research (default: {DEFAULT_TOPIC})")
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds to wait for the report (a real model takes a while)",
    )
    args = parser.parse_args()
    raise SystemExit(run_client(main(" ".join(args.topic) or DEFAULT_TOPIC, args.timeout)))
